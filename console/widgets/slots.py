"""The slots table: one row per slot, state by colour and by glyph/word."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from .. import fmt
from ..snapshot import DeploymentSnapshot, SlotSnapshot

COLUMNS = (("slot", "SLOT", 6), ("model", "MODEL", 18), ("port", "PORT", 5),
           ("gpus", "GPU", 3), ("util", "UTIL", 4), ("health", "HEALTH", 8),
           ("rw", "RUN/W", 5), ("kv", "KV", 6), ("kv99", "KV p99", 6),
           ("ttft", "TTFT p95", 8), ("itl", "ITL p95", 7), ("gen", "GEN tok/s", 9),
           ("acc", "ACCEPT", 6), ("mal", "MAL", 4), ("pre", "PREEMPT", 7))


def health_cell(s: SlotSnapshot, agent_state: str | None) -> Text:
    h = s.health
    if h != "up" and agent_state in ("starting", "backoff"):
        h = "starting"
    glyph, word, style = fmt.HEALTH_GLYPH.get(h, fmt.HEALTH_GLYPH["unknown"])
    if h == "up" and s.probe_ok is False:
        return Text("▲ PROBE✗", style="bold yellow")
    return Text(f"{glyph} {word}", style=style)


def row(s: SlotSnapshot, gpus: str, util: float | None, agent_state: str | None
        ) -> list[object]:
    f = s.figures
    sd = f.spec_decode if f else None
    stale = s.stale_since is not None
    dim = "dim" if stale else ""

    def cell(text: str, warn: bool = False) -> Text:
        return Text(text, style="bold yellow" if warn else dim)

    kv99 = s.kv_p99
    return [
        Text(s.slot, style="bold"), s.served_model_name, str(s.port), gpus,
        fmt.num(util, 2) if util is not None else fmt.DASH,
        health_cell(s, agent_state),
        cell(f"{fmt.num(f.running if f else None)}/{fmt.num(f.waiting if f else None)}"),
        cell(fmt.pct(f.kv_cache_usage if f else None, 1)),
        cell(fmt.pct(kv99, 1), warn=kv99 is not None and kv99 > 0.6),
        cell(fmt.secs(f.ttft_p95_s if f else None),
             warn=bool(f and f.ttft_p95_s and f.ttft_p95_s > 2.0)),
        cell(fmt.secs(f.itl_p95_s if f else None)),
        cell(fmt.num(f.generation_tps if f else None, 0)),
        cell(fmt.pct(sd.acceptance_rate if sd else None)),
        cell(fmt.num(sd.mean_acceptance_length if sd else None, 2)),
        cell(fmt.num(f.preemptions if f else None), warn=bool(f and f.preemptions)),
    ]


class SlotsTable(DataTable):
    DEFAULT_CSS = "SlotsTable { height: auto; max-height: 12; }"

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def show(self, snap: DeploymentSnapshot, gpus: dict[str, str], utils: dict[str, float],
             agent_states: dict[str, str]) -> None:
        seen = set()
        for s in snap.slots:
            seen.add(s.slot)
            cells = row(s, gpus.get(s.slot, ""), utils.get(s.slot), agent_states.get(s.slot))
            if s.slot in self.rows:
                for (key, _, _), value in zip(COLUMNS, cells, strict=True):
                    self.update_cell(s.slot, key, value)
            else:
                self.add_row(*cells, key=s.slot)
        for key in [k for k in self.rows if k.value not in seen]:
            self.remove_row(key)

    def selected_slot(self) -> str | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:
            return None
        return str(key.value)
