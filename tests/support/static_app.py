"""A deterministic console for snapshot tests: fixed clock, fixed data, the real app factory.

Collectors are replaced by static ones that return snapshots computed by the
real figure code from the real vLLM 0.32.0 captures; history is a fixed series.
"""

from __future__ import annotations

import math
from pathlib import Path

from console.config.settings import AlertTiming, Settings
from console.model.history import History
from console.model.snapshot import DeploymentSnapshot, PodSnapshot, SlotSnapshot
from console.operations.audit import AuditLog
from console.operations.ops import build_registry
from console.sources.agent_client import AgentClient
from console.sources.collect.exposition import parse
from console.sources.collect.figures import compute
from console.sources.collect.targets import SlotTarget, targets_for
from console.ui.app import ConsoleContext, make_app
from pod_agent.profiles import load_profile
from tests.conftest import FIXTURES, PROFILES

NOW = 1_795_000_000.0  # fixed clock
CAP = FIXTURES / "vllm-0.32.0-cpu" / "ngram"


class StaticPoller:
    def __init__(self, snap: DeploymentSnapshot, targets: tuple[SlotTarget, ...]) -> None:
        self.snap = snap
        self.targets = targets
        self.prometheus_url = None

    async def poll(self) -> DeploymentSnapshot:
        return self.snap

    async def aclose(self) -> None:
        return None


class StaticPod:
    """A pod collector that answers with the pod it holds (a test swaps it)."""

    gpu_metrics = None
    """No GPU endpoint: the GPU line comes with the pod reading."""

    def __init__(self, pod: PodSnapshot) -> None:
        self.pod = pod

    @property
    def pod_id(self) -> str | None:
        """The pod it reads, as a real collector says (the session compares it with the
        last reading's: a new id is a new pod, read at once)."""
        return self.pod.pod_id

    async def poll(self) -> PodSnapshot:
        return self.pod


def build(tmp: Path, wall: bool = False, down_slot: bool = False,
          thresholds: dict | None = None, theme: str = "default"):
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    figs = compute(parse((CAP / "metrics-specdecode-after-basic-load.txt").read_text()),
                   parse((CAP / "metrics-specdecode-idle.txt").read_text()), 60.0)["tiny-main"]
    slots = []
    for name, slot in profile.slots.items():
        down = down_slot and name == "Q27"
        slots.append(SlotSnapshot(
            slot=name, served_model_name=slot.served_model_name, port=slot.port,
            url=f"http://10.0.0.5:{slot.port}", health="down" if down else "up",
            health_detail="connection refused" if down else "200",
            served_models=(slot.served_model_name,), figures=figs, kv_p99=0.031,
            probe_ok=True, source="direct", fetched_at=NOW,
            error="/metrics: connection refused" if down else None,
            stale_since=NOW - 42 if down else None))
    snap = DeploymentSnapshot("rtx6000-2x", tuple(slots), fetched_at=NOW)
    pod = PodSnapshot(pod_id="abc123xyz", status="RUNNING",
                      gpu_name="NVIDIA RTX PRO 6000 Blackwell Server Edition", gpu_count=2,
                      cost_per_hr=4.18, started_at=NOW - 3 * 3600, host_cuda="13.0",
                      p2p_disabled=False, watchdog_armed=True,
                      next_stop="2026-11-18T18:00:00+09:00",
                      agent_slots={n: {"gpu_util": s.gpu_util, "state": "ready"}
                                   for n, s in profile.slots.items()}, fetched_at=NOW,
                      gpus=snapshot_gpus())
    history = History(3600, 1)
    for i in range(120):
        t = NOW - 600 + i * 5
        for k, name in enumerate(profile.slots):
            history.add(name, "ttft_p95_s", t, 0.9 + 0.1 * math.sin(i / 9 + k))
            history.add(name, "kv_cache_usage", t, 0.02 + 0.015 * math.sin(i / 13 + k))
            history.add(name, "acceptance_rate", t, 0.6 + 0.06 * math.sin(i / 17 + k))
            history.add(name, "generation_tps", t, 40 + 9 * math.sin(i / 11 + k))
    # a fixed clock never lets a pending alert fire: fire at once, as the screenshots show
    settings = Settings(profiles_dir=PROFILES, state_dir=tmp, refresh_s=5,
                        alerts=AlertTiming(down_for_s=0, for_s=0, hold_s=0),
                        thresholds=thresholds or {}, theme=theme)
    registry = build_registry(AuditLog(tmp / "audit.jsonl"), wall, wall=wall,
                              agent=AgentClient(None), refresh=lambda: None)
    ctx = ConsoleContext(settings=settings, profile_name="rtx6000-2x", profile=profile,
                         poller=StaticPoller(snap, targets_for(profile, "10.0.0.5")),
                         registry=registry, history=history,
                         pod_collector=StaticPod(pod), clock=lambda: NOW, rotate_s=0)
    return make_app(ctx, wall=wall)


def snapshot_gpus():
    """Two RTX PRO 6000s as the agent reports them, with the H200 capture's readings
    (the stand-in's answers), one slot on each."""
    import json

    from console.model.gpu_state import parse
    from tests.conftest import FIXTURES

    doc = json.loads((FIXTURES / "nvml-h200x2" / "gpus-load.json").read_text())
    for g, slot, pid in zip(doc["gpus"], ("FLASH", "Q27"), (4101, 4102), strict=True):
        g["name"] = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        g["mem_total_bytes"] = 97887 << 20
        g["mem_used_bytes"] = int(0.76 * g["mem_total_bytes"])
        g["processes"] = [{"pid": pid, "slot": slot, "used_bytes": g["mem_used_bytes"]}]
    doc["t"] = NOW
    return parse(doc)
