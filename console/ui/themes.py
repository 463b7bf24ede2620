"""The console's colours, in one place: a semantic name per state, mapped per theme.

Widgets and screens never name a colour for a state; they name what the state is —
``ok``, ``warn``, ``crit``, ``fault`` (a hardware fault: the loudest), ``info``,
``accent``, ``busy``, ``unknown`` … — and the theme in use says how it looks. Two library
mechanisms carry a theme to every screen:

- Rich's console theme (``Console.push_theme``): a Rich ``Text`` styled ``"crit"`` is
  resolved through the app's console whenever Textual turns it into cells, so every
  ``Text``/``Table`` a widget builds follows the theme;
- Textual's own (``App.register_theme``): the stylesheet's ``$error``, ``$warning``,
  ``$primary``… (borders, the key bar, the palette); the plots take theirs from
  ``ConsoleTheme.series``.

:class:`Themed` (mixed into the console's app and the screen-test host) registers both
and switches them together, live: after a switch every open screen is drawn again.

The four themes: ``default`` (the console's look before themes: Textual's dark theme,
red/yellow/green), ``high-contrast`` (black ground, full-white text, no faint text),
``colour-blind`` (no red/green opposition: ok is blue, warnings yellow, critical orange,
from Okabe and Ito's palette; state also carried by the glyphs and words already on
screen: ``● UP``, ``▲ WARN``, ``✖ CRIT``) and ``mono`` (no colour at all: state by
glyph, word, bold and reverse video; what ``NO_COLOR`` gets).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field
from rich.theme import Theme as RichTheme
from textual.css.stylesheet import Stylesheet
from textual.style import Style as VisualStyle
from textual.theme import Theme
from textual.widgets import Static

from console.config.defaults import THEME, THEMES

ROLES = ("ok", "ok.strong", "warn", "warn.strong", "warn.faint", "crit", "crit.text",
         "fault", "info", "accent", "busy", "busy.strong", "unknown", "neutral",
         "gauge.util", "gauge.mem", "badge.demo", "badge.readonly", "badge.replay",
         "tile.ok", "tile.warn", "tile.crit")
"""Every semantic style name a widget may use; each theme maps every one of them."""

SEVERITY_ROLES = ("ok", "warn", "crit", "info")
"""The roles a state's severity is told by (what a colour-blind reader must tell apart)."""


class ConsoleTheme(Struct, frozen=True):
    name: str
    """Its name in the config (``theme:``) and the palette."""
    textual: Theme | str
    """The Textual theme the stylesheet uses (a built-in's name, or one registered here)."""
    styles: Mapping[str, str]
    """Semantic name → Rich style (every name in :data:`ROLES`)."""
    series: tuple[str, ...] = ()
    """Colours of the plots' and position bars' series, in order (empty: the terminal's
    bright colours, ``position_bars.SLOT_COLORS``, the default theme's)."""
    limit: str | None = "red"
    """A plot's threshold line (a colour name or ``#rrggbb``; None: the text's)."""
    cursor: str | None = "gray"
    """A replay's cursor line on a plot."""
    colour: bool = True
    """False: no colour anywhere (series told apart by marker, as without colour)."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    """Rich's own named styles this theme restyles (``dim`` where faint text is too faint)."""

    @property
    def textual_name(self) -> str:
        return self.textual if isinstance(self.textual, str) else self.textual.name

    def rich_theme(self) -> RichTheme:
        return RichTheme({**self.styles, **self.overrides}, inherit=True)


DEFAULT = ConsoleTheme(
    "default", "textual-dark",
    {"ok": "green", "ok.strong": "bold green", "warn": "yellow", "warn.strong": "bold yellow",
     "warn.faint": "dim yellow", "crit": "bold red", "crit.text": "red",
     "fault": "bold white on red", "info": "cyan", "accent": "bold cyan", "busy": "magenta",
     "busy.strong": "bold magenta", "unknown": "grey50", "neutral": "white",
     "gauge.util": "cyan", "gauge.mem": "magenta", "badge.demo": "bold black on yellow",
     "badge.readonly": "bold white on blue", "badge.replay": "bold white on magenta",
     # SLO attainment tiles, coloured as vLLM's own Service Status board colours them
     "tile.ok": "bold #ffffff on #2e7d32", "tile.warn": "bold #000000 on #f0a30a",
     "tile.crit": "bold #ffffff on #c62828"})
"""The console's look before themes, unchanged (its snapshots are the same)."""

HIGH_CONTRAST = ConsoleTheme(
    "high-contrast",
    Theme(name="pod-high-contrast", primary="#00d7ff", secondary="#ffffff",
          accent="#ffff00", warning="#ffff00", error="#ff5050", success="#00ff66",
          foreground="#ffffff", background="#000000", surface="#000000", panel="#262626",
          boost="#303030", dark=True, text_alpha=1.0),
    {"ok": "bold #00ff66", "ok.strong": "bold #00ff66", "warn": "bold #ffff00",
     "warn.strong": "bold #ffff00", "warn.faint": "#ffff00", "crit": "bold #ff5050",
     "crit.text": "bold #ff5050", "fault": "bold #000000 on #ff5050", "info": "#00d7ff",
     "accent": "bold #00d7ff", "busy": "#ff87ff", "busy.strong": "bold #ff87ff",
     "unknown": "#bcbcbc", "neutral": "#ffffff", "gauge.util": "#00d7ff",
     "gauge.mem": "#ff87ff", "badge.demo": "bold #000000 on #ffff00",
     "badge.readonly": "bold #000000 on #00d7ff", "badge.replay": "bold #000000 on #ff87ff",
     "tile.ok": "bold #000000 on #00ff66", "tile.warn": "bold #000000 on #ffff00",
     "tile.crit": "bold #000000 on #ff5050"},
    series=("#00d7ff", "#ffff00", "#ff87ff", "#00ff66", "#ff8700", "#ffffff", "#8787ff",
            "#ff5050"),
    limit="#ff5050", cursor="#ffffff",
    # faint text on black is the first thing a high-contrast reader loses: a light grey
    # (8.8:1 on black) that is still told from full white
    overrides={"dim": "#a8a8a8"})

# Okabe & Ito's colour-blind-safe palette: blue #0072b2, sky blue #56b4e9, orange
# #e69f00, yellow #f0e442, vermillion #d55e00, reddish purple #cc79a7, bluish green
# #009e73. No state is told by red against green: ok is blue, critical orange.
COLOUR_BLIND = ConsoleTheme(
    "colour-blind",
    Theme(name="pod-colour-blind", primary="#0072b2", secondary="#56b4e9",
          accent="#e69f00", warning="#f0e442", error="#d55e00", success="#56b4e9",
          foreground="#e0e0e0", dark=True),
    {"ok": "#56b4e9", "ok.strong": "bold #56b4e9", "warn": "#f0e442",
     "warn.strong": "bold #f0e442", "warn.faint": "dim #f0e442", "crit": "bold #d55e00",
     "crit.text": "#d55e00", "fault": "bold #000000 on #d55e00", "info": "#cc79a7",
     "accent": "bold #cc79a7", "busy": "#cc79a7", "busy.strong": "bold #cc79a7",
     "unknown": "grey50", "neutral": "white", "gauge.util": "#56b4e9",
     "gauge.mem": "#cc79a7", "badge.demo": "bold #000000 on #f0e442",
     "badge.readonly": "bold #ffffff on #0072b2", "badge.replay": "bold #000000 on #cc79a7",
     "tile.ok": "bold #ffffff on #0072b2", "tile.warn": "bold #000000 on #f0e442",
     "tile.crit": "bold #000000 on #d55e00"},
    series=("#56b4e9", "#e69f00", "#f0e442", "#cc79a7", "#0072b2", "#ffffff", "#009e73",
            "#d55e00"),
    limit="#d55e00", cursor="gray")

MONO = ConsoleTheme(
    "mono",
    Theme(name="pod-mono", primary="#bcbcbc", secondary="#8a8a8a", accent="#dadada",
          warning="#dadada", error="#ffffff", success="#a8a8a8", foreground="#e0e0e0",
          background="#121212", surface="#1c1c1c", panel="#262626", boost="#303030",
          dark=True),
    {"ok": "", "ok.strong": "bold", "warn": "bold", "warn.strong": "bold underline",
     "warn.faint": "", "crit": "bold reverse", "crit.text": "bold reverse",
     "fault": "bold reverse", "info": "", "accent": "bold", "busy": "",
     "busy.strong": "bold", "unknown": "dim", "neutral": "", "gauge.util": "",
     "gauge.mem": "", "badge.demo": "bold reverse", "badge.readonly": "bold reverse",
     "badge.replay": "bold reverse", "tile.ok": "", "tile.warn": "bold",
     "tile.crit": "bold reverse"},
    limit=None, cursor=None, colour=False)
"""No colour: the worst states in reverse video, warnings bold, the rest plain."""

LEGACY_STYLES = {"green": "ok", "bold green": "ok.strong", "yellow": "warn",
                 "bold yellow": "warn.strong", "red": "crit.text", "bold red": "crit",
                 "cyan": "info", "bold cyan": "accent", "magenta": "busy",
                 "bold magenta": "busy.strong"}
"""An action-log line's style as a console before themes recorded it (a colour): its
semantic name, so a replayed recording's log follows the theme too."""


def role_of(style: str) -> str:
    """A log line's style as the theme draws it (see :data:`LEGACY_STYLES`)."""
    return LEGACY_STYLES.get(style, style)


THEMES_BY_NAME: dict[str, ConsoleTheme] = {t.name: t for t in (DEFAULT, HIGH_CONTRAST,
                                                                 COLOUR_BLIND, MONO)}
assert tuple(THEMES_BY_NAME) == THEMES, "console.config.defaults.THEMES names these"
assert all(set(t.styles) == set(ROLES) for t in THEMES_BY_NAME.values())
_BY_TEXTUAL = {t.textual_name: t for t in THEMES_BY_NAME.values()}


def no_color() -> bool:
    """``NO_COLOR`` is set (https://no-color.org): the theme is ``mono`` whatever else."""
    return bool(os.environ.get("NO_COLOR"))


def chosen(name: str | None) -> ConsoleTheme:
    """The theme a console opens with: ``mono`` under ``NO_COLOR``, else ``name`` (the
    config's), else the default."""
    if no_color():
        return MONO
    return THEMES_BY_NAME.get(name or THEME, DEFAULT)


def theme_of(app: Any) -> ConsoleTheme:
    """The console theme an app shows (a Textual theme not among them: the default's
    styles, which are the Textual dark theme's)."""
    return _BY_TEXTUAL.get(getattr(app, "theme", ""), DEFAULT)


class RoleStylesheet(Stylesheet):
    """Textual's stylesheet, with the theme's semantic names in a style.

    Rich resolves a ``Text``'s spans through the app's console (its theme); the style of a
    ``Text`` as a whole, in a ``Static``, Textual parses itself, here: a semantic name is
    replaced by the style the theme gives it before Textual parses it."""

    roles: Mapping[str, str] = {}

    def parse_style(self, style_text: str | VisualStyle) -> VisualStyle:
        if isinstance(style_text, str):
            style_text = self.roles.get(style_text, style_text)
        return super().parse_style(style_text)

    def copy(self) -> Stylesheet:
        new = super().copy()  # (Textual's CSS live reload in development)
        new.__class__ = RoleStylesheet
        assert isinstance(new, RoleStylesheet)
        new.roles = self.roles
        return new


class Themed:
    """Mixed into an app (before ``App``): the four themes registered, Rich's named styles
    on its console, and :meth:`use_theme` to switch both, live."""

    def __init__(self, *args: Any, theme: str | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        app: Any = self
        for t in THEMES_BY_NAME.values():
            if isinstance(t.textual, Theme):
                app.register_theme(t.textual)
        app.stylesheet = RoleStylesheet(variables=app.get_css_variables())
        self._rich_pushed = False
        self.use_theme(chosen(theme).name)

    @property
    def console_theme(self) -> ConsoleTheme:
        return theme_of(self)

    def use_theme(self, name: str) -> ConsoleTheme:
        """Show ``name`` (one of :data:`THEMES`) from now on, on every open screen."""
        app: Any = self
        t = THEMES_BY_NAME[name]
        if self._rich_pushed:
            app.console.pop_theme()
        app.console.push_theme(t.rich_theme())
        self._rich_pushed = True
        if isinstance(app.stylesheet, RoleStylesheet):
            app.stylesheet.roles = {**t.styles, **t.overrides}
        app.theme = t.textual_name
        if app.is_running:
            # after Textual has applied the theme's variables and announced it (both are
            # queued by the assignment): the plots make their colours from them
            app.call_next(self.restyle)
        return t

    def restyle(self) -> None:
        """Every open screen drawn again in the theme now in use: a ``Static`` keeps the
        cells its content was turned into, so its content is given to it again; a console
        screen draws its last state again; everything else repaints."""
        import contextlib

        from textual.css.query import NoMatches

        from console.ui.screens.base import ConsoleScreen

        app: Any = self
        for screen in app.screen_stack:
            for widget in screen.walk_children(with_self=False):
                if isinstance(widget, Static):
                    widget.update(widget.content)
                widget.refresh()
            if isinstance(screen, ConsoleScreen) and screen.is_mounted:
                # not composed yet (NoMatches): its mount draws the state in the new theme
                with contextlib.suppress(NoMatches):
                    screen.render_state(screen.state)
            screen.refresh()
