"""The app's stylesheet (``console.tcss``) is the main screen's alone: Textual parses it
whole at every start, and reads another screen's ``DEFAULT_CSS`` only when that screen
first opens, so a dialog's rules written there would be parsed by every start on the way
to the first frame (issue 47). What the main screen composes and the classes it sets are
read off ``main.py``."""

from __future__ import annotations

import re
from pathlib import Path

from textual.app import App
from textual.css.stylesheet import Stylesheet

import console.ui

UI = Path(console.ui.__file__).resolve().parent


def _names_in_rules(css: str) -> set[str]:
    sheet = Stylesheet(variables=App().get_css_variables())
    sheet.add_source(css, read_from=("console.tcss", ""))
    sheet.parse()
    return {sel.name for rule in sheet.rules for chain in rule.selector_set
            for sel in chain.selectors}


def test_the_apps_stylesheet_styles_the_main_screen_only() -> None:
    main = (UI / "screens" / "main.py").read_text()
    # its ids and classes (quoted), its widgets (called)
    composed = set(re.findall(r'"([\w-]+)"', main)) | set(re.findall(r"\b([A-Z]\w+)\(", main))
    names = _names_in_rules((UI / "console.tcss").read_text())
    assert names, "no rule read: the check would pass on anything"
    others = sorted(n for n in names if n != "MainScreen" and n not in composed)
    assert not others, (f"console.tcss styles what the main screen does not compose: "
                        f"{others} (their rules belong in that screen's DEFAULT_CSS)")


def test_a_dialogs_rule_there_is_caught() -> None:
    names = _names_in_rules("ConfirmScreen { align: center middle; }\n#dfig { height: 1; }")
    assert names == {"ConfirmScreen", "dfig"}
