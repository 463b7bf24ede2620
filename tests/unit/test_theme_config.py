"""``theme:`` in the config (issue 49): typed, one of four, refused with its file, line,
key and the names it may take; the first frame's reading agrees; ``NO_COLOR`` is mono."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from console.config import defaults
from console.config.settings import ConfigError, Settings, ThemeName, load_settings
from console.session import boot
from console.ui.themes import ROLES, THEMES_BY_NAME, chosen
from tests.conftest import PROFILES


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_COLOR", "POD_CONSOLE_THEME", "POD_CONSOLE_CONTEXT",
                 "POD_CONSOLE_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)


def _config(tmp_path: Path, theme: str) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {PROFILES}\nstate_dir: {tmp_path / 's'}\nrefresh_s: 2\n"
                   f"theme: {theme}\n")
    return cfg


def test_the_four_themes_are_named_once() -> None:
    assert typing.get_args(ThemeName) == defaults.THEMES == tuple(THEMES_BY_NAME)
    for t in THEMES_BY_NAME.values():
        assert set(t.styles) == set(ROLES), t.name


@pytest.mark.parametrize("name", defaults.THEMES)
def test_a_theme_in_the_config_is_read_by_both_readers(tmp_path: Path, name: str) -> None:
    cfg = _config(tmp_path, name)
    assert load_settings(cfg).theme == name
    plan = boot.plan(cfg)
    assert plan is not None and plan.theme == name
    assert chosen(plan.theme).name == name


def test_the_default_is_the_default_theme(tmp_path: Path) -> None:
    assert Settings(state_dir=tmp_path).theme == "default"
    assert chosen(None).name == "default"


def test_an_unknown_theme_is_refused_with_its_line_and_the_names_allowed(
        tmp_path: Path) -> None:
    cfg = _config(tmp_path, "purple")
    with pytest.raises(ConfigError) as e:
        load_settings(cfg)
    msg = str(e.value)
    assert msg.startswith(f"{cfg}:4: theme: "), msg
    for name in defaults.THEMES:
        assert f"'{name}'" in msg, msg
    # the first frame does not guess: the validated path says what is wrong
    assert boot.plan(cfg) is None


def test_no_color_is_mono_whatever_the_config_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert chosen("colour-blind").name == "mono"
    assert chosen(None).name == "mono"


def test_the_environment_picks_a_theme_for_one_run(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``POD_CONSOLE_THEME=high-contrast pod-console wall``: no flag needed, as every key."""
    cfg = _config(tmp_path, "default")
    monkeypatch.setenv("POD_CONSOLE_THEME", "high-contrast")
    assert load_settings(cfg).theme == "high-contrast"
    plan = boot.plan(cfg)
    assert plan is not None and plan.theme == "high-contrast"
