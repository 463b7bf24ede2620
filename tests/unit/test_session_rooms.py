"""The session in rooms (issue 46, item 1): what each job beside time keeps lives in a
module of its own, the live and replay sessions are both a ``SessionLike`` (no
inheritance), and the session does not grow back. The sizes are a ratchet on the way to
the issue's targets (``session.py`` ≤ 500 lines, the class ≤ 25 attributes): lower them
as rooms move out, never raise them. They are below the targets now (the poll's body,
the refresh's pacing, the jobs and the clock have rooms of their own)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from console.session.record.replay import ReplaySession
from console.session.session import Session

SESSION = Path(__file__).resolve().parents[2] / "console" / "session" / "session.py"
MAX_LINES = 406
MAX_ATTRIBUTES = 21

ROOMS = {
    # an attribute the session must not hold again → the room that holds it now
    "_am": "delivery.AlertDelivery", "_outbox": "delivery.AlertDelivery",
    "_shared": "delivery.AlertDelivery", "_acked": "delivery.AlertDelivery",
    "watchdog_sent_at": "delivery.AlertDelivery",
    "recorder": "recording.SessionRecording", "_turn": "recording.SessionRecording",
    "_gateway_collector": "gateway_polling.GatewayPolling",
    "_fleet_collector": "fleet_polling.FleetPolling", "fleet": "fleet_polling.FleetPolling",
    "_book": "spend.SessionSpend", "run": "run_tracking.RunTracking",
    "_ops": "run_tracking.RunTracking", "inhibits": "intents.OperationIntents",
    "_raw_pod": "pod_reads.PodReads", "_agent_seen": "pod_reads.PodReads",
    "_gpu_line": "pod_reads.PodReads",
    "_reading": "poll_cycle.PollCycle", "_polling": "poll_cycle.PollCycle",
    "_poll_started_at": "poll_cycle.PollCycle", "polls": "poll_cycle.PollCycle",
    "poll_failure": "poll_cycle.PollCycle", "pod_reads": "poll_cycle.PollCycle",
    "gateway": "poll_cycle.PollCycle", "gateway_polling": "poll_cycle.PollCycle",
    "stalls": "poll_cycle.PollCycle", "wall_steps": "poll_cycle.PollCycle",
    "_chosen_refresh": "pacing.Pacing", "_probe_pause_said": "pacing.Pacing",
    "_tasks": "jobs.Jobs", "_spawn_job": "jobs.Jobs", "_ctx_clock": "clock.SessionClock",
}


def _session_class() -> ast.ClassDef:
    tree = ast.parse(SESSION.read_text())
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Session")


def _attributes(cls: ast.ClassDef) -> set[str]:
    """Every ``self.X = …`` (or annotated) target in the class: its own state."""
    out = set()
    for node in ast.walk(cls):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        for t in targets:
            for x in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) \
                        and x.value.id == "self":
                    out.add(x.attr)
    return out


def test_each_jobs_state_is_in_its_room() -> None:
    held = _attributes(_session_class())
    back = {a: room for a, room in ROOMS.items() if a in held}
    assert back == {}, f"moved back into Session (they belong in their rooms): {back}"


def test_the_session_does_not_grow_back() -> None:
    lines = len(SESSION.read_text().splitlines())
    attrs = _attributes(_session_class())
    assert lines <= MAX_LINES, f"session.py is {lines} lines (ratchet {MAX_LINES})"
    assert len(attrs) <= MAX_ATTRIBUTES, (len(attrs), sorted(attrs))


def test_a_replay_is_a_session_like_not_a_session() -> None:
    """No inheritance to override a live session's members: the protocol is the
    contract (mypy checks each class against it, ``tests/unit/test_types.py``)."""
    assert not issubclass(ReplaySession, Session)
    from console.session import session_like

    members = [n for n in vars(session_like.SessionLike) if not n.startswith("_")]
    members += list(session_like.SessionLike.__annotations__)
    for cls in (Session, ReplaySession):
        tree = ast.parse(inspect.getsource(cls))
        own = _attributes(next(n for n in tree.body if isinstance(n, ast.ClassDef)))
        missing = [m for m in members if m not in dir(cls) and m not in own]
        assert missing == [], (cls.__name__, missing)
