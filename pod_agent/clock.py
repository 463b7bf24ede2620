"""The agent's clock: the wall clock, unless ``POD_AGENT_CLOCK`` says otherwise.

``POD_AGENT_CLOCK="REAL_EPOCH,POD_EPOCH,SPEED"`` makes the agent read ``POD_EPOCH`` at
the real instant ``REAL_EPOCH`` and run ``SPEED`` times as fast from there. The demo's
accelerated clock (a whole evening in a minute) and the tests (a Monday at 17:59:40
whenever they run) use it; being anchored to a real instant, it survives a restart of
the agent unchanged, as a real clock does. Everything the stop policy times (the
schedule, idleness, grace, extensions) reads this clock and nothing else: instants on
``now``, durations on ``monotonic``. The watchdog's tick is on it too (``serve
--watchdog-interval`` is in pod seconds): at x60 it looks every half real second."""

from __future__ import annotations

import os
import time


def _parse(text: str) -> tuple[float, float, float] | None:
    try:
        real, pod, speed = (float(x) for x in text.split(","))
    except ValueError:
        return None
    return (real, pod, speed) if speed > 0 else None


def now() -> float:
    """Seconds since the epoch, as this pod's stop policy sees them."""
    spec = os.environ.get("POD_AGENT_CLOCK")
    real = time.time()
    if not spec:
        return real
    anchor = _parse(spec)
    if anchor is None:  # a broken setting must not stop pods at random: the wall clock
        return real
    r0, p0, speed = anchor
    return p0 + (real - r0) * speed


def monotonic() -> float:
    """Seconds on a clock no one sets (NTP, a VM resume step the wall clock, not this
    one), run at the agent clock's speed: the stop policy measures durations on it —
    idleness, the busy grace — and reads instants (the schedule) on ``now``. Only
    differences mean anything."""
    return time.monotonic() * speed()


def speed() -> float:
    anchor = _parse(os.environ.get("POD_AGENT_CLOCK", ""))
    return anchor[2] if anchor else 1.0


def spec_for(pod_epoch: float, speed: float = 1.0, real_epoch: float | None = None) -> str:
    """The ``POD_AGENT_CLOCK`` value that reads ``pod_epoch`` now (or at ``real_epoch``)."""
    return f"{time.time() if real_epoch is None else real_epoch:.3f},{pod_epoch:.3f},{speed:g}"
