"""Tables that fit the terminal by dropping their least important columns whole, one line
per row (the fleet, the GPUs): a column is cut to ``…`` within its cap or left out, never
wrapped into a row five lines tall."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from console.model import fmt

Column = tuple[str, int | None, int, list[Text]]
"""(header, widest it may be (longer text ends in …), priority: 0 never goes, then
the lowest first, its cells)."""

GPU_NOISE = ("NVIDIA ", "GeForce ", " Blackwell", " Server Edition", " Workstation Edition",
             " Max-Q", " SXM5", " SXM4", " SXM", " PCIe", " NVL", " 80GB", " 141GB", " 94GB")
"""Words a GPU's marketing name carries that tell one pod from another nothing: cut, so
"2× RTX PRO 6000 Blackwell Server Edition" reads "2× RTX PRO 6000"."""


def short_gpu(count: int | None, name: str | None) -> str:
    if not name:
        return fmt.DASH
    for word in GPU_NOISE:
        name = name.replace(word, "")
    return f"{count}× {name.strip()}" if count else name.strip()


def fit(cols: list[Column], width: int) -> list[Column]:
    """The columns that fit ``width`` (each as wide as its widest cell, up to its cap, and
    a column of padding), the most important first, shown in their order."""
    def need(c: Column) -> int:
        head, cap, _, cells = c
        w = max([len(head), *(x.cell_len for x in cells)])
        return (min(w, cap) if cap else w) + 2

    chosen: set[str] = set()
    used = 0
    for c in sorted(cols, key=lambda c: c[2]):
        if c[2] == 0 or used + need(c) <= width:
            chosen.add(c[0])
            used += need(c)
    return [c for c in cols if c[0] in chosen]


def fitted_table(cols: list[Column], width: int, rows: int,
                 row_style: list[str] | None = None, header_style: str = "",
                 right: frozenset[str] = frozenset()) -> Table:
    """A one-line-per-row table of the columns that fit ``width`` (those named in
    ``right`` right-justified: numbers)."""
    t = Table(box=None, pad_edge=False, expand=False, padding=(0, 1),
              header_style=header_style or "table.header")
    shown = fit(cols, width)
    for head, cap, _, _ in shown:
        t.add_column(head, no_wrap=True, overflow="ellipsis", max_width=cap,
                     justify="right" if head in right else "left")
    for i in range(rows):
        t.add_row(*(cells[i] for _, _, _, cells in shown),
                  style=row_style[i] if row_style else "")
    return t


__all__ = ["GPU_NOISE", "Column", "fit", "fitted_table", "short_gpu"]
