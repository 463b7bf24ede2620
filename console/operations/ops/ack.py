"""a: every firing alert marked as seen by this user (audited: who saw what); it stays on
screen, dimmed, until it clears, and is not sent again. With ``alert`` (a key: enter on a
row of ``A``), that alert alone, with the alerts it explains when it is a group's parent."""

from __future__ import annotations

from console.operations.operation import Args, OperationDeps
from console.operations.registry import OperationSpec, Outcome, Progress

SPEC = OperationSpec(
    "ack", "a", "Acknowledge alerts", "mark every firing alert as seen by you (audited); "
    "it stays on screen, dimmed, until it clears, and is not sent again", False,
    label="ack", audited=True)


async def handler(deps: OperationDeps, args: Args, progress: Progress) -> Outcome:
    key = args.get("alert")
    titles = deps.acknowledge(str(key)) if key else deps.acknowledge()
    if titles is None:
        return Outcome(False, "no alerts to acknowledge yet", state="failed")
    if not titles:
        return Outcome(True, "nothing firing to acknowledge", state="ok")
    return Outcome(True, f"acknowledged {len(titles)}: " + "; ".join(titles),
                   {"alerts": titles})
