"""Every broken profile in tests/profiles_broken is rejected with its exact field and line.

Expectations live in a ``.expect`` file next to each YAML file (so they do not
shift the YAML's own line numbers): one ``# expect: LINE | FIELD | TEXT`` per
problem; the file must produce exactly those problems, no more.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from pod_agent.profiles import check_file

CORPUS = Path(__file__).resolve().parent.parent / "profiles_broken"
CASES = sorted(CORPUS.glob("*.yaml"))


def _expectations(path: Path) -> list[tuple[int, str, str]]:
    out = []
    for line in path.with_suffix(".expect").read_text().splitlines():
        body = line.removeprefix("# expect: ")
        lineno, field, text = (x.strip() for x in body.split(" | "))
        out.append((int(lineno), field, text))
    return out


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_broken_profile_reports_field_and_line(path: Path) -> None:
    profile, problems = check_file(path)
    assert profile is None
    expected = _expectations(path)
    got = [(p.line, p.field, p.message) for p in problems]
    assert len(got) == len(expected), got
    for line, field, text in expected:
        assert any(g[0] == line and g[1] == field and text in g[2] for g in got), (
            f"expected {line} {field} {text!r} in {got}")


def test_cli_prints_path_line_field_and_exits_1() -> None:
    bad = CORPUS / "duplicate-port.yaml"
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "check", str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert f"{bad}:20: slots.Q27.port: port 8881 already used by slot FLASH" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_cli_checks_a_directory_and_reports_every_file() -> None:
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "check", str(CORPUS)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Traceback" not in r.stdout + r.stderr
    for case in CASES:
        assert str(case) in r.stdout


def test_missing_file_is_one_clear_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "console.cli", "profile", "check",
                        str(tmp_path / "nope.yaml")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stdout.strip() == f"{tmp_path / 'nope.yaml'}: No such file or directory"


def test_huge_file_refused_without_parsing(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("x: " + "a" * (8 * 1024 * 1024) + "\n")
    t0 = time.perf_counter()
    _, problems = check_file(big)
    assert time.perf_counter() - t0 < 0.5
    assert len(problems) == 1 and "larger than 256 KiB" in problems[0].message


def test_alias_bomb_is_fast() -> None:
    t0 = time.perf_counter()
    _, problems = check_file(CORPUS / "alias-bomb.yaml")
    assert time.perf_counter() - t0 < 0.5
    assert "alias bomb" in problems[0].message


def test_benign_anchors_are_allowed(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "profiles" / "10-rtx6000-2x.yaml").read_text()
    spec = "    speculative:\n      method: mtp\n      num_speculative_tokens: 3\n"
    text = text.replace(spec + "  Q27:",
                        "    speculative: &mtp3\n      method: mtp\n"
                        "      num_speculative_tokens: 3\n  Q27:", 1)
    text = text.replace("    speculative:\n      method: mtp\n      num_speculative_tokens: 3\n"
                        "aliases:", "    speculative: *mtp3\naliases:")
    assert "*mtp3" in text
    p = tmp_path / "anch.yaml"
    p.write_text(text)
    profile, problems = check_file(p)
    assert problems == []
    assert profile is not None and profile.slots["Q27"].speculative is not None


def test_unquoted_clock_time_is_not_base_60(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "profiles" / "10-rtx6000-2x.yaml").read_text()
    p = tmp_path / "t.yaml"
    p.write_text(text.replace('stop: "18:00"', "stop: 17:50"))
    profile, problems = check_file(p)
    assert problems == [] and profile is not None
    assert profile.schedule.stop == "17:50"
