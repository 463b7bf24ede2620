"""A plot of one GPM figure (SM activity, tensor pipe, DRAM bandwidth) per GPU, which
says why it has none where no GPU has NVML's GPM (before Hopper): never a flat 0.

Lives apart from the GPU screen so that the plots are imported with the plots, not with
the screen (``plot_widgets``)."""

from __future__ import annotations

from console.ui.widgets.plot_widgets import SeriesPlot


class GpmPlot(SeriesPlot):
    """A plot of a GPM figure, which says why it has none where no GPU has GPM (never a
    flat line at 0)."""

    _absent: str | None = None

    def absent(self, why: str | None) -> bool:
        """Show ``why`` instead of the figure (None: the figure); True while absent."""
        if why == self._absent:
            return why is not None
        self._absent = why
        self._drawn_key = ()  # the figure is drawn afresh when it comes back
        self.say(why)
        return why is not None
