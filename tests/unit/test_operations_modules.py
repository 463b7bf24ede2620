"""Operations as modules: each module is one operation; one flow runs them all; the
registry's sender refuses by mode (read-only: the dangerous ones; a wall: every one).

The flow is driven here without Textual, through a host that records what a person
would have seen and answers the dialogs as scripted."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from console.config.settings import Settings
from console.model.alerts import AlertEvent
from console.model.snapshot import PodSnapshot
from console.operations import ops
from console.operations.audit import AuditLog
from console.operations.operation import Operation, OperationFacts
from console.operations.ops import OPERATIONS, build_registry
from console.operations.registry import OperationRegistry, OperationSpec, Outcome, Progress
from console.operations.specs import SPECS
from console.sources.agent_client import AgentClient
from console.sources.collect.targets import targets_for
from console.ui.operation_flow import run_operation
from pod_agent.profiles import load_profile
from tests.conftest import PROFILES
from tests.support.waits import steps_until

NOW = 1_795_000_000.0


# -- one module per operation ---------------------------------------------------------
def _modules() -> list[Any]:
    return [importlib.import_module(f"{ops.__name__}.{m.name}")
            for m in pkgutil.iter_modules(ops.__path__)]


def test_every_operation_module_exports_its_spec_and_handler() -> None:
    mods = _modules()
    assert {m.__name__.rsplit(".", 1)[1] for m in mods} == set(SPECS)  # none left out
    for mod in mods:
        name = mod.__name__.rsplit(".", 1)[1]
        assert isinstance(mod.SPEC, OperationSpec) and mod.SPEC.id == name, name
        assert inspect.iscoroutinefunction(mod.handler), name
        assert list(inspect.signature(mod.handler).parameters) == ["deps", "args",
                                                                    "progress"], name
        for hook in ("preflight", "ask", "question"):
            if hasattr(mod, hook):
                assert callable(getattr(mod, hook)), (name, hook)
        if hasattr(mod, "ask"):
            assert inspect.iscoroutinefunction(mod.ask), name
        op = OPERATIONS[name]
        assert (op.spec, op.handler) == (mod.SPEC, mod.handler)  # SPECS is a view of them
    assert list(SPECS.values()) == [op.spec for op in OPERATIONS.values()]
    assert len({s.key for s in SPECS.values()}) == len(SPECS)
    # every dangerous operation asks something before it runs
    assert all(s.confirm or OPERATIONS[s.id].question for s in SPECS.values() if s.dangerous)


def test_the_per_id_branches_left_the_app() -> None:
    ui = Path(__file__).parents[2] / "console" / "ui"
    # the app and the mixins it is made of (replay keys, error boundary, navigation,
    # palette commands): none of them has an operation's own branch
    src = "\n".join(p.read_text() for p in sorted(ui.glob("*.py")))
    for gone in ('== "rebalance"', '== "watchdog"', '== "resume"', "_confirm_fields",
                 "_watchdog_question", "_rebalance_screen", "refresh_target", "ack_target"):
        assert gone not in src, gone


# -- the registry: refresh and acknowledge from its constructor; refusal by mode --------
async def test_refresh_and_acknowledge_come_from_the_constructor(tmp_path: Path) -> None:
    polls: list[int] = []
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), agent=AgentClient(None),
                         refresh=lambda: polls.append(1),
                         acknowledge=lambda: ["KV cache full", "Q27 down"])
    assert (await reg.invoke("refresh")).ok and polls == [1]
    out = await reg.invoke("ack")
    assert out.ok and out.message == "acknowledged 2: KV cache full; Q27 down"
    # the console that shows it takes both over: no attribute is patched in
    reg.attach_console(refresh=lambda: polls.append(2), acknowledge=lambda: [])
    await reg.invoke("refresh")
    assert polls == [1, 2] and (await reg.invoke("ack")).message == \
        "nothing firing to acknowledge"
    assert [(r["action"], r["result"]) for r in reg.audit.records()] == [
        ("ack", "started"), ("ack", "ok"), ("ack", "started"), ("ack", "ok")]
    bare = build_registry(AuditLog(tmp_path / "bare.jsonl"), agent=None)
    assert (await bare.invoke("ack")).message == "no alerts to acknowledge yet"
    assert not (await bare.invoke("refresh")).ok


def _guarded(tmp_path: Path, **mode: bool) -> tuple[OperationRegistry, list[str]]:
    ran: list[str] = []

    def handler(name: str) -> Callable[[dict[str, Any], Progress], Any]:
        async def run(args: dict[str, Any], progress: Progress) -> Outcome:
            ran.append(name)
            return Outcome(True, "ran")
        return run

    reg = OperationRegistry(AuditLog(tmp_path / "audit.jsonl"), refresh=lambda: None,
                            acknowledge=lambda: [], **mode)
    for spec in SPECS.values():
        reg.register(spec, handler(spec.id))
    return reg, ran


async def test_read_only_refuses_every_dangerous_operation_at_the_sender(tmp_path) -> None:
    reg, ran = _guarded(tmp_path, read_only=True)
    dangerous = {s.id for s in SPECS.values() if s.dangerous}
    assert dangerous == {"resume", "fallback", "host_checks", "rebalance", "restart", "watchdog",
                         "bench"}
    for op_id in SPECS:
        out = await reg.invoke(op_id, {"cmd": "stop-now"})
        if op_id in dangerous:
            assert out.state == "refused" and "read-only mode" in out.message, op_id
            assert not reg.allowed(op_id)
        else:
            assert out.ok and reg.allowed(op_id), op_id
    assert set(ran) == set(SPECS) - dangerous
    refused = {r["action"] for r in reg.audit.records() if r["result"] == "refused"}
    assert refused == dangerous


async def test_a_wall_refuses_every_operation(tmp_path: Path) -> None:
    reg, ran = _guarded(tmp_path, wall=True)
    assert reg.read_only  # a wall is read-only, and more
    for op_id in SPECS:
        assert not reg.allowed(op_id)
        out = await reg.invoke(op_id)
        assert out.state == "refused" and not out.ok, op_id
    assert ran == [] and reg.executed == []
    records = reg.audit.records()
    # what is recorded when it runs is recorded when refused; the reason says which guard
    assert {r["action"] for r in records} == {s.id for s in SPECS.values() if s.recorded}
    assert {r["result"] for r in records} == {"refused"}
    assert {r["reason"] for r in records if r["action"] == "watchdog"} == {"read-only mode"}
    assert {r["reason"] for r in records if r["action"] == "ack"} == {"wall mode"}


async def test_the_context_builds_a_wall_registry_for_a_read_only_console(tmp_path) -> None:
    from console.session.context import make_context

    settings = Settings(profiles_dir=PROFILES, state_dir=tmp_path)
    ctx = make_context(settings, read_only=True)
    try:
        assert ctx.registry.wall and not any(ctx.registry.allowed(i) for i in SPECS)
    finally:
        for fn in ctx.on_exit:
            r = fn()
            if asyncio.iscoroutine(r):
                await r
        await ctx.poller.aclose()


# -- one flow: preflight, ask, confirm, progress -----------------------------------------
class FakeProgress:
    def __init__(self, title: str, on_cancel: Callable[[], None] | None,
                 compact: bool = False) -> None:
        self.title = title
        self.on_cancel = on_cancel
        self.compact = compact
        self.steps: list[tuple[str, float | None, str]] = []
        self.end: tuple[bool, str] | None = None

    def step(self, step: str, fraction: float | None, message: str) -> None:
        self.steps.append((step, fraction, message))

    def finish(self, ok: bool, message: str) -> None:
        self.end = (ok, message)


class FakeDialogs:
    def __init__(self) -> None:
        self.split: dict[str, float] | None = None
        self.watchdog: dict[str, Any] | None = None
        self.asked: list[tuple[str, tuple[Any, ...]]] = []

    async def choose_split(self, rows, plan_lines, predict) -> dict[str, float] | None:
        self.asked.append(("split", (rows, plan_lines, predict)))
        return self.split

    async def choose_watchdog(self, armed, next_stop, now, extension) -> dict[str, Any] | None:
        self.asked.append(("watchdog", (armed, next_stop, now, extension)))
        return self.watchdog


class FakeHost:
    """What a person would have seen, and scripted answers."""

    def __init__(self, reg: OperationRegistry | None, facts: OperationFacts,
                 answer: bool = True) -> None:
        self.reg = reg
        self.ready = asyncio.Event()
        self._facts = facts
        self.dialogs = FakeDialogs()
        self.answer = answer
        self.questions: list[tuple[str, str]] = []
        self.notes: list[str] = []
        self.progress: list[FakeProgress] = []
        self.events: list[AlertEvent] = []
        self.refreshes = 0
        self.on_progress_open: Callable[[FakeProgress], None] = lambda p: None

    def registry_now(self) -> OperationRegistry | None:
        return self.reg if self.ready.is_set() else None

    async def registry_ready(self) -> OperationRegistry:
        await self.ready.wait()
        assert self.reg is not None
        return self.reg

    def facts(self) -> OperationFacts:
        return self._facts

    def now(self) -> float:
        return NOW

    def note(self, text: str, style: str = "", replace: bool = False) -> None:
        if replace and self.notes:
            self.notes[-1] = text
        else:
            self.notes.append(text)

    async def confirm(self, title: str, question: str) -> bool:
        self.questions.append((title, question))
        return self.answer

    def open_progress(self, title: str, on_cancel: Callable[[], None] | None,
                      compact: bool = False) -> FakeProgress:
        p = FakeProgress(title, on_cancel, compact)
        self.progress.append(p)
        self.on_progress_open(p)
        return p

    def show_state(self) -> None:
        pass

    def refresh_now(self) -> None:
        self.refreshes += 1

    def record_event(self, event: AlertEvent) -> None:
        self.events.append(event)


def _facts(tmp_path: Path, pod: PodSnapshot | None = None, agent: bool = True,
           planner: Any = None, **settings: Any) -> OperationFacts:
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    s = Settings(profiles_dir=PROFILES, state_dir=tmp_path, **settings)
    return OperationFacts(now=NOW, pod=pod, snapshot=None, settings=s,
                          profile_name="rtx6000-2x", profile=profile,
                          targets=targets_for(profile, "10.0.0.5"), agent_configured=agent,
                          planner=planner)


SPLIT_SPEC = OperationSpec("split", "x", "Split the cake", "cut it", True,
                           "Cut {cake} into {parts} on pod {pod}?")


def _cake(tmp_path: Path, cancellable: bool = False,
          ran: list[dict[str, Any]] | None = None,
          outcome: Outcome | None = None) -> tuple[OperationRegistry, dict[str, Operation]]:
    """A fake operation with every hook: the flow knows nothing of it but its module."""
    spec = replace(SPLIT_SPEC, cancellable=cancellable)
    gate = asyncio.Event()

    async def handler(deps: Any, args: dict[str, Any], progress: Progress) -> Outcome:
        progress("slice", 0.5, "halfway")
        if cancellable:
            await gate.wait()
        if ran is not None:
            ran.append(args)
        return outcome or Outcome(True, f"cut into {args['parts']}")

    def preflight(facts: OperationFacts, args: dict[str, Any]) -> str | None:
        return "no cake" if args.get("cake") == "none" else None

    async def ask(facts: OperationFacts, args: dict[str, Any], dialogs: Any
                  ) -> dict[str, Any] | None:
        if args.get("parts") == 0:
            return None  # the person cancelled
        return {**args, "parts": args.get("parts", 8)}

    def question(facts: OperationFacts, args: dict[str, Any]) -> str:
        return f"Cut {args['cake']} into {args['parts']} on pod {facts.pod_label()}?"

    op = Operation(spec, handler, preflight, ask, question)
    reg = OperationRegistry(AuditLog(tmp_path / "audit.jsonl"))
    reg.register(spec, op.bound(None))  # type: ignore[arg-type]
    return reg, {"split": op}


async def test_the_flow_runs_preflight_ask_confirm_progress_in_order(tmp_path) -> None:
    ran: list[dict[str, Any]] = []
    reg, operations = _cake(tmp_path, ran=ran)
    host = FakeHost(reg, _facts(tmp_path, PodSnapshot(pod_id="emu0042", cost_per_hr=4.18)))
    # not loaded yet: said, then it waits for the console instead of dropping the request
    task = asyncio.create_task(run_operation(host, "split", {"cake": "lemon"}, operations))
    assert await steps_until(lambda: bool(host.notes)), "nothing said while loading"
    assert host.notes == ["console still loading: the operation starts once it has"]
    host.ready.set()
    out = await task
    assert out is not None and out.ok and out.message == "cut into 8"
    assert ran == [{"cake": "lemon", "parts": 8}]  # what ask added reached the handler
    assert host.questions == [("Split the cake", "Cut lemon into 8 on pod emu0042?")]
    [p] = host.progress
    assert p.steps == [("slice", 0.5, "halfway")] and p.end == (True, "cut into 8")
    assert p.on_cancel is None  # not cancellable: the dialog offers no c
    assert "Split the cake: started (cake lemon; parts 8)" in host.notes
    assert "Split the cake: ok — cut into 8" in host.notes
    assert host.refreshes == 1 and host.events == []
    assert [r["result"] for r in reg.audit.records()] == ["started", "ok"]


async def test_the_flow_stops_where_a_hook_or_the_person_says_so(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []
    reg, operations = _cake(tmp_path, ran=ran)
    host = FakeHost(reg, _facts(tmp_path))
    host.ready.set()
    assert await run_operation(host, "split", {"cake": "none"}, operations) is None
    assert host.notes[-1] == "Split the cake: not started — no cake" and not host.questions
    assert await run_operation(host, "split", {"cake": "lemon", "parts": 0},
                               operations) is None
    assert host.notes[-1] == "Split the cake: cancelled" and not host.questions
    host.answer = False
    assert await run_operation(host, "split", {"cake": "lemon"}, operations) is None
    assert host.notes[-1] == "Split the cake: cancelled" and len(host.questions) == 1
    reg.in_flight = "split"  # one dangerous operation at a time: said before asking
    assert await run_operation(host, "split", {"cake": "lemon"}, operations) is None
    assert "not now" in host.notes[-1] and len(host.questions) == 1
    assert ran == [] and reg.audit.records() == [] and host.progress == []


async def test_a_failed_operation_is_an_event_and_a_cancelled_one_is_not(tmp_path) -> None:
    reg, operations = _cake(tmp_path, outcome=Outcome(False, "knife broke", state="failed"))
    host = FakeHost(reg, _facts(tmp_path))
    host.ready.set()
    out = await run_operation(host, "split", {"cake": "lemon"}, operations)
    assert out is not None and not out.ok
    [ev] = host.events
    assert (ev.kind, ev.severity, ev.title, ev.detail) == (
        "failed", "crit", "Split the cake failed", "knife broke")
    # cancellable: c in the dialog cancels it, nothing is kept, nothing alerts
    reg, operations = _cake(tmp_path / "c", cancellable=True)
    (tmp_path / "c").mkdir()
    host = FakeHost(reg, _facts(tmp_path))
    host.ready.set()
    host.on_progress_open = lambda p: asyncio.get_running_loop().call_later(
        0.05, p.on_cancel)  # type: ignore[arg-type]
    out = await run_operation(host, "split", {"cake": "lemon"}, operations)
    assert out is not None and out.state == "cancelled" and host.events == []
    assert [r["result"] for r in reg.audit.records()] == ["started", "cancelled"]


async def test_a_refused_operation_is_recorded_and_said_without_a_question(tmp_path) -> None:
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), True, agent=AgentClient(None))
    host = FakeHost(reg, _facts(tmp_path))
    host.ready.set()
    out = await run_operation(host, "fallback", {})
    assert out is not None and out.state == "refused" and not host.questions
    assert host.notes == ["Fallback provisioning refused: read-only mode"]
    assert [r["result"] for r in reg.audit.records()] == ["refused"]


# -- the real operations' hooks, through the same flow ---------------------------------
async def test_resume_and_agent_operations_say_why_before_asking(tmp_path: Path) -> None:
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), agent=AgentClient(None))
    host = FakeHost(reg, _facts(tmp_path, PodSnapshot(pod_id="emu1", status="RUNNING"),
                                agent=False))
    host.ready.set()
    for op_id in ("resume", "host_checks", "rebalance", "watchdog"):
        assert await run_operation(host, op_id, {}) is None
    assert host.notes == [
        "Resume pod: not started — pod emu1 is already RUNNING",
        "Host checks: not started — no pod agent configured (pod.ssh_host in the config)",
        "Rebalance gpu_util: not started — no pod agent configured (pod.ssh_host in the "
        "config)",
        "Watchdog: not started — no pod agent configured (pod.ssh_host in the config)"]
    assert not host.questions and not host.dialogs.asked and reg.executed == []


async def test_rebalance_asks_for_a_split_then_names_it_in_the_question(tmp_path) -> None:
    from console.operations.planner import Planner

    pod = PodSnapshot(pod_id="emu7", agent_slots={"FLASH": {"gpu_util": 0.7}})
    facts = _facts(tmp_path, pod, planner=Planner(
        load_profile(PROFILES / "10-rtx6000-2x.yaml"), tmp_path))
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), agent=AgentClient(None))
    host = FakeHost(reg, facts, answer=False)
    host.ready.set()
    assert await run_operation(host, "rebalance", {}) is None  # the editor: escape
    [(kind, (rows, lines, predict))] = host.dialogs.asked
    assert kind == "split" and [r["slot"] for r in rows] == ["FLASH", "Q27"]
    assert rows[0]["current"] == 0.7  # the agent's figure beats the profile's
    assert rows[1]["current"] == facts.profile.slots["Q27"].gpu_util
    assert any(line.startswith("proposed: ") for line in lines)  # the planner's
    assert predict("FLASH", 0.6).startswith("KV ")  # and its forecast beside each row
    assert host.notes == ["Rebalance gpu_util: cancelled"] and not host.questions
    host.dialogs.split = {"FLASH": 0.6, "Q27": 0.3}
    assert await run_operation(host, "rebalance", {}) is None  # the question: n
    assert host.questions == [("Rebalance gpu_util", "Restart slots on pod emu7 with "
                               "FLASH=0.6, Q27=0.3? Each restart takes the slot offline "
                               "for its start-up time.")]
    assert reg.executed == []


async def test_watchdog_questions_say_what_it_costs(tmp_path: Path) -> None:
    pod = PodSnapshot(pod_id="emu7", cost_per_hr=4.18, watchdog_armed=True,
                      next_stop="2026-11-18T18:00:00+09:00")
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), agent=AgentClient(None))
    host = FakeHost(reg, _facts(tmp_path, pod, context="lab"), answer=False)
    host.ready.set()
    host.dialogs.watchdog = {"cmd": "disarm"}
    await run_operation(host, "watchdog", {})
    assert host.dialogs.asked == [("watchdog", (True, "2026-11-18T18:00:00+09:00", NOW,
                                                None))]
    await run_operation(host, "watchdog", {"cmd": "extend", "until": "+2h",
                                           "reason": "demo"})
    await run_operation(host, "watchdog", {"cmd": "arm"})  # no menu: the command is given
    q = [text for _, text in host.questions]
    assert q[0].startswith("DISARM the watchdog on pod emu7 (context lab)? NOTHING")
    assert "$4.18/h" in q[0]
    assert q[1].startswith("Keep pod emu7 (context lab) running until +2h (demo)?")
    assert q[2] == "Watchdog: arm on pod emu7 (context lab)?"
    assert len(host.dialogs.asked) == 1


async def test_bench_question_counts_the_requests_and_names_the_path(tmp_path) -> None:
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), agent=AgentClient(None))
    host = FakeHost(reg, _facts(tmp_path, PodSnapshot(pod_id="emu7")), answer=False)
    host.ready.set()
    await run_operation(host, "bench", {"slot": "FLASH"})
    await run_operation(host, "bench", {"slot": "NOPE"})
    [(_, known), (_, unknown)] = host.questions
    assert known.startswith("Benchmark slot FLASH on pod emu7? It sends ")
    assert "streamed requests via direct" in known and "? streamed" not in known
    assert "sends ? streamed requests via ?" in unknown  # says it does not know
    assert reg.executed == []


@pytest.mark.parametrize("op_id", sorted(s.id for s in SPECS.values() if s.dangerous))
def test_every_dangerous_question_fills_in(tmp_path: Path, op_id: str) -> None:
    facts = _facts(tmp_path, PodSnapshot(pod_id="emu7", cost_per_hr=4.18))
    text = OPERATIONS[op_id].confirmation(facts, {"slot": "FLASH", "cmd": "arm",
                                                  "set": {"FLASH": 0.5}})
    assert "{" not in text and "}" not in text and text.endswith(("?", ".")), text


class _AgentOnThePod:
    """What the agent answers ``restart`` with (its events, then its end); the commands
    it was sent. The real agent's restart runs in tests/tui/test_demo_flows.py."""

    def __init__(self, final: dict[str, Any]) -> None:
        from console.sources.remote import AgentEndpoint

        self.ep = AgentEndpoint(host="pod")
        self.final = final
        self.sent: list[list[str]] = []

    async def run(self, args: list[str], on_event: Any = None, timeout_s: float = 60.0):
        from console.sources.remote import AgentResult

        self.sent.append(args)
        ev = {"kind": "progress", "step": f"stop {args[-1]}", "fraction": 0.0}
        if on_event is not None:
            on_event(ev)
        return AgentResult(0, self.final, (ev, self.final))


async def test_restart_asks_names_the_slot_runs_through_the_agent_and_is_audited(
        tmp_path: Path) -> None:
    agent = _AgentOnThePod({"kind": "result", "state": "ok", "slot": "FLASH",
                            "startup_s": 41.0})
    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"),
                         agent=AgentClient(agent))  # type: ignore[arg-type]
    host = FakeHost(reg, _facts(tmp_path, PodSnapshot(pod_id="emu7")), answer=False)
    host.ready.set()
    assert SPECS["restart"].per_slot and SPECS["restart"].dangerous
    assert await run_operation(host, "restart", {"slot": "FLASH"}) is None  # n
    assert host.questions == [("Restart slot", "Restart slot FLASH on pod emu7? Its "
                               "running requests fail and it serves nothing for its "
                               "start-up time.")]
    assert agent.sent == [] and reg.executed == []
    host.answer = True
    out = await run_operation(host, "restart", {"slot": "FLASH"})
    assert out is not None and out.ok and out.message == "FLASH restarted (up after 41 s)"
    [cmd] = agent.sent
    # `pod-agent restart --action-id ID -- FLASH`: the request's own command line
    assert cmd[0] == "restart" and cmd[-2:] == ["--", "FLASH"]
    assert cmd[cmd.index("--action-id") + 1].startswith("restart-")
    assert [(r["action"], r["arguments"], r["result"]) for r in reg.audit.records()] == [
        ("restart", {"slot": "FLASH"}, "started"), ("restart", {"slot": "FLASH"}, "ok")]
    assert host.progress and host.progress[0].steps[0][0] == "stop FLASH"
    # the agent's refusal is the outcome, said and recorded
    agent.final = {"kind": "error", "state": "failed", "message": "FLASH did not start"}
    out = await run_operation(host, "restart", {"slot": "FLASH"})
    assert out is not None and not out.ok and "FLASH did not start" in out.message
    assert reg.audit.records()[-1]["result"] == "failed"
    # without an agent it says why before asking
    bare = build_registry(AuditLog(tmp_path / "a2.jsonl"), agent=AgentClient(None))
    host2 = FakeHost(bare, _facts(tmp_path, PodSnapshot(pod_id="emu7"), agent=False))
    host2.ready.set()
    assert await run_operation(host2, "restart", {"slot": "FLASH"}) is None
    assert host2.notes == ["Restart slot: not started — no pod agent configured "
                           "(pod.ssh_host in the config)"] and not host2.questions


def _chatty(tmp_path: Path, compact: bool) -> OperationRegistry:
    """An operation that counts down a round like the fallback, tries GPU types, and
    (``compact``) has the benchmark's many steps."""
    spec = OperationSpec("chatty", "x", "Fallback", "falls back", False, shows_progress=True,
                         compact_log=compact)

    async def handler(deps: Any, args: dict[str, Any], progress: Progress) -> Outcome:
        progress("create", 0.1, "H100 SXM: sold out")
        progress("create", 0.2, "A100 80GB: sold out")
        for left in range(30, 0, -1):
            progress("wait", 1 - left / 30, f"everything sold out; round 2/3 in {left} s")
        for i in range(30):
            progress(f"step-{i}", i / 30, f"run {i}/30: 142.0 tok/s")
        return Outcome(True, "done")

    reg = OperationRegistry(AuditLog(tmp_path / "audit.jsonl"))
    reg.register(spec, Operation(spec, handler).bound(None))  # type: ignore[arg-type]
    return reg


async def test_a_countdown_is_one_line_in_place_and_tried_gpus_stay(tmp_path) -> None:
    """Issue 30 #11: the fallback's countdown updates its one line, not a line a second;
    the GPU types it tried stay in the log."""
    host = FakeHost(_chatty(tmp_path, compact=False), _facts(tmp_path))
    host.ready.set()
    out = await run_operation(host, "chatty", {})
    assert out is not None and out.ok
    waits = [n for n in host.notes if "round 2/3" in n]
    assert waits == ["  Fallback · wait everything sold out; round 2/3 in 1 s"], host.notes
    assert any("H100 SXM: sold out" in n for n in host.notes)
    assert any("A100 80GB: sold out" in n for n in host.notes)


async def test_a_compact_operation_keeps_one_progress_line(tmp_path) -> None:
    """Issue 30 #11: a benchmark's thirty steps are one line of the action log."""
    host = FakeHost(_chatty(tmp_path, compact=True), _facts(tmp_path))
    host.ready.set()
    await run_operation(host, "chatty", {})
    progress_lines = [n for n in host.notes if n.startswith("  Fallback ·")]
    assert len(progress_lines) == 1, host.notes
    assert "step-29" in progress_lines[0]
    assert SPECS["bench"].compact_log
    # and its dialog is told so (it keeps one step line too: tests/screens/test_floods)
    assert [p.compact for p in host.progress] == [True]


async def test_the_smoke_dialog_says_each_checks_time() -> None:
    """Issue 30 #14: every smoke check's progress line carries how long it took."""
    from types import SimpleNamespace

    from console.operations.ops import smoke as smoke_op
    from tests.screens import states

    report = states.smoke_report()

    async def smoke(on_check: Callable[[Any], None]) -> Any:
        for c in report.checks:
            on_check(c)
        return report

    lines: list[str] = []
    await smoke_op.handler(SimpleNamespace(smoke=smoke), {},  # type: ignore[arg-type]
                           lambda step, frac, msg: lines.append(f"{step}: {msg}"))
    assert len(lines) == len(report.checks)
    for c, line in zip(report.checks, lines, strict=True):
        assert line.endswith(f"({c.duration_s:.2f} s)"), line


def test_the_app_keeps_timers_screens_and_dialogs_only() -> None:
    """Issue 27's bound: ``console/ui/app.py`` at most 450 lines. What keys and failures
    do lives in collaborators the app holds (issue 46: not its base classes), a module
    each, and none of them grows back into it; every key bound on the app or a screen
    lands on an action of the app (Textual finds it there by name)."""
    from textual.app import App
    from textual.binding import Binding

    from console.ui.app import PodConsoleApp
    from console.ui.error_boundary import ErrorBoundary
    from console.ui.navigation import Navigation
    from console.ui.palette_commands import PaletteCommands
    from console.ui.quitting import Quitting
    from console.ui.replay_keys import ReplayKeys
    from console.ui.screens import alerts, detail, fleet, gateway, gpus, log, main, wall

    app_py = Path(__file__).parents[2] / "console" / "ui" / "app.py"
    assert len(app_py.read_text().splitlines()) <= 450
    for held in (ReplayKeys, ErrorBoundary, Navigation, PaletteCommands, Quitting):
        assert not issubclass(PodConsoleApp, held)
    bindings = [b for b in PodConsoleApp.BINDINGS if isinstance(b, Binding)]
    for module in (alerts, detail, fleet, gateway, gpus, log, main, wall):
        for screen in vars(module).values():
            if isinstance(screen, type) and hasattr(screen, "BINDINGS"):
                bindings += [b for b in screen.BINDINGS if isinstance(b, Binding)
                             and b.action.startswith("app.")]
    missing = set()
    for b in bindings:
        name = b.action.removeprefix("app.").split("(")[0]
        action = getattr(PodConsoleApp, f"action_{name}", None)
        if action is None or (getattr(App, f"action_{name}", None) is action
                              and name not in {"pop_screen", "focus_next", "focus_previous",
                                               "command_palette", "quit"}):
            missing.add(name)
    assert not missing, missing
    assert len(bindings) > 20
