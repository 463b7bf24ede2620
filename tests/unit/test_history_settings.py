"""Bounded history, quantile_over_time, and typed settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console.config.settings import ConfigError, Settings, load_settings
from console.model.history import History, quantile_over_time


def test_history_is_bounded_by_count_and_time() -> None:
    h = History(window_s=60, min_step_s=1)
    for i in range(100_000):
        h.add("S", "kv", float(i) * 0.5, 0.1)
    s = h.series("S", "kv")
    assert len(s) <= h.maxlen == 61
    assert s.points[0][0] >= s.points[-1][0] - 60


def test_a_shorter_step_lengthens_every_buffer_and_a_longer_one_cuts_nothing() -> None:
    h = History(window_s=60, min_step_s=2)
    for t in range(0, 200, 2):
        h.add("S", "kv", float(t), 0.1)
    assert h.maxlen == 31 and len(h.series("S", "kv")) == 31
    h.fit_step(1.0)  # "+": a point a second from now on
    assert h.maxlen == 61
    for t in range(200, 260):
        h.add("S", "kv", float(t), 0.2)
        h.add("T", "kv", float(t), 0.2)  # a series that starts after the change
    for name in ("S", "T"):
        pts = h.series(name, "kv").points
        assert len(pts) == 60 and pts[-1][0] - pts[0][0] == 59  # the whole window
    h.fit_step(2.0)  # "-": the buffers keep their length; time trims the window
    assert h.maxlen == 61 and len(h.series("S", "kv")) == 60
    h.add("S", "kv", 261.0, 0.3)
    pts = h.series("S", "kv").points
    assert [t for t, _ in pts] == [*map(float, range(201, 260)), 261.0]  # by time only


def test_history_ignores_nan_none_and_out_of_order() -> None:
    h = History(60, 1)
    h.add("S", "x", 10, 1.0)
    h.add("S", "x", 9, 2.0)
    h.add("S", "x", 11, float("nan"))
    h.add("S", "x", 12, None)
    assert h.series("S", "x").values() == [1.0]


def test_quantile_over_time_like_prometheus() -> None:
    assert quantile_over_time(0.5, [1, 2, 3, 4]) == 2.5
    # rank 0.99 * 99 = 98.01: 1 % of the way from xs[98]=0 to xs[99]=1
    assert quantile_over_time(0.99, [0.0] * 99 + [1.0]) == pytest.approx(0.01, abs=1e-12)
    assert quantile_over_time(1.0, [3, 1, 2]) == 3
    assert quantile_over_time(0.0, [3, 1, 2]) == 1
    assert quantile_over_time(0.5, []) is None


def test_refresh_has_a_floor_and_timeout_is_shorter() -> None:
    s = Settings(refresh_s=0.1)
    assert s.refresh_s == 1.0
    assert s.request_timeout_s < s.refresh_s


def test_config_file_env_override_and_secrets(tmp_path: Path, monkeypatch) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("refresh_s: 5\nprometheus_url: http://127.0.0.1:9090\n"
                   "pod:\n  ssh_host: pod.example\n")
    monkeypatch.setenv("POD_CONSOLE_REFRESH_S", "3")
    monkeypatch.setenv("RUNPOD_API_KEY", "rpa_secret_value")
    monkeypatch.setenv("POD_CONSOLE_STATE_DIR", str(tmp_path / "st"))
    s = load_settings(cfg)
    assert s.refresh_s == 3.0
    assert s.prometheus_url == "http://127.0.0.1:9090"
    assert s.pod.ssh_host == "pod.example"
    assert s.state_dir == tmp_path / "st"
    assert "rpa_secret_value" not in repr(s) and "rpa_secret_value" not in s.model_dump_json()
    assert s.runpod_api_key is not None
    assert s.runpod_api_key.get_secret_value() == "rpa_secret_value"


def test_env_overrides_one_nested_key_and_keeps_the_files_others(tmp_path: Path,
                                                                monkeypatch) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pod:\n  ssh_host: pod.example\n  runpod_id: abc123\n  ssh_port: 2222\n")
    monkeypatch.setenv("POD_CONSOLE_POD__SSH_PORT", "2200")
    s = load_settings(cfg, refresh_s=4)
    assert (s.pod.ssh_host, s.pod.machine_id, s.pod.ssh_port) == ("pod.example", "abc123", 2200)
    assert s.refresh_s == 4
    monkeypatch.setenv("POD_CONSOLE_REFRESH_S", "7")
    assert load_settings(cfg, refresh_s=4).refresh_s == 4  # the command line wins
    assert load_settings(cfg).refresh_s == 7


def test_config_errors_name_file_line_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("refresh_s: 2\npod:\n  ssh_prot: 22\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(cfg)
    assert f"{cfg}:3: pod.ssh_prot:" in str(exc.value)
    cfg.write_text("refresh_s: [\n")
    with pytest.raises(ConfigError, match="YAML syntax error"):
        load_settings(cfg)


def test_xdg_default_paths(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("POD_CONSOLE_STATE_DIR", raising=False)
    assert Settings().state_dir == tmp_path / "state" / "pod-console"
    assert os.environ["XDG_STATE_HOME"]
