"""A text box that keeps a burst of keys in the order typed.

Textual's ``Input`` inserts a printable key the moment it gets it, but acts on its
editing keys (backspace, delete, the arrows, home/end) through its bindings, which run
only once the key has bubbled back up to the app: a burst of keys (one read of the
terminal, a fast typist) had its characters land before the backspace typed ahead of
them, which then deleted them (``⌫8`` on ``0.76`` left ``0.76``; the rebalance editor's
``0.80`` came out ``0.``). Here the box's own editing bindings act when their key
arrives: before Input's private key handler, whose code (and the blink restart called
here) is pinned in ``console/ui/private_reach.py``; where it has changed, Input's own
behaviour."""

from __future__ import annotations

from textual import events
from textual.binding import BindingsMap
from textual.widgets import Input

from console.ui.private_reach import holds

EDITING_KEYS = BindingsMap(Input.BINDINGS)
"""Input's own bindings (its editing keys), by key."""


class OrderedInput(Input):
    async def on_key(self, event: events.Key) -> None:
        if event.is_printable or not holds("keys in the order typed"):
            return  # Input's own handler (after this one) inserts it, in order already
        bindings = EDITING_KEYS.key_to_bindings.get(event.key)
        if not bindings:
            return  # not the box's key (enter, escape, a screen's key): as Input does
        # acted on here, before the next key of the burst: not after a trip to the app
        event.stop()
        event.prevent_default()
        self._restart_blink()
        await self.run_action(bindings[0].action)
