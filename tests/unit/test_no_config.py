"""Issue 30 #10: with no config the console says so (and where it looked) instead of
opening on whatever listens on loopback; ``--config`` goes before a subcommand or
without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.model.snapshot import PodSnapshot
from console.operations.ops import resume
from tests.conftest import REPO
from tests.unit.test_operations_modules import _facts


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POD_CONSOLE_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "cfg"),
               XDG_STATE_HOME=str(home / "state"), PYTHONPATH=str(REPO), TERM="dumb",
               **extra)
    return env


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "console.cli", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:  # it opened the console instead of refusing
        raise AssertionError(f"pod-console {' '.join(args)} did not return: it opened "
                             f"the console on the defaults ({str(exc.stderr)[-300:]!r})") from None


@pytest.mark.parametrize("args", [[], ["watch"], ["wall"]])
def test_no_config_refuses_to_open_on_the_defaults_and_says_where_it_looked(
        tmp_path: Path, args: list[str]) -> None:
    """From a directory that has profiles (a checkout) but no config, the defaults
    would point the console at 127.0.0.1's slot ports: a demo there would pass for the
    operator's pod, with ``r`` offering to start and bill it."""
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    r = _cli(args, tmp_path, _env(tmp_path))
    assert r.returncode == 1, (r.stdout, r.stderr)
    err = r.stderr
    assert "no config found" in err, err
    assert str(tmp_path / "cfg" / "pod-console" / "config.yaml") in err
    assert "--config PATH" in err and "$POD_CONSOLE_CONFIG" in err
    assert "pod-console demo" in err and "Traceback" not in err


def test_a_config_in_the_environment_is_a_config(tmp_path: Path) -> None:
    """``POD_CONSOLE_POD__*`` names a pod: the no-config refusal stays out of the way
    (the settings then say what is missing, here the profiles)."""
    r = _cli(["watch"], tmp_path, _env(tmp_path, POD_CONSOLE_POD__HOST="127.0.0.1",
                                       POD_CONSOLE_PROFILES_DIR=str(tmp_path / "none")))
    assert r.returncode == 1 and "no config found" not in r.stderr, r.stderr
    assert "no profiles" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["--config", "ctx.yaml"], ["--config", "ctx.yaml", "status"],
                                  ["status", "--config", "ctx.yaml"],
                                  ["--config", "ctx.yaml", "watch"]])
def test_config_goes_before_a_subcommand_or_without_one(tmp_path: Path,
                                                          args: list[str]) -> None:
    """The file is read wherever ``--config`` stands (a key it refuses proves it was
    read), never "invalid choice"."""
    (tmp_path / "ctx.yaml").write_text("no_such_key: 1\n")
    r = _cli(args, tmp_path, _env(tmp_path))
    assert "invalid choice" not in r.stderr and "unrecognized" not in r.stderr, r.stderr
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "ctx.yaml:1: no_such_key" in r.stderr, r.stderr


def test_config_before_a_command_that_reads_none_is_refused(tmp_path: Path) -> None:
    r = _cli(["--config", "ctx.yaml", "demo"], tmp_path, _env(tmp_path))
    assert r.returncode == 2 and "`demo` reads no config file" in r.stderr, r.stderr


def test_resume_never_offers_to_start_a_pod_nobody_named(tmp_path: Path) -> None:
    why = resume.preflight(_facts(tmp_path), {})
    assert why is not None and "no pod is known" in why
    assert resume.preflight(_facts(tmp_path, PodSnapshot(pod_id="emu1", status="EXITED")),
                            {}) is None
    from console.config.settings import PodSettings

    named = _facts(tmp_path)
    named.settings.pod = PodSettings(machine_id="abc")
    assert resume.preflight(named, {}) is None
