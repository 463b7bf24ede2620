"""The console's reading of the agent's GPU report, the GPU alert rules, and the header's
GPU line — from the agent JSON that a real H200 host produced."""

from __future__ import annotations

import json

import msgspec

from console.model.gpu_state import UNOWNED_MIN_BYTES, XID_RECENT_S, GpuProcess, conditions, parse
from console.ui.widgets.gpu_strip import gpu_line
from tests.conftest import FIXTURES

NOW = 1_800_000_000.0


def doc() -> dict:
    return json.loads((FIXTURES / "nvml-h200x2" / "gpus-load.json").read_text())


def test_the_hosts_report_reads_whole() -> None:
    r = parse(doc())
    assert r is not None and r.source == "nvml" and len(r.gpus) == 2
    g = r.gpus[0]
    raw = doc()["gpus"][0]
    assert g.util_pct == raw["util_gpu_pct"] and g.mem_used == raw["mem_used_bytes"]
    assert g.temp_c == raw["temp_c"] and g.power_limit_w == 700.0
    assert g.throttled == ("sw_power_cap",) and not g.hot
    assert g.processes and g.processes[0].pid == raw["processes"][0]["pid"]


def test_malformed_reports_give_less_never_an_exception() -> None:
    assert parse(None) is None and parse("gpus") is None and parse([1]) is None
    r = parse({"gpus": [None, 3, {"index": "0"}, {"index": 1, "temp_c": "hot",
               "util_gpu_pct": True, "processes": [{"pid": "x"}, {"pid": 7, "slot": 5}],
               "throttled": [1, "hw_slowdown"]}],
               "xid_events": [{"xid": 79}, {"xid": 48, "t": 5.0, "gpu": "one"}, "x"]})
    assert r is not None and [g.index for g in r.gpus] == [1]
    g = r.gpus[0]
    assert g.temp_c is None and g.util_pct is None and g.throttled == ("hw_slowdown",)
    assert g.processes == (GpuProcess(7, None, None),)
    assert [(x.xid, x.gpu) for x in r.xids] == [(48, 0)]


def _keys(report, slots=frozenset({"FLASH", "Q27"}), now=NOW) -> dict[str, str]:
    return {c.key: c.severity for c in conditions(report, set(slots), now, 30, 10)}


def test_a_healthy_host_under_load_raises_nothing() -> None:
    d = doc()
    d["gpus"][0]["processes"][0]["slot"] = "FLASH"
    assert _keys(parse(d)) == {}


def test_each_gpu_trouble_is_its_alert() -> None:
    d = doc()
    g0, g1 = d["gpus"]
    g0["ecc_dbe_volatile"] = 1
    g0["remap_pending"] = True
    g1["throttled"] = ["hw_thermal_slowdown"]
    g1["temp_c"] = 91.0
    d["xid_events"] = [{"t": NOW - 60, "gpu": 1, "xid": 79, "severity": "critical",
                        "meaning": "GPU has fallen off the bus", "advice": "a fallback pod (f)"},
                       {"t": NOW - XID_RECENT_S - 1, "gpu": 0, "xid": 13,
                        "severity": "warning", "meaning": "old", "advice": ""}]
    keys = _keys(parse(d))
    assert keys == {"ecc:0": "crit", "remap:0": "warn", "throttle:1": "warn",
                    f"xid:1:79:{NOW - 60:.0f}": "crit"}
    cond = next(c for c in conditions(parse(d), {"FLASH"}, NOW, 30, 10) if c.key.startswith("xid"))
    assert "fallen off the bus" in cond.title and "(f)" in cond.detail and cond.for_s == 0
    g0["remap_failed"] = True
    assert _keys(parse(d))["remapfail:0"] == "crit"
    # near the slowdown temperature without throttling yet: a warning of its own
    g1["throttled"] = []
    g1["temp_c"] = g1["temp_slowdown_c"] - 3
    assert "heat:1" in _keys(parse(d)) and "throttle:1" not in _keys(parse(d))


def test_memory_held_by_no_slot_only_where_processes_can_be_matched() -> None:
    d = doc()
    g0, g1 = d["gpus"]
    g0["processes"] = [{"pid": 10, "slot": "FLASH", "used_bytes": 80 << 30}]
    g1["processes"] = [{"pid": 11, "slot": None, "used_bytes": UNOWNED_MIN_BYTES}]
    assert "stray:1" in _keys(parse(d))
    g1["processes"][0]["used_bytes"] = UNOWNED_MIN_BYTES - 1  # a CUDA context, not a model
    assert "stray:1" not in _keys(parse(d))
    # inside a container whose PIDs NVML cannot see, nothing matches: no false alarm
    g0["processes"][0]["slot"] = None
    g1["processes"][0]["used_bytes"] = 40 << 30
    assert not any(k.startswith("stray") for k in _keys(parse(d)))


def test_the_gpu_line_fits_80_columns_at_any_count() -> None:
    r = parse(doc())
    line = gpu_line(r, 78, NOW).plain
    assert line.startswith("util·mem·temp·power") and "GPU1" in line and len(line) <= 78
    eight = msgspec.structs.replace(r, gpus=tuple(msgspec.structs.replace(r.gpus[i % 2], index=i)
                                              for i in range(8)))
    line = gpu_line(eight, 78, NOW).plain
    assert len(line) <= 78 and all(f"{i}" in line for i in range(8))
    hot = msgspec.structs.replace(r, gpus=(msgspec.structs.replace(
        r.gpus[0], throttled=("hw_thermal_slowdown",), ecc_dbe_volatile=2), r.gpus[1]))
    line = gpu_line(hot, 78, NOW).plain
    assert "HOT" in line and "ECC" in line
