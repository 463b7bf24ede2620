"""The first frame's plain reading of the config agrees with the validated one.

``boot.plan`` reads the same files and environment as ``load_settings`` +
``open_deployment`` without pydantic. Whatever it returns must poll exactly as the
validated path would (same ``DeploymentPoller.config_key``); whatever it is not sure
about must make it return None (the console then validates first).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.commands.pod_cmd import apply_current_pod
from console.config import settings
from console.config.settings import load_settings
from console.session import boot
from console.session.deployment import open_deployment
from console.sources.collect.poller import DeploymentPoller
from tests.conftest import PROFILES


def _validated_key(cfg: Path, refresh: float | None = None) -> tuple[object, ...]:
    s = load_settings(cfg, refresh_s=refresh)
    apply_current_pod(s)
    return open_deployment(s).new_poller().config_key()


def _boot_key(cfg: Path, refresh: float | None = None) -> tuple[object, ...]:
    p = boot.plan(cfg, refresh)
    assert p is not None
    return DeploymentPoller(p.profile_name, p.targets, prometheus_url=p.prometheus_url,
                            window_s=p.window_s, timeout_s=p.request_timeout_s,
                            api_key=p.api_key, prom_selector=p.prom_selector).config_key()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for k in ("POD_CONSOLE_REFRESH_S", "POD_CONSOLE_POD__HOST", "POD_CONSOLE_POD",
              "POD_CONSOLE_PROFILE", "POD_CONSOLE_STATE_DIR", "VLLM_API_KEY",
              "POD_CONSOLE_PROMETHEUS_URL", "POD_CONSOLE_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


def _config(tmp_path: Path, text: str) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {PROFILES}\nstate_dir: {tmp_path / 'state'}\n" + text)
    return cfg


@pytest.mark.parametrize("text", [
    "",
    "pod:\n  runpod_id: abc123\n  host: 10.1.2.3\n  port_map: {8881: 40001, 8882: 40002}\n",
    "refresh_s: 0.2\nwindow_s: 600\nprometheus_url: http://127.0.0.1:9090\n",
    "profile: h100-2x\nrefresh_s: 5\n",
])
def test_plan_polls_as_the_validated_settings_would(tmp_path, text) -> None:
    cfg = _config(tmp_path, text)
    assert _boot_key(cfg) == _validated_key(cfg)
    assert _boot_key(cfg, 3.0) == _validated_key(cfg, 3.0)


def test_environment_and_the_remembered_pod_win_as_they_do_for_settings(tmp_path,
                                                                       monkeypatch) -> None:
    cfg = _config(tmp_path, "refresh_s: 5\npod:\n  runpod_id: old\n  host: 10.0.0.1\n")
    monkeypatch.setenv("POD_CONSOLE_REFRESH_S", "7")
    monkeypatch.setenv("POD_CONSOLE_POD__HOST", "10.9.9.9")
    monkeypatch.setenv("VLLM_API_KEY", "sk-slots")
    assert _boot_key(cfg) == _validated_key(cfg)
    state = tmp_path / "state"
    state.mkdir()
    (state / "current_pod.json").write_text(json.dumps({
        "pod_id": "newpod", "profile": "a100-2x", "host": "203.0.113.7",
        "port_map": {"8881": 41001}}))
    key = _boot_key(cfg)
    assert key == _validated_key(cfg)
    plan = boot.plan(cfg)
    assert plan is not None and plan.profile_name == "a100-2x" and plan.pod_id == "newpod"
    assert plan.refresh_s == 7 and plan.targets[0].base_url.startswith("http://203.0.113.7:")


@pytest.mark.parametrize("text, env", [
    ("", {"POD_CONSOLE_POD": '{"host": "10.0.0.2"}'}),  # a section given whole, as JSON
    ("refresh_s: [\n", {}),                              # YAML syntax error
    ("refresh_s: fast\n", {}),                           # not a number
    ("profile: no-such-profile\n", {}),
    ("pod:\n  port_map: [1, 2]\n", {}),
])
def test_anything_unsure_means_the_validated_path(tmp_path, monkeypatch, text, env) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert boot.plan(_config(tmp_path, text)) is None


def test_a_profile_the_reader_cannot_use_means_the_validated_path(tmp_path) -> None:
    prof = tmp_path / "profiles"
    prof.mkdir()
    text = (PROFILES / "10-rtx6000-2x.yaml").read_text()
    (prof / "10-rtx6000-2x.yaml").write_text(text.replace("port: 8881", "port: '8881'"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"profiles_dir: {prof}\nstate_dir: {tmp_path / 's'}\n")
    assert boot.plan(cfg) is None
    assert boot.plan(tmp_path / "missing.yaml") is None  # an explicit file must exist


def test_floor_and_defaults_are_the_settings_ones(tmp_path) -> None:
    assert boot.REFRESH_FLOOR_S == settings.REFRESH_FLOOR_S
    s = settings.Settings()
    for key, value in boot.DEFAULTS.items():
        assert getattr(s, key) == (Path(value) if key == "profiles_dir" else value), key
    plan = boot.plan(_config(tmp_path, "refresh_s: 0.1\n"))
    assert plan is not None and plan.refresh_s == settings.REFRESH_FLOOR_S
    assert plan.request_timeout_s == s.model_copy(update={"refresh_s": 1.0}).request_timeout_s


def test_first_frame_path_imports_nothing_heavy() -> None:
    """What ``watch`` loads before its first frame: no pydantic, httpx, asyncssh, nor the plots.

    These are what the first frame was made to not wait for (~250 ms together); they
    load in the worker thread that builds the full context. sqlite3 (the pod commands'
    outbox) and the fleet screen (asked at every tick whether it is open) are not the
    console's to load before it either."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import console.cli, console.commands.tui_cmd, console.ui.app, console.session.boot\n"
            "import console.sources.collect.poller, console.ui.screens.main\n"
            "import console.ui.widgets.plots\n"
            "heavy = ('pydantic', 'pydantic_settings', 'httpx', 'asyncssh', 'pod_agent.profile',"
            " 'console.ui.widgets.plot_widgets', 'sqlite3', 'console.ui.screens.fleet')\n"
            "print(sorted(m for m in heavy if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    assert out == "[]"


def test_console_command_restores_garbage_collection_on_early_exit(tmp_path, capsys) -> None:
    import gc

    from console.cli import main

    assert gc.isenabled()
    assert main(["watch", "--config", str(tmp_path / "missing.yaml")]) == 1
    assert gc.isenabled()
    assert "missing.yaml" in capsys.readouterr().err


def test_exit_codes_agree_with_the_provisioner() -> None:
    from console.commands import pod_cmd
    from console.operations.provision import EXIT_FATAL

    assert pod_cmd.EXIT_FATAL == EXIT_FATAL


def test_asking_whether_the_fleet_is_shown_loads_no_fleet_screen() -> None:
    """Every tick asks (the first one before the first poll): while the fleet screen's
    module was never loaded none can be open, and asking does not load it (~4 ms)."""
    import subprocess
    import sys

    code = ("import sys\nfrom types import SimpleNamespace\n"
            "from console.ui.navigation import Navigation\n"
            "app = SimpleNamespace(screen_stack=[])\n"
            "nav = Navigation(app)\n"
            "print(nav.fleet_shown(), 'console.ui.screens.fleet' in sys.modules)\n"
            "from console.ui.screens.fleet import FleetScreen\n"
            "print(nav.fleet_shown())\n"
            "app.screen_stack.append(FleetScreen.__new__(FleetScreen))\n"
            "print(nav.fleet_shown())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    assert out == ["False", "False", "False", "True"]


def test_watch_begins_its_first_poll_before_textual_loads(tmp_path) -> None:
    """``watch`` starts the first poll as soon as the boot plan is read, before Textual and
    the screens are imported (their ~200 ms overlap its requests), and its session takes
    that poll's snapshot as its first (``console/session/first_poll.py``)."""
    import subprocess
    import sys

    cfg = _config(tmp_path, "pod:\n  host: 127.0.0.1\n  port_map: {8881: 9, 8882: 9}\n")
    code = ("import asyncio, sys\n"
            "from console.session import first_poll\n"
            "begun = []\n"
            "real = first_poll.FirstPoll.__init__\n"
            "def init(self, poller):\n"
            "    begun.append('textual' in sys.modules or 'console.ui.app' in sys.modules)\n"
            "    real(self, poller)\n"
            "first_poll.FirstPoll.__init__ = init\n"
            "from console.commands import tui_cmd\n"
            "def shown(app):\n"  # instead of running the app: what its session would poll
            "    first = app.session.staged.first_poll\n"
            "    snap = asyncio.run(first.result())\n"
            "    print(begun, first is not None,\n"
            "          sorted((s.slot, s.health) for s in snap.slots))\n"
            "    return 0\n"
            "tui_cmd.run_console = shown\n"
            "from console.cli import main\n"
            f"sys.exit(main(['watch', '--config', {str(cfg)!r}]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.strip()
    assert out == "[False] True [('FLASH', 'down'), ('Q27', 'down')]"
