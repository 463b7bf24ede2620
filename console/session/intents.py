"""Operations that take slots down on purpose (``R``, ``b``, a resume, a fallback) and
hold those slots' alerts until they are up again (``model/inhibit.py``): the registry's
watcher, in a room of the session's own (issue 46).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from console.model.inhibit import InhibitBook, Intent

if TYPE_CHECKING:
    from console.session.view import ConsoleContext


class OperationIntents:
    """What each running operation means to take down, held in ``inhibits``."""

    def __init__(self, mono: Callable[[], float]) -> None:
        self._mono = mono
        self.inhibits = InhibitBook()
        self._of: dict[str, Intent] = {}
        self._ctx: ConsoleContext | None = None
        self._slots: Callable[[], Sequence[str]] = lambda: ()

    def watch(self, ctx: ConsoleContext, slots: Callable[[], Sequence[str]]) -> None:
        """Follow ``ctx``'s registry; ``slots``: the slots shown now (what a whole-pod
        operation takes down)."""
        self._ctx, self._slots = ctx, slots
        if self.operation not in ctx.registry.watchers:
            ctx.registry.watchers.append(self.operation)

    def operation(self, op_id: str, args: dict[str, Any], out: Any) -> None:
        """An operation starts (``out`` None) or ends: one that takes slots down on
        purpose holds their alerts from its start until they are up again."""
        ctx = self._ctx
        spec = ctx.registry.specs.get(op_id) if ctx is not None else None
        if ctx is None or spec is None or not spec.takes_down:
            return
        if out is None:
            every = list(self._slots()) or list(ctx.profile.slots)
            slots = {"slot": [str(args.get("slot") or "")],
                     "split": [str(k) for k in (args.get("set") or {})]}.get(
                         spec.takes_down, every)
            self._of[op_id] = self.inhibits.begin(
                spec.title, [x for x in slots if x], spec.takes_down == "pod", self._mono())
        elif (intent := self._of.pop(op_id, None)) is not None:
            self.inhibits.end(intent, bool(out.ok), self._mono())  # its clock: monotonic
