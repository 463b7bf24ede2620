"""Every ``ConsoleState`` the screen tests show, built in one place from fixed data.

A change of ``ConsoleState`` (or of what a screen or dialog is constructed with) is fixed
here and nowhere else: the tests only name what they want (``state(down=("Q27",))``,
``smoke_report()``). Nothing here starts a process or reads the clock: every instant is
``NOW`` or an offset from it, and every figure comes from the real code (the figure
formulas on the real vLLM 0.32.0 captures, the alert rules, the benchmark's record, the
smoke report) run on fixed inputs.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from console.config.settings import AlertTiming, Settings
from console.model.alerts import Alert, AlertBook, AlertEvent, evaluate, observe_pod, run_of
from console.model.conditions import Condition
from console.model.fleet import FleetRow, FleetSnapshot
from console.model.gpu_faults import FaultBook, gpu_marks
from console.model.gpu_state import GpuReport
from console.model.gpu_state import parse as parse_gpus
from console.model.history import History
from console.model.model_figures import ModelFigures
from console.model.pod_stop import planned_stop
from console.model.snapshot import DeploymentSnapshot, PodSnapshot, SlotSnapshot, StopPlan
from console.model.stall import Stall
from console.session.view import ConsoleState, ConsoleView, slot_columns
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.targets import targets_for
from pod_agent.profile import Profile
from pod_agent.profiles import load_profile
from tests.conftest import FIXTURES, PROFILES

NOW = 1_795_000_000.0
"""The fixed clock (Wednesday 2026-11-18, 20:06:40 in Seoul, the profile's zone)."""
PROFILE_FILE = PROFILES / "10-rtx6000-2x.yaml"
HOST = "10.0.0.5"
"""The pod's address as the slots' URLs show it (never contacted: nothing is polled)."""
POD_ID = "abc123xyz"
CAPTURES = FIXTURES / "vllm-0.32.0-cpu" / "ngram"
STATE_DIR = Path("~/.local/state/pod-console")
"""Settings need a state directory; the screens never write one."""


def clock() -> float:
    return NOW


# -- the deployment -----------------------------------------------------------------------

@cache
def profile() -> Profile:
    return load_profile(PROFILE_FILE)


def settings(**changes: Any) -> Settings:
    """The console's settings; a fixed clock never lets a pending alert fire, so alerts
    fire at once (as the screenshots show them)."""
    kw: dict[str, Any] = {"profiles_dir": PROFILES, "state_dir": STATE_DIR, "refresh_s": 5,
                          "alerts": AlertTiming(down_for_s=0, for_s=0, hold_s=0)}
    kw.update(changes)
    return Settings(**kw)


@cache
def figures() -> ModelFigures:
    """One slot's figures: the real formulas over a minute of the real captures."""
    after = parse((CAPTURES / "metrics-specdecode-after-basic-load.txt").read_text())
    idle = parse((CAPTURES / "metrics-specdecode-idle.txt").read_text())
    return compute(after, idle, 60.0)["tiny-main"]


def slots(down: tuple[str, ...] = ()) -> tuple[SlotSnapshot, ...]:
    """Every slot of the profile, up with figures; those in ``down`` refused, stale for
    42 s."""
    out = []
    for name, slot in profile().slots.items():
        is_down = name in down
        out.append(SlotSnapshot(
            slot=name, served_model_name=slot.served_model_name, port=slot.port,
            url=f"http://{HOST}:{slot.port}", health="down" if is_down else "up",
            health_detail="connection refused" if is_down else "200",
            served_models=(slot.served_model_name,), figures=figures(), kv_p99=0.031,
            probe_ok=True, source="direct", fetched_at=NOW,
            error="/metrics: connection refused" if is_down else None,
            stale_since=NOW - 42 if is_down else None))
    return tuple(out)


def snapshot(down: tuple[str, ...] = ()) -> DeploymentSnapshot:
    return DeploymentSnapshot(profile().name, slots(down), fetched_at=NOW)


@cache
def _gpu_doc() -> dict[str, Any]:
    """Two RTX PRO 6000s as the agent reports them, with the H200 capture's readings, one
    slot's program on each."""
    doc = json.loads((FIXTURES / "nvml-h200x2" / "gpus-load.json").read_text())
    for g, slot, pid in zip(doc["gpus"], ("FLASH", "Q27"), (4101, 4102), strict=True):
        g["name"] = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        g["mem_total_bytes"] = 97887 << 20
        g["mem_used_bytes"] = int(0.76 * g["mem_total_bytes"])
        g["processes"] = [{"pid": pid, "slot": slot, "used_bytes": g["mem_used_bytes"]}]
    # GPM as the H200 answered it: GPU 0 a matmul loop's interval, GPU 1 a copy loop's
    phases = json.loads((FIXTURES / "gpm-h200" / "gpm.json").read_text())["phases"]
    for g, phase in zip(doc["gpus"], ("tensor", "memory"), strict=True):
        m = phases[phase]["nvml"][0]["metrics"]
        g.update(gpm_supported=True, sm_active_pct=m["SM_UTIL"]["value"],
                 sm_occupancy_pct=m["SM_OCCUPANCY"]["value"],
                 tensor_active_pct=m["ANY_TENSOR_UTIL"]["value"],
                 dram_active_pct=m["DRAM_BW_UTIL"]["value"])
    # the captured H200 pair's wiring (NV18, its 18 links up) and the probe it passed
    doc["topology"] = {"gpus": ["GPU0", "GPU1"], "matrix": [["X", "NV18"], ["NV18", "X"]],
                       "nvlinks": [{"up": 18, "links": 18}] * 2,
                       "p2p": {"0-1": dict.fromkeys(("read", "write", "nvlink", "atomics",
                                                     "pci"), "ok")}}
    probe = FIXTURES / "nccl-h200x2" / "probe-2026-11-29" / "probe-plain.json"
    doc["p2p_probe"] = {**json.loads(probe.read_text()), "t": NOW - 3 * 3600}
    doc["t"] = NOW
    return doc


def no_gpm_broken_p2p_gpus() -> GpuReport:
    """GPUs before Hopper (no GPM: "not on this GPU") across the CPUs' interconnect,
    where the P2P probe hung and the fallback over SHM was proven."""
    doc = _gpu_doc()
    gone = dict.fromkeys(("sm_active_pct", "sm_occupancy_pct", "tensor_active_pct",
                          "dram_active_pct"))
    return gpus(gpus=[{**g, **gone, "gpm_supported": False} for g in doc["gpus"]],
                topology={**doc["topology"], "matrix": [["X", "SYS"], ["SYS", "X"]],
                          "nvlinks": [{"up": None, "links": None}] * 2,
                          "p2p": {"0-1": {"read": "chipset not supported",
                                          "write": "chipset not supported",
                                          "nvlink": "not supported", "atomics": "not supported",
                                          "pci": "ok"}}},
                p2p_probe={"verdict": "hung", "transports": [],
                           "detail": "all_reduce not finished after 90 s; fallback without P2P "
                                     "proven (SHM/direct/direct)",
                           "fallback": {"verdict": "unused",
                                        "transports": ["SHM/direct/direct"]},
                           "t": NOW - 3 * 3600})


XID_79 = {"t": NOW - 60, "gpu": 0, "xid": 79, "severity": "critical",
          "meaning": "GPU has fallen off the bus",
          "advice": "the GPU is gone until a reset: a fallback pod (f)"}
"""An Xid 79 on GPU 0 a minute ago, as the agent reports it (``xid_events``)."""


def hot_gpus(index: int = 0) -> GpuReport:
    """GPU ``index`` overheating, as the demo's NVML stand-in makes it (91 °C, thermal
    slowdown, SM clock halved), at full power."""
    base = gpus()
    return replace(base, gpus=tuple(
        replace(g, temp_c=91.0, temp_slowdown_c=89.0, sm_clock_mhz=727, sm_clock_max_mhz=1980,
                power_w=694.0, power_limit_w=700.0,
                throttled=("sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown"))
        if g.index == index else g for g in base.gpus))


def gpus(**doc_changes: Any) -> GpuReport:
    report = parse_gpus({**_gpu_doc(), **doc_changes})
    assert report is not None
    return report


def faulty_gpus() -> GpuReport:
    """GPU 0 fell off the bus (Xid 79, two minutes ago); GPU 1 throttles for heat at 91°C
    and has double-bit ECC errors: each fault as the agent reports it, with its advice."""
    from pod_agent.gpus import xid_meaning

    doc = json.loads(json.dumps(_gpu_doc()))
    hot = doc["gpus"][1]
    hot.update(temp_c=91.0, throttled=["sw_thermal_slowdown", "hw_thermal_slowdown"],
               throttle=["sw_thermal_slowdown", "hw_thermal_slowdown"], sm_clock_mhz=727,
               ecc_dbe_volatile=2)
    severity, meaning, advice = xid_meaning(79)
    doc["xid_events"] = [{"t": NOW - 120, "gpu": 0, "xid": 79, "severity": severity,
                          "meaning": meaning, "advice": advice}]
    report = parse_gpus(doc)
    assert report is not None
    return report


def six_alerts(**changes: Any) -> ConsoleState:
    """Six alerts firing: Q27 down, Xid 79, ECC, thermal throttling, FLASH's TTFT and the
    pod running outside working hours (each from the real rules)."""
    out = state(down=("Q27",), pod_=pod(gpus=faulty_gpus()), **changes)
    assert len([a for a in out.alerts if a.state == "firing"]) == 6, out.alerts
    return out


def stop_plan(**changes: Any) -> StopPlan:
    kw: dict[str, Any] = {"next_reason": "schedule", "in_s": 6 * 3600.0, "idle_s": 12.0,
                          "idle_after_s": 1800.0, "read_at": NOW, "skew_s": 0.0}
    kw.update(changes)
    return StopPlan(**kw)


def pod(**changes: Any) -> PodSnapshot:
    kw: dict[str, Any] = {
        "pod_id": POD_ID, "status": "RUNNING",
        "gpu_name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu_count": 2,
        "cost_per_hr": 4.18, "started_at": NOW - 3 * 3600, "host_cuda": "13.0",
        "p2p_disabled": False, "watchdog_armed": True,
        "next_stop": "2026-11-19T18:00:00+09:00",
        "agent_slots": {n: {"gpu_util": s.gpu_util, "state": "ready"}
                        for n, s in profile().slots.items()},
        "fetched_at": NOW, "gpus": gpus(), "stop_plan": stop_plan(),
        "spent_earlier_today": 0.0}
    kw.update(changes)
    return PodSnapshot(**kw)


def history() -> History:
    """Ten minutes of every plotted series, slots and GPUs, as smooth fixed curves."""
    from console.session.gpu_history import record_gpus

    h = History(3600, 1)
    for i in range(120):
        t = NOW - 600 + i * 5
        for k, name in enumerate(profile().slots):
            h.add(name, "ttft_p95_s", t, 0.9 + 0.1 * math.sin(i / 9 + k))
            h.add(name, "kv_cache_usage", t, 0.02 + 0.015 * math.sin(i / 13 + k))
            h.add(name, "acceptance_rate", t, 0.6 + 0.06 * math.sin(i / 17 + k))
            h.add(name, "generation_tps", t, 40 + 9 * math.sin(i / 11 + k))
        if i % 2 == 0:
            report = gpus()
            wobble = [replace(g, util_pct=(g.util_pct or 0) * (0.8 + 0.2 * math.sin(i / 7 + j)),
                              temp_c=(g.temp_c or 0) + 3 * math.sin(i / 15 + j))
                      for j, g in enumerate(report.gpus)]
            record_gpus(h, replace(report, gpus=tuple(wobble), sampled_at=t), t)
    return h


# -- what is shown about it ---------------------------------------------------------------

def view(**changes: Any) -> ConsoleView:
    kw: dict[str, Any] = {"profile_name": profile().name,
                          "targets": targets_for(profile(), HOST), "read_only": False,
                          "demo": False, "refresh_s": 5.0, "plot_refresh_s": 5.0,
                          "rotate_s": 0.0}
    kw.update(changes)
    return ConsoleView(**kw)


def alerts(snap: DeploymentSnapshot | None, pod_: PodSnapshot | None, s: Settings,
           failures: tuple[Condition, ...] = (), acked: bool = False
           ) -> tuple[tuple[Alert, ...], tuple[AlertEvent, ...]]:
    """The alerts the app's rules raise on this state (``evaluate`` into an
    ``AlertBook``, as every poll does), with an earlier episode in the history."""
    book = AlertBook()
    # what happened earlier: a slot that went down and came back, a failed operation
    book.update([Condition("down:Q27", "crit", "Q27 down", "/metrics: connection refused")],
                NOW - 3000)
    book.update([], NOW - 2940)
    book.event(AlertEvent(NOW - 1800, "failed", "crit", "Rebalance gpu_util failed",
                          "FLASH did not come back within 600 s; rolled back to 0.76/0.19"))
    book.update(evaluate(snap, pod_, profile(), s, NOW, failures, fault_book(pod_, s), pod_),
                NOW)
    if acked:
        book.acknowledge("alice", NOW - 30)
    return tuple(book.sorted()), tuple(book.history)


def fault_book(pod_: PodSnapshot | None, s: Settings) -> FaultBook:
    """The GPU hardware faults as the session keeps them, told of this one reading."""
    book = FaultBook()
    observe_pod(book, pod_, profile(), s, NOW)
    return book


def state(*, down: tuple[str, ...] = (), read_only: bool = False, ready: bool = True,
          pod_: PodSnapshot | str | None = "default", stale: str | None = None,
          operation: str | None = None, fleet_: FleetSnapshot | None = None,
          contexts: tuple[str, ...] = (), context: str | None = None,
          failures: tuple[Condition, ...] = (), acked: bool = False,
          settings_: Settings | None = None, stalled: tuple[str, ...] = (),
          **view_changes: Any) -> ConsoleState:
    """What every open screen is handed after a poll; keywords change one thing
    (``stalled``: those slots have had 3 requests running and no token for 45 s)."""
    s = settings_ or settings()
    v = view(read_only=read_only, contexts=contexts, context=context, **view_changes)
    p = pod() if pod_ == "default" else pod_
    assert not isinstance(p, str)
    snap = snapshot(down)
    if stale is None:  # as the session words it: the header's STALE is the pod's data
        from console.session.reading import stale_header

        stale = stale_header(snap, planned_stop(p, p, NOW))
    stalls = {name: Stall(name, 3.0, NOW - 45, NOW) for name in stalled}
    failures = (*failures, *(st.condition() for st in stalls.values()))
    active, events = alerts(snap, p, s, failures, acked)
    gpus_, utils, states = slot_columns(v, p)
    faults = fault_book(p, s).of(p.pod_id if p is not None else None)
    marks = gpu_marks(faults, p.gpus if p is not None else None)
    allowed = frozenset() if read_only else frozenset(
        ("refresh", "resume", "fallback", "host_checks", "rebalance", "restart", "ack",
         "smoke", "bench", "watchdog"))
    return ConsoleState(view=v, ready=ready, now=NOW, snapshot=snap, pod=p, alerts=active,
                        stale=stale, history=history(), allowed=allowed, gpus=gpus_,
                        utils=utils, states=states, operation=operation,
                        alert_history=events,
                        thresholds={t.slot: s.thresholds_for(t.slot) for t in v.targets},
                        fleet=fleet_, stop=planned_stop(p, p, NOW), gpu_marks=marks,
                        stalled=stalls, run=run_of(p, p, NOW), gateway_limits=s.gateway)


def slo_settings() -> Settings:
    """SLO targets on both slots (issue 45): FLASH's TTFT 2.5 s (all 18 of the captures'
    requests under it: 100 %, green), Q27's 0.3 s (counted at the 0.25 s edge: 15 of 18,
    83.3 %, red and below its 99 % objective: an alert)."""
    from console.config.settings import SlotThresholds

    return settings(thresholds={"FLASH": SlotThresholds(ttft_target_s=2.5),
                                "Q27": SlotThresholds(ttft_target_s=0.3, tpot_target_s=0.1)})


def slo_state(**kw: Any) -> ConsoleState:
    """``state`` with ``slo_settings``."""
    return state(settings_=slo_settings(), **kw)


def _clock(t: float) -> str:
    from console.model import fmt

    return fmt.clock(t)


def fleet() -> FleetSnapshot:
    """Three contexts: this pod, a second one running with an alert, one whose API key
    is wrong."""
    rows = (
        FleetRow("seoul", pod_id=POD_ID, profile=profile().name, status="RUNNING",
                 gpu_name="RTX PRO 6000 Blackwell Server Edition", gpu_count=2,
                 cost_per_hr=4.18, spend_today=37.62, spend_month=812.40,
                 stop_in_s=6 * 3600.0, stop_reason="schedule", slots_up=2, slots=2,
                 worst_health="up", worst_slot="FLASH", ttft_p95_s=0.94, kv_p99=0.031,
                 slo_attainment=15 / 18, slo_slot="Q27", slo_set=True, source="direct"),
        FleetRow("tokyo", pod_id="def456uvw", profile="h200-1x", status="RUNNING",
                 gpu_name="H200", gpu_count=1, cost_per_hr=3.59, spend_today=12.80,
                 spend_month=301.15, stop_in_s=1500.0, stop_reason="idle", slots_up=1,
                 slots=2, worst_health="down", worst_slot="CODER", ttft_p95_s=2.75,
                 kv_p99=0.412, alerts=(("crit", "CODER down"), ("warn", "KV cache p99 41%")),
                 slo_no_requests=True, slo_set=True, source="prometheus"),
        FleetRow("oregon", error="RunPod API: HTTP 401 (check RUNPOD_API_KEY for oregon)"),
    )
    return FleetSnapshot(rows, NOW - 3, "seoul", shared_prometheus="http://10.0.0.9:9090",
                         queries=4)


def log_lines() -> tuple[tuple[float, str, str], ...]:
    """The action log as the app writes it: (time, text, style), oldest first."""
    return (
        (NOW - 3605, "console started", ""),
        (NOW - 3000, "ALERT Q27 down — /metrics: connection refused", "bold red"),
        (NOW - 2940, "cleared: Q27 down", "green"),
        (NOW - 1900, "Rebalance gpu_util: started (FLASH → 0.70, Q27 → 0.25)", "bold"),
        (NOW - 1890, "  Rebalance gpu_util · stop Q27", "dim"),
        (NOW - 1800, "Rebalance gpu_util: rolled_back — FLASH did not come back within "
                     "600 s; rolled back to 0.76/0.19", "yellow"),
        (NOW - 600, "Smoke test: ok — all passed via direct; 2 skipped", "green"),
        (NOW - 60, "refresh every 5 s (requests time out after 4 s)", ""),
        (NOW - 5, "[not markup] a server's words, as written", ""),
    )


SLOT_LOG = [
    "INFO 11-18 11:05:01 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s, "
    "Avg generation throughput: 41.3 tokens/s, Running: 3 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 3.1%, Prefix cache hit rate: 61.2%",
    "INFO 11-18 11:05:01 [metrics.py:88] SpecDecoding metrics: Mean acceptance length: 2.41, "
    "Accepted throughput: 24.10 tokens/s, Drafted throughput: 51.00 tokens/s",
    'INFO:     10.0.0.9:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]
"""A slot's recent log lines as the agent returns them (the detail screen's panel)."""


# -- what the dialogs are given -------------------------------------------------------------

def fatal_problem() -> str:
    """The config error the console stops on, as the real loader words it."""
    from pod_agent.profiles import ProfileError

    broken = Path(__file__).resolve().parent.parent / "profiles_broken"
    try:
        load_profile(broken / "two-problems-at-once.yaml")
    except (ProfileError, ValueError) as exc:
        # where the clone lies is not what the screen is about: a user's profiles folder
        return str(exc).replace(str(broken), "~/.config/pod-console/profiles")
    raise AssertionError("two-problems-at-once.yaml loaded: the fixture is not broken")


def confirm_question() -> tuple[str, str]:
    """A dangerous operation's title and question, from its spec, filled as the app does."""
    from console.operations.specs import SPECS

    spec = SPECS["rebalance"]
    return spec.title, spec.confirm.format(pod=POD_ID, profile=profile().name, cost="$4.18",
                                           split="FLASH=0.7, Q27=0.25", cmd="", slot="?",
                                           requests="?", via="?")


PROGRESS_STEPS = (("gpus", 0.25, "2× RTX PRO 6000, driver CUDA 13.0"),
                  ("p2p", 0.5, "NCCL P2P probe: 2 ranks, all channels via P2P/CUMEM"),
                  ("disk", 0.75, "checking /workspace"))
"""Host checks, three steps in (the progress dialog as an operation drives it)."""
PROGRESS_FAILED = (False, "disk: /workspace has 3.1 GiB free; the profile needs 40 GiB")
PROGRESS_DONE = (True, "all host checks passed (P2P ok, CUDA 13.0 ≥ 13.0)")


def smoke_report() -> Any:
    """The smoke test's report of the field's eight checks (two skipped: no gateway, no
    trace sink), as ``run_smoke`` returns it."""
    from console.operations.smoke import CheckResult, SmokeReport

    checks = (
        CheckResult("models listed", True, "qwen3.8-flash-next, qwen3.6-27b listed", 0.04),
        CheckResult("aliases listed", None, "no gateway: aliases live in the gateway", 0.0),
        CheckResult("chat", True, "qwen3.8-flash-next: 'OK' · qwen3.6-27b: 'OK'", 0.81),
        CheckResult("streaming", True, "2 streams: 14 chunks, then [DONE]", 1.12),
        CheckResult("aliases answer", None, "no gateway", 0.0),
        CheckResult("unknown model", True, "HTTP 404 for pod-console-smoke-no-such-model",
                    0.03),
        CheckResult("targets up", True, "2 of 2 slot targets UP", 0.02),
        CheckResult("trace sink", None, "no trace sink configured (trace_url)", 0.0),
    )
    return SmokeReport("direct", checks, NOW - 3, 2.02)


def smoke_outcome(report: Any) -> tuple[bool, str]:
    """The outcome's message as the smoke operation words it (``operations/ops/smoke.py``)."""
    skipped = sum(1 for c in report.checks if c.ok is None)
    failed = ", ".join(f"{c.name} ({c.evidence})" for c in report.failed)
    return report.ok, ((f"all passed via {report.via}" if report.ok else
                        f"FAILED via {report.via}: {failed}")
                       + (f"; {skipped} skipped" if skipped else ""))


def bench_record() -> dict[str, Any]:
    """A benchmark's record (short and long at concurrency 1, two task sets), built by the
    benchmark's own ``build_record`` from fixed request timings."""
    from console.operations.benchmark.measure import (
        BenchPlan,
        BenchResult,
        ConfigResult,
        PodFacts,
        RequestResult,
        RunResult,
        Spec,
        TaskResult,
        Window,
    )
    from console.operations.benchmark.record import build_record

    def req(t0: float, ttft: float, tok_s: float, n: int, prompt: int) -> RequestResult:
        e2e = n / tok_s
        return RequestResult(True, None, prompt, n, "usage", t0, t0 + ttft, t0 + e2e * 0.99,
                             t0 + e2e)

    def spec(rate: float, length: float, per: tuple[float, ...]) -> Window:
        drafts = 400.0
        s = Spec(drafts=drafts, draft_tokens=drafts * 3, accepted_tokens=drafts * 3 * rate,
                 acceptance_rate=rate, mean_acceptance_length=length, per_position=per)
        return Window(s, 30.0)

    plan = BenchPlan(profile().name, "FLASH", "qwen3.8-flash-next", f"http://{HOST}:8881",
                     f"http://{HOST}:8881", "direct", runs=2, warmup=1, concurrency=(1,),
                     lengths=("short", "long"), tasks=("json", "ko_qa"))
    configs = tuple(
        ConfigResult(length, 1, tuple(RunResult(1, (req(NOW - 200 + 20 * i + k, ttft, tps,
                                                         512, prompt),))
                                      for i, tps in enumerate((tok, tok * 1.04))), (),
                     spec(rate, 1 + 3 * rate, per))
        for k, (length, ttft, tok, prompt, rate, per) in enumerate((
            ("short", 0.21, 142.0, 38, 0.62, (0.81, 0.62, 0.43)),
            ("long", 1.35, 118.0, 3012, 0.55, (0.77, 0.55, 0.33)))))
    tasks = (TaskResult("json", tuple(req(NOW - 60 + i, 0.2, 150.0, 200, 90)
                                      for i in range(3)), spec(0.83, 3.49, (0.93, 0.83, 0.73))),
             TaskResult("ko_qa", tuple(req(NOW - 40 + i, 0.25, 120.0, 200, 70)
                                       for i in range(3)), spec(0.41, 2.23, (0.6, 0.4, 0.23))))
    res = BenchResult(plan, NOW - 210, 208.0, "0.32.0", configs, tasks)
    return build_record(res, PodFacts(POD_ID, "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                      2, "ok"))


def bench_outcome(rec: dict[str, Any]) -> tuple[bool, str]:
    """The outcome's message as the benchmark operation words it (``operations/ops/bench.py``)."""
    figs = []
    for c in rec["configs"]:
        tok = c["summary"]["tok_s"]["mean"]
        acc = (c.get("spec") or {}).get("acceptance_rate")
        figs.append(f"{c['name']} {'–' if tok is None else f'{tok:.1f}'} tok/s"
                    + ("" if acc is None else f" ({acc * 100:.0f} % accepted)"))
    return True, f"{', '.join(figs)}; kept {STATE_DIR}/bench/{rec['id']}.json"


def rebalance() -> tuple[list[dict[str, Any]], list[str], Any]:
    """The rebalance dialog's rows, the planner's lines and its prediction, as the app
    hands them over (``_rebalance_screen``)."""
    prof = profile()
    proposal = {"FLASH": 0.74, "Q27": 0.21}  # FLASH at its minimum, both GPUs at 0.95
    rows = [{"slot": n, "current": s.gpu_util, "proposed": proposal.get(n, s.gpu_util),
             "gpus": list(s.gpus), "min": s.min_gpu_util} for n, s in prof.slots.items()]
    lines = ["planner: FLASH's KV p99 is 3 %, Q27's 41 % over the last hour",
             "moving 0.02 of each GPU from FLASH to Q27 keeps FLASH at its minimum"]

    def predict(slot: str, util: float) -> str:
        per_util = {"FLASH": 314_000, "Q27": 752_000}.get(slot, 0)
        return f"≈ {util * per_util / 1000:.0f}k KV tokens"

    return rows, lines, predict


def watchdog_args(extended: bool = True) -> tuple[bool | None, str | None, float, str | None]:
    """What the watchdog dialog is opened with: armed, next stop, now, the extension."""
    ext = ("extended until 20:00 KST by alice: eval run" if extended else None)
    return True, "2026-11-18T20:00:00+09:00", NOW, ext


def planned_stop_state() -> ConsoleState:
    """The watchdog's idle stop, made two minutes ago: the pod EXITED, its slots gone with
    it — one info event and "stopped at HH:MM (idle)", not outages."""
    plan = StopPlan.parse({"now": NOW, "stop_in_s": 29 * 60.0, "next_stop_reason": "idle",
                           "last_stop_reason": "idle", "last_stop": {
                               "reason": "idle", "at": NOW - 120, "by": "watchdog",
                               "ok": True, "detail": "stopped"}}, NOW)
    return state(pod_=pod(status="EXITED", stop_plan=plan, started_at=NOW - 3 * 3600),
                 down=tuple(profile().slots))


# -- a recording (replay, the live pause) ---------------------------------------------------

REPLAY_POLLS = 11
"""The recording's polls: one a minute, the last at ``NOW``."""
REPLAY_DOWN_AT = NOW - 4 * 60
"""Q27 stops answering between two polls (a marker), and is down from the next one."""


def replay_tape() -> Any:
    """Ten minutes of polls (``state`` at each, its clock and poll time that minute; Q27
    down from ``REPLAY_DOWN_AT``) and three markers: the alert firing, an Xid, a
    restart."""
    from console.session.record.tape import Marker, MemoryTape

    polls = []
    for i in range(REPLAY_POLLS):
        t = NOW - (REPLAY_POLLS - 1 - i) * 60
        s = state(down=("Q27",) if t > REPLAY_DOWN_AT else ())
        polls.append(replace(s, now=t, polled_at=t))
    marks = (Marker(REPLAY_DOWN_AT + 10, "alert", "firing Q27 not answering", "down:Q27"),
             Marker(REPLAY_DOWN_AT + 20, "xid", "XID 79 on GPU1", "1"),
             Marker(NOW - 90, "operation", "restart Q27", "audit-7"))
    return MemoryTape(polls, marks)


def gateway_reading() -> Any:
    """The gateway (issue 34) read from the real LiteLLM capture
    (``tests/fixtures/litellm_metrics.txt``) at ``NOW - 10`` and again at ``NOW`` with one
    more cooldown of tiny-b and two more requests of alice: a deployment in cooldown,
    users with a last-seen time, figures over a 10 s window."""
    import re

    from console.config.settings import GatewaySettings
    from console.sources.collect.gateway import FAMILIES, GatewayCollector

    capture = (FIXTURES / "litellm_metrics.txt").read_text()
    col = GatewayCollector("http://127.0.0.1:4000", GatewaySettings(cooldown_s=30), 300.0,
                           1.0, zone=__import__("datetime").timezone.utc)
    col.read(parse(capture, FAMILIES), NOW - 10)
    later = re.sub(r'(litellm_deployment_cooled_down_total\{[^}]*\}) (\S+)',
                   lambda m: f"{m.group(1)} {float(m.group(2)) + 1}", capture)
    later = re.sub(r'(litellm_proxy_total_requests_metric_total\{[^}]*end_user="alice"'
                   r'[^}]*model_id="tiny-a"[^}]*\}) (\S+)',
                   lambda m: f"{m.group(1)} {float(m.group(2)) + 2}", later)
    return col.read(parse(later, FAMILIES), NOW)


def gateway_state(**changes: Any) -> ConsoleState:
    """``state()`` with the gateway's reading: the header's gateway line, ``G``."""
    return replace(state(**changes), gateway=gateway_reading())


def cooldown_group(**changes: Any) -> ConsoleState:
    """``state()`` with a gateway deployment in cooldown and what it explains: its
    fallbacks, its group's 5xx and the whole gateway's (one alert, three under it),
    beside the state's own alerts (issue 43, "Noise")."""
    from console.config.settings import AlertTiming, GatewaySettings
    from console.model.gateway import DeploymentRow, GatewaySnapshot
    from console.model.gateway import conditions as gateway_conditions

    base = state(**changes)
    deps = (DeploymentRow("q27-a", "q27", "http://10.0.0.1:8001/v1",
                          {"requests": 12, "failures": 7}, "cooldown"),
            DeploymentRow("q27-b", "q27", "http://10.0.0.1:8011/v1",
                          {"requests": 12, "failures": 0}, "healthy"))
    gw = GatewaySnapshot("http://gw", NOW, True, True, deployments=deps,
                         total={"fallbacks_ok": 4.0, "error_5xx_ratio": 0.0504},
                         groups={"q27": {"error_5xx_ratio": 0.29}})
    conds = gateway_conditions(gw, None, GatewaySettings(error_5xx_ratio=0.05),
                               AlertTiming())
    book = AlertBook()
    book.update(conds, NOW - 120)
    book.update(conds, NOW)
    return replace(base, alerts=(*book.sorted(), *base.alerts),
                   alert_history=(*base.alert_history, *book.history))


# -- the header's hard cases (issue 47, item 1) -------------------------------------------

CONTEXTS = ("seoul", "tokyo", "oregon")


def stop_near_state(**changes: Any) -> ConsoleState:
    """The idle stop 4 minutes away, inside its 10-minute warning: the agent warns."""
    plan = stop_plan(next_reason="idle", in_s=240.0, warning=True, warn_before_s=600.0,
                     idle_s=1560.0)
    return state(pod_=pod(stop_plan=plan), **changes)


def extended_state(**changes: Any) -> ConsoleState:
    """An extension to 20:00 by alice in effect: the stop that was due has moved."""
    plan = stop_plan(next_reason="extension ends", in_s=57 * 60.0,
                     extension_until="2026-11-19T20:00:00+09:00", extension_by="alice",
                     extension_stops_at_end=True, warn_before_s=600.0)
    return state(pod_=pod(stop_plan=plan), **changes)


def watchdog_failing_state(**changes: Any) -> ConsoleState:
    """The agent says its watchdog's ticks fail since 10:30 (issue 42): said on top."""
    plan = stop_plan(failing_since="2026-11-19T10:30:00+09:00",
                     failing_error="ModuleNotFoundError: No module named 'prometheus_client'",
                     failing_ticks=12)
    return state(pod_=pod(stop_plan=plan), **changes)


def failing_gateway_reading() -> Any:
    """The gateway with no deployment in cooldown but 30.8 % of its calls failing."""
    gw = gateway_reading()
    rows = tuple(replace(d, status="healthy") for d in gw.deployments)
    return replace(gw, deployments=rows, total={**gw.total, "error_rate": 0.308})
