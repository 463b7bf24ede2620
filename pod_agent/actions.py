"""Long actions run inside the supervisor, recorded so a dropped SSH session can reattach.

Each action has an id (chosen by the caller, so a retry after a dropped
connection finds the same action instead of starting a second one), a list of
events (also appended to ``actions/<id>.jsonl`` on disk) and a final state.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

from . import paths
from .events import encode, event
from .requests import valid_action_id

MAX_ACTIONS = 50
MAX_EVENTS = 2000


class Action:
    def __init__(self, action_id: str, kind: str, args: dict[str, Any]) -> None:
        if not valid_action_id(action_id):
            raise ValueError(f"bad action id {action_id!r}")
        self.id = action_id
        self.kind = kind
        self.args = args
        self.state = "running"  # running | ok | failed | rolled_back
        self.started_at = time.time()
        self.ended_at: float | None = None
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self._file = paths.path("actions", f"{action_id}.jsonl")

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        ev = event(kind, action=self.id, **fields)
        if len(self.events) < MAX_EVENTS:
            self.events.append(ev)
        with open(self._file, "a", encoding="utf-8") as fh:
            fh.write(encode(ev) + "\n")
        self._changed.set()
        self._changed = asyncio.Event()
        return ev

    def progress(self, step: str, fraction: float | None = None, message: str = "") -> None:
        self.emit("progress", step=step, fraction=fraction, message=message)

    def log(self, line: str) -> None:
        self.emit("log", line=line)

    def finish(self, state: str, **result: Any) -> None:
        self.state = state
        self.ended_at = time.time()
        if state in ("ok", "rolled_back"):
            self.emit("result", state=state, **result)
        else:
            self.emit("error", state=state, **result)

    @property
    def done(self) -> bool:
        return self.state != "running"

    async def follow(self, send: Callable[[dict[str, Any]], Any], start: int = 0) -> None:
        """Send every event from ``start`` on, then wait for more until the action ends."""
        i = start
        while True:
            while i < len(self.events):
                await send(self.events[i])
                i += 1
            if self.done:
                return
            waiter = self._changed
            await waiter.wait()

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "args": self.args, "state": self.state,
                "started_at": self.started_at, "ended_at": self.ended_at}


class ActionBook:
    def __init__(self) -> None:
        self.actions: dict[str, Action] = {}
        self.lock = asyncio.Lock()
        """One mutating action at a time: two rebalances racing would corrupt the split."""

    def get(self, action_id: str) -> Action | None:
        return self.actions.get(action_id)

    def new(self, action_id: str, kind: str, args: dict[str, Any]) -> Action:
        act = Action(action_id, kind, args)
        self.actions[action_id] = act
        if len(self.actions) > MAX_ACTIONS:
            oldest = sorted((a for a in self.actions.values() if a.done),
                            key=lambda a: a.started_at)
            for a in oldest[: len(self.actions) - MAX_ACTIONS]:
                del self.actions[a.id]
        return act

    def recent(self, n: int = 10) -> list[dict[str, Any]]:
        acts = sorted(self.actions.values(), key=lambda a: a.started_at)[-n:]
        return [a.summary() for a in acts]


def read_recorded(action_id: str) -> list[dict[str, Any]]:
    """Events of an action recorded on disk (for an action from before a restart)."""
    if not valid_action_id(action_id):
        return []
    p = os.path.join(paths.home(), "actions", f"{action_id}.jsonl")
    out = []
    try:
        with open(p, encoding="utf-8") as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except FileNotFoundError:
        pass
    return out
