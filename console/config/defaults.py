"""The defaults and derived values both config readers use: the typed settings
(``settings.py``, pydantic) and the quick first-frame reader (``boot.py``, no pydantic).
One table, so the first frame polls exactly as the validated settings would."""

from __future__ import annotations

REFRESH_FLOOR_S = 1.0
"""Faster polling only burns CPU: vLLM updates its gauges about once a second."""
REFRESH_S = 2.0
WINDOW_S = 300.0
HISTORY_S = 3600.0
PLOT_REFRESH_S = 60.0
"""A full plot's time axis (15 minutes) moves on this far at a time; new points are drawn
as the polls bring them, at most every ``plot_widgets.DRAW_EVERY_S``, and cost only the
cells they change. A young plot's axis starts at its oldest point and grows with it."""
PROFILES_DIR = "profiles"


def request_timeout_s(refresh_s: float) -> float:
    """Every request finishes (or fails) well inside one refresh interval."""
    return max(0.5, refresh_s * 0.8)


def prom_selector(pod_id: str | None) -> str:
    """The PromQL label selector for one pod's series (targets are labelled by pod)."""
    return f'{{pod="{pod_id}"}}' if pod_id else ""

THEMES = ("default", "high-contrast", "colour-blind", "mono")
"""The console's themes (``console/ui/themes.py`` defines them; ``theme:`` in the config
picks one, the palette switches live). ``mono`` is what ``NO_COLOR`` gets."""
THEME = "default"
