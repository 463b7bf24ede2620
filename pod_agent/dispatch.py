"""The supervisor's Unix socket: one request a connection, read with its model
(``requests``) and answered by its handler here — :data:`HANDLERS` holds one for every
request the registry has (``tests/unit/test_agent_requests.py`` checks it).

Long requests (rebalance, restart, stop-now) run as actions: recorded under the id the
caller chose, so a retry after a dropped connection follows the same action instead of
starting a second one."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Dict, Protocol, Type

from . import audit
from .actions import Action, ActionBook, read_recorded
from .events import encode, event
from .requests import (
    REQUESTS,
    AgentRequest,
    ArmRequest,
    AttachRequest,
    BadRequest,
    DisarmRequest,
    ExtendRequest,
    GpusRequest,
    LogsRequest,
    MemFloorRequest,
    RebalanceRequest,
    Refused,
    RestartRequest,
    ShutdownRequest,
    StatusRequest,
    StopNowRequest,
    StoppingRequest,
    parse,
    parse_line,
)
from .slot_keeper import SlotKeeper
from .stop_watch import StopWatch

Send = Callable[[Dict[str, Any]], Awaitable[None]]


class Agent(Protocol):
    """What the handlers reach of the supervisor."""

    keeper: SlotKeeper
    watch: StopWatch
    book: ActionBook
    background: set[asyncio.Task[Any]]

    def status(self) -> Dict[str, Any]: ...

    def gpu_status(self) -> Dict[str, Any]: ...

    def request_stop(self) -> None: ...


async def handle(agent: Agent, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
    """One connection: its request line, its events back, then closed."""
    async def send(ev: Dict[str, Any]) -> None:
        writer.write((encode(ev) + "\n").encode())
        await writer.drain()

    try:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            req = parse_line(line)  # every field its handler reads, type-checked
        except (asyncio.TimeoutError, ValueError) as exc:
            await _refuse(send, exc)
            return
        await dispatch(agent, req, send)
    except (ConnectionError, BrokenPipeError):
        # The client went away; any action it started keeps running in the book.
        audit.record({"op": "client-gone"})
    except Exception as exc:  # a bug answers and is recorded; it never kills the agent
        what = f"{type(exc).__name__}: {exc}"[:300]
        with contextlib.suppress(Exception):
            audit.record({"op": "request-failed", "error": what})
        with contextlib.suppress(Exception):
            await send(event("error", message=f"the agent failed this request: {what}"))
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _refuse(send: Send, exc: BaseException) -> None:
    # an unknown op or watchdog command is said as such; anything else is malformed
    text = str(exc)
    unknown = isinstance(exc, BadRequest) and text.startswith("unknown ")
    with contextlib.suppress(Exception):
        await send(event("error", message=text if unknown else f"bad request: {text}"))


async def dispatch(agent: Agent, req: AgentRequest | Dict[str, Any], send: Send) -> None:
    """Answer one request (a decoded object is read with its model first)."""
    if not isinstance(req, AgentRequest):
        try:
            req = parse(req)
        except BadRequest as exc:
            await _refuse(send, exc)
            return
    handler = HANDLERS[REQUESTS[req.key()]]
    try:
        await handler(agent, req, send)
    except Refused as exc:
        await send(event("error", message=str(exc)))


# -- the handlers: one per request --------------------------------------------------

async def _status(agent: Agent, req: Any, send: Send) -> None:
    await send(event("result", **agent.status()))


async def _gpus(agent: Agent, req: Any, send: Send) -> None:
    # the exporter's feed: the GPUs and the stop plan alone
    await send(event("result", **agent.gpu_status(),
                     watchdog=agent.watch.to_json(agent.watch.clock.now())))


async def _logs(agent: Agent, req: LogsRequest, send: Send) -> None:
    procs = agent.keeper.procs
    if req.slot not in procs:
        raise Refused(f"unknown slot {req.slot!r}")
    n = max(1, min(req.lines, 2000))
    await send(event("result", slot=req.slot, lines=procs[req.slot].tail(n)))


async def _attach(agent: Agent, req: AttachRequest, send: Send) -> None:
    act = agent.book.get(req.action_id)
    if act is not None:
        await act.follow(send)
        return
    recorded = read_recorded(req.action_id)
    if not recorded:
        raise Refused(f"no action {req.action_id!r}")
    for ev in recorded:
        await send(ev)
    if recorded[-1].get("kind") not in ("result", "error"):
        await send(event("error", message="the action was interrupted by an agent restart"))


async def _rebalance(agent: Agent, req: RebalanceRequest, send: Send) -> None:
    problems = agent.keeper.validate_split(dict(req.set))
    if problems:
        audit.record({"op": req.op, "action": req.action_id, "args": {"set": req.set},
                      "result": "rejected", "problems": problems})
        await send(event("error", message="; ".join(problems), problems=problems))
        return
    await _run_action(agent, req, send,
                      lambda act: agent.keeper.rebalance(act, dict(req.set)))


async def _restart(agent: Agent, req: RestartRequest, send: Send) -> None:
    if req.slot not in agent.keeper.procs:
        raise Refused(f"unknown slot {req.slot!r}")
    await _run_action(agent, req, send, lambda act: agent.keeper.restart(act, req.slot))


async def _stop_now(agent: Agent, req: StopNowRequest, send: Send) -> None:
    by = "".join(c for c in req.by or "" if c.isprintable())[:64] or "stop-now"
    await _run_action(agent, req, send, lambda act: agent.watch.stop_now(act, by))


async def _arm(agent: Agent, req: ArmRequest | DisarmRequest, send: Send) -> None:
    agent.watch.set_armed(isinstance(req, ArmRequest))
    await send(event("result", armed=agent.watch.state.armed))


async def _mem_floor(agent: Agent, req: MemFloorRequest, send: Send) -> None:
    await send(event("result", **agent.watch.guard.set_floor(req.value)))


async def _extend(agent: Agent, req: ExtendRequest, send: Send) -> None:
    await send(event("result", **await agent.watch.extend(req)))


async def _stopping(agent: Agent, req: StoppingRequest, send: Send) -> None:
    await send(event("result", **agent.watch.stopping_from_outside(req)))


async def _shutdown(agent: Agent, req: ShutdownRequest, send: Send) -> None:
    audit.record({"op": "shutdown"})
    await send(event("result", message="shutting down"))
    agent.request_stop()


HANDLERS: Dict[Type[AgentRequest], Callable[[Agent, Any, Send], Awaitable[None]]] = {
    StatusRequest: _status, GpusRequest: _gpus, LogsRequest: _logs, AttachRequest: _attach,
    RebalanceRequest: _rebalance, RestartRequest: _restart, StopNowRequest: _stop_now,
    ArmRequest: _arm, DisarmRequest: _arm, MemFloorRequest: _mem_floor,
    ExtendRequest: _extend, StoppingRequest: _stopping, ShutdownRequest: _shutdown}
"""Every request's handler, by its model."""


# -- actions ------------------------------------------------------------------------

async def _run_action(agent: Agent, req: Any, send: Send,
                      body: Callable[[Action], Awaitable[None]]) -> None:
    """Start ``body`` as the action ``req.action_id`` (one at a time) and follow it; the
    same id again follows the running or finished one instead."""
    op = req.op
    action_id = req.action_id or f"{op}-{int(time.time() * 1000)}"
    existing = agent.book.get(action_id)
    if existing is not None:  # idempotent retry after a dropped connection
        await existing.follow(send)
        return
    if agent.book.lock.locked():
        raise Refused("another action is running; try again later")
    args = {k: v for k, v in req.wire().items() if k not in ("op", "action_id")}
    act = agent.book.new(action_id, op, args)
    audit.record({"op": op, "action": action_id, "args": args, "result": "started"})
    task = asyncio.ensure_future(_action_body(agent.book, act, body))
    agent.background.add(task)  # a strong reference: the client may leave before it ends
    task.add_done_callback(agent.background.discard)
    await act.follow(send)


async def _action_body(book: ActionBook, act: Action,
                       body: Callable[[Action], Awaitable[None]]) -> None:
    async with book.lock:
        try:
            await body(act)
        except Exception as exc:  # an action must always end with a record
            if not act.done:
                act.finish("failed", message=f"{type(exc).__name__}: {exc}")
        audit.record({"op": act.kind, "action": act.id, "result": act.state})
