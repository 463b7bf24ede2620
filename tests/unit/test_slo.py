"""SLO attainment (issue 45, item 5): the formula, its bands and words, the targets from
the profile and the config (validated with file, line and field), the vLLM bucket flag
the profile renders, and the console's alert with its for/hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.config.settings import (
    AlertTiming,
    ConfigError,
    Settings,
    SlotThresholds,
    load_settings,
)
from console.model import slo
from console.model.alerts import AlertBook, evaluate
from console.model.model_figures import ModelFigures
from console.model.snapshot import DeploymentSnapshot, SlotSnapshot
from pod_agent.engines.vllm import ITL_EDGES, TTFT_EDGES, argv, slo_buckets
from pod_agent.profile import Slot
from pod_agent.profiles import check_file, load_profile
from tests.conftest import PROFILES

INF = float("inf")


def figures(under: float, n: float, edges: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0),
            at: float = 0.25, tpot: tuple[float, float] | None = None) -> ModelFigures:
    """A window with ``n`` requests, ``under`` of them at or under edge ``at`` (the rest
    above every edge); ``tpot``: (under, n) at the 0.1 s TPOT edge."""
    ttft = (*((e, under if e >= at else 0.0) for e in edges), (INF, n))
    buckets = {"ttft": ttft}
    if tpot is not None:
        buckets["tpot"] = ((0.05, 0.0), (0.1, tpot[0]), (INF, tpot[1]))
    return ModelFigures("m", 60.0, {}, latency_buckets=buckets)


def th(**kw: float) -> SlotThresholds:
    return SlotThresholds(**kw)


def test_the_share_is_the_count_at_the_snapped_edge_over_the_windows_requests() -> None:
    f = figures(under=195, n=200)
    [r] = slo.readings(f, th(ttft_target_s=0.3))  # 0.3 s snaps down to the 0.25 s edge
    assert (r.edge_s, r.under, r.requests, r.share) == (0.25, 195, 200, 195 / 200)
    assert r.words() == "TTFT ≤ 0.3 s (counted at the 0.25 s edge): 97.5% of 200 requests"
    assert slo.attainment(f, th(ttft_target_s=0.3)) == 0.975
    # at the edge itself: counted there, no note
    assert slo.readings(f, th(ttft_target_s=0.25))[0].words() == \
        "TTFT ≤ 0.25 s: 97.5% of 200 requests"
    # under every edge: no count can be made (never 0 % nor 100 %)
    [low] = slo.readings(f, th(ttft_target_s=0.05))
    assert low.share is None and "no bucket edge" in low.words()
    assert slo.attainment(f, th()) is None  # no target: nothing judged


def test_the_lower_kind_is_the_slots_attainment_and_an_unexported_kind_is_no_figure() -> None:
    f = figures(under=200, n=200, tpot=(180, 200))
    t = th(ttft_target_s=0.5, tpot_target_s=0.1)
    assert slo.attainment(f, t) == 0.9
    assert [r.kind for r in slo.readings(f, t)] == ["ttft", "tpot"]
    sgl = figures(under=200, n=200)  # no TPOT histogram (SGLang)
    [_, tp] = slo.readings(sgl, t)
    assert not tp.exported and tp.share is None and "not exported" in tp.words()
    assert slo.attainment(sgl, t) == 1.0


def test_below_the_minimum_or_without_requests_is_never_a_share() -> None:
    t = th(ttft_target_s=0.5)
    few = figures(under=3, n=slo.MIN_REQUESTS - 1)
    assert slo.attainment(few, t) is None and slo.cell(few, t) == "–"
    assert slo.tile(few, t) == (f"SLO – ({slo.MIN_REQUESTS - 1:g} requests)  TTFT≤0.5s",
                                "none")
    none = figures(under=0, n=0)
    assert slo.attainment(none, t) is None and slo.no_requests(none, t)
    assert slo.cell(none, t) == "no req"
    assert slo.tile(none, t) == ("SLO no requests  TTFT≤0.5s", "none")
    enough = figures(under=slo.MIN_REQUESTS, n=slo.MIN_REQUESTS)
    assert slo.attainment(enough, t) == 1.0 and slo.cell(enough, t) == "100.0%"
    assert slo.attainment(None, t) is None and slo.cell(None, t) == "–"


def test_bands_are_the_service_status_boards_and_the_percent_rounds_down() -> None:
    assert [slo.colour(x) for x in (1.0, 0.99, 0.9899, 0.95, 0.9499, 0.0, None)] == [
        "green", "green", "amber", "amber", "red", "red", "none"]
    # 1999 of 2000 is 99.95 %: shown 99.9 %, never rounded up to a 100 % nobody met
    assert slo.floor_pct(1999 / 2000) == "99.9%" and slo.floor_pct(0.29) == "29.0%"
    assert slo.floor_pct(1.0) == "100.0%" and slo.floor_pct(None) == "–"
    f = figures(under=1999, n=2000)
    assert slo.tile(f, th(ttft_target_s=0.25)) == ("SLO 99.9%  TTFT≤0.25s  of 2000", "green")
    assert slo.tile(figures(under=1900, n=2000), th(ttft_target_s=0.25))[1] == "amber"
    assert slo.tile(figures(under=1800, n=2000), th(ttft_target_s=0.25))[1] == "red"


def test_the_slots_table_cell_and_its_warning() -> None:
    from console.ui.widgets.slots import FIGURE_COLUMNS, row

    i = 6 + [f.key for f, _ in FIGURE_COLUMNS].index("slo_attainment")
    t = th(ttft_target_s=0.25, slo_objective=0.99)

    def cell(f: ModelFigures) -> object:
        s = SlotSnapshot("Q27", "m", 1, "", health="up", figures=f)
        return row(s, "0", 0.5, "running", t)[i]

    low = cell(figures(under=190, n=200))
    assert low.plain == "95.0%" and str(low.style) == "warn.strong"  # type: ignore[attr-defined]
    ok = cell(figures(under=200, n=200))
    assert ok.plain == "100.0%" and "warn" not in str(ok.style)  # type: ignore[attr-defined]
    assert cell(figures(0, 0)).plain == "no req"  # type: ignore[attr-defined]


def _snap(f: ModelFigures | None, now: float) -> DeploymentSnapshot:
    return DeploymentSnapshot("rtx6000-2x", (
        SlotSnapshot("Q27", "qwen3.8-27b", 8882, "", health="up", figures=f,
                     fetched_at=now),), now)


def test_the_consoles_alert_fires_after_for_and_clears_after_hold() -> None:
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    settings = Settings(profiles_dir=PROFILES, thresholds={"Q27": SlotThresholds(
        ttft_target_s=0.25, slo_objective=0.99)},
        alerts=AlertTiming(for_s=30, hold_s=20))
    book = AlertBook()

    def firing(f: ModelFigures | None, now: float) -> list[str]:
        conds = [c for c in evaluate(_snap(f, now), None, profile, settings, now)
                 if c.key.startswith("slo:")]
        book.update(conds, now)
        return [a.title for a in book.firing() if a.key == "slo:Q27"]

    bad = figures(under=190, n=200)
    assert firing(bad, 0.0) == []  # pending: for 30 s
    assert firing(bad, 29.0) == []
    assert firing(bad, 30.0) == ["Q27 SLO attainment 95.0% < 99.0%"]
    good = figures(under=200, n=200)
    assert firing(good, 40.0) != []  # held 20 s
    assert firing(good, 61.0) == []
    # too few requests, or none: nothing to judge, no alert
    assert firing(figures(0, 5), 100.0) == [] and firing(figures(0, 0), 140.0) == []


def test_targets_come_from_the_profile_and_the_config_overrides_them(tmp_path: Path) -> None:
    text = (PROFILES / "10-rtx6000-2x.yaml").read_text().replace(
        "    startup_timeout_s: 600\n",
        "    startup_timeout_s: 600\n    slo:\n      ttft_s: 0.3\n      tpot_s: 0.07\n")
    path = tmp_path / "10-rtx6000-2x.yaml"
    path.write_text(text)
    profile = load_profile(path)
    s = Settings(profiles_dir=tmp_path)
    got = s.thresholds_for("Q27", profile)
    assert (got.ttft_target_s, got.tpot_target_s, got.slo_objective) == (0.3, 0.07, 0.99)
    assert s.thresholds_for("FLASH", profile).ttft_target_s is None
    tight = Settings(profiles_dir=tmp_path, thresholds={"default": SlotThresholds(
        ttft_target_s=0.2)})
    assert tight.thresholds_for("Q27", profile).ttft_target_s == 0.2  # the config's
    assert tight.thresholds_for("Q27", profile).tpot_target_s == 0.07
    # a wrong value is named with its file, line and field
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("ttft_s: 0.3", "ttft_s: -1").replace(
        "tpot_s: 0.07", "tpot_s: 0.07\n      objective: 0.9"))
    _, problems = check_file(bad)
    lines = bad.read_text().split("\n")
    assert {(p.line, p.field) for p in problems} == {
        (lines.index("      ttft_s: -1") + 1, "slots.Q27.slo.ttft_s"),
        (lines.index("      objective: 0.9") + 1, "slots.Q27.slo.objective")}


def test_the_configs_targets_are_validated_with_file_line_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("thresholds:\n  Q27:\n    ttft_target_s: 0\n    slo_objective: 1.5\n")
    with pytest.raises(ConfigError) as e:
        load_settings(cfg)
    msg = str(e.value)
    assert f"{cfg}:3: thresholds.Q27.ttft_target_s:" in msg
    assert f"{cfg}:4: thresholds.Q27.slo_objective:" in msg


def test_the_profile_adds_its_targets_to_vllms_buckets() -> None:
    slot = Slot(served_model_name="m", hf_repo_id="a/b", port=8000, gpus=[0], gpu_util=0.5,
                max_model_len=1024, slo={"ttft_s": 0.3, "tpot_s": 0.1})
    # 0.1 s is already an ITL edge: only TTFT's family is given, defaults plus 0.3
    assert slo_buckets(slot) == {"time_to_first_token": sorted((*TTFT_EDGES, 0.3))}
    cmd = argv(slot, exe="vllm", model="a/b", host="0.0.0.0", p2p_disabled=False)
    flag = json.loads(cmd[cmd.index("--custom-histogram-buckets") + 1])
    assert 0.3 in flag["time_to_first_token"] and set(TTFT_EDGES) <= set(
        flag["time_to_first_token"])
    off = slot.model_copy(update={"slo": slot.slo.model_copy(  # type: ignore[union-attr]
        update={"add_bucket_edges": False})})
    assert "--custom-histogram-buckets" not in argv(off, exe="vllm", model="a/b",
                                                     host="h", p2p_disabled=False)
    both = slot.model_copy(update={"slo": slot.slo.model_copy(  # type: ignore[union-attr]
        update={"tpot_s": 0.07})})
    assert 0.07 in slo_buckets(both)["inter_token_latency"] and set(ITL_EDGES) <= set(
        slo_buckets(both)["inter_token_latency"])
    # the flag is the slot's slo:'s, never a second source in extra_args
    with pytest.raises(ValueError, match="typed fields"):
        Slot(served_model_name="m", hf_repo_id="a/b", port=8000, gpus=[0], gpu_util=0.5,
             max_model_len=1024, extra_args=["--custom-histogram-buckets={}"])


def test_the_help_says_the_targets_and_the_objective_in_force() -> None:
    from console.ui.help_text import thresholds
    from console.ui.keys import column_legend

    per_slot = {"Q27": th(ttft_target_s=0.3, tpot_target_s=0.1), "FLASH": th()}
    rows = dict(thresholds(per_slot))
    assert rows["SLO attainment"] == "yellow, then an alert, below 99.0%"
    assert rows["SLO targets"].startswith("Q27 TTFT ≤ 0.3 s, TPOT ≤ 0.1 s (")
    legend = dict(column_legend(per_slot))["SLO"]
    assert "snapped down to a bucket edge" in legend and legend.endswith("below 99.0%")
    # no target anywhere: no objective said, no targets line
    none = dict(thresholds({"FLASH": th()}))
    assert "SLO attainment" not in none and "SLO targets" not in none
