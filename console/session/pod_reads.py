"""What the session keeps of the pod between its readings (issue 46: one room, not six
attributes of the session): the last reading as read, the last one in which the agent
answered, the GPU line from the pod's GPU endpoint, and when the pod is next due.

The pod is read every ``POD_POLL_S`` (RunPod's rate limit, the agent's SSH command),
sooner while a slot starts (its phases change within seconds) or when a poll is asked
for; its times move with a step of the wall clock (:meth:`PodReads.shift`), so the
seconds since them stay what they were.
"""

from __future__ import annotations

from msgspec import Struct
from msgspec.structs import replace

from console.model import startup
from console.model.snapshot import PodSnapshot
from console.session.gpu_line import GpuLine

POD_POLL_S = 10.0
"""RunPod's v2 API allows ~60 requests/minute: pod state every 10 s is plenty."""
STARTING_POD_POLL_S = 4.0
"""While a slot starts the agent's phases change within seconds: the pod is read this
often then (the phase cell ran ~10 s behind the agent)."""


def shifted(pod: PodSnapshot | None, by: float) -> PodSnapshot | None:
    """``pod`` with its stop plan's reading time moved ``by`` seconds (a step of our
    wall clock): its countdown and idle count go on from where they were."""
    if pod is None or pod.stop_plan is None:
        return pod
    plan = pod.stop_plan
    return replace(pod, stop_plan=replace(plan, read_at=plan.read_at + by))


class PodReads(Struct):
    raw: PodSnapshot | None = None
    """The last pod reading as read (before the GPU line is merged into it)."""
    agent_seen: PodSnapshot | None = None
    """The last pod reading in which the agent answered (a stop is known from it once
    the agent has gone with its pod)."""
    gpu_line: GpuLine | None = None
    """The last good read of the pod's GPU endpoint (``gpu_line``)."""
    gpu_line_m: float | None = None
    """When ``gpu_line`` was read (monotonic)."""
    polled_at: float | None = None
    """When the pod was last read (monotonic)."""
    wanted: bool = True
    """A reading was asked for (an operation ended, ctrl+r): due at the next poll."""

    def due(self, mono: float) -> bool:
        """Whether this poll reads the pod."""
        raw, last = self.raw, self.polled_at
        every = STARTING_POD_POLL_S if raw is not None and any(
            startup.starting(st) for st in raw.agent_slots.values()) else POD_POLL_S
        return self.wanted or last is None or not 0.0 <= mono - last < every

    def read(self, mono: float) -> None:
        """A reading of the pod starts now."""
        self.wanted, self.polled_at = False, mono

    def shift(self, by: float) -> None:
        """The wall clock stepped ``by``: the wall times held here move with it."""
        self.raw = shifted(self.raw, by)
        self.agent_seen = shifted(self.agent_seen, by)
        if self.gpu_line is not None:
            self.gpu_line = replace(self.gpu_line, read_at=self.gpu_line.read_at + by)
