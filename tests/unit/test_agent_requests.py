"""One typed request across the wire (issue 46): each agent command is one model of
``pod_agent/requests.py``, and that model is its only shape from the console's call to
the supervisor's handler — ``argv()`` over SSH, ``pod-agent``'s parser (made from the
models) back into the same model, ``wire()`` over the socket, ``parse`` into the same
model again, and a handler keyed by it.

A new agent command therefore touches three files: its model in
``pod_agent/requests.py`` (fields, command line, registry), its handler in
``pod_agent/dispatch.py``, and the console code that sends it. The tests here hold the
registry, the handlers and the command line to one set, so a model without a handler or
a subcommand, or a subcommand without a model, fails here."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from pod_agent import cli
from pod_agent import requests as rq
from pod_agent.dispatch import HANDLERS

EXAMPLES: dict[str, rq.AgentRequest] = {
    "status": rq.StatusRequest(),
    "gpus": rq.GpusRequest(),
    "logs": rq.LogsRequest(slot="FLASH", lines=7),
    "attach": rq.AttachRequest(action_id="rebalance-1a2b"),
    "rebalance": rq.RebalanceRequest(set={"FLASH": 0.45, "Q27": 1 / 3},
                                     action_id="rebalance-1a2b"),
    "restart": rq.RestartRequest(slot="-odd-name", action_id="restart-9"),
    "stop-now": rq.StopNowRequest(action_id="stop-1", by="alice@laptop"),
    "watchdog arm": rq.ArmRequest(),
    "watchdog disarm": rq.DisarmRequest(),
    "watchdog mem-floor": rq.MemFloorRequest(value=12.5),
    "watchdog extend": rq.ExtendRequest(until="tomorrow 10:00", by="ana",
                                        reason="-a reason with a dash",
                                        replaces_next_stop=True),
    "watchdog stopping": rq.StoppingRequest(by="ops", reason="down"),
    "shutdown": rq.ShutdownRequest(),
}
"""One of each request, with every field it has set (a new request needs one here)."""

LOCAL = {("check-host",), ("serve",), ("gpus",), ("exporter",)}
"""``pod-agent`` subcommands that run on their own, asking the supervisor nothing."""


def _paths(parser: argparse.ArgumentParser, here: tuple[str, ...] = ()
           ) -> set[tuple[str, ...]]:
    """Every leaf subcommand of the parser, as its words."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {p for name, sub in action.choices.items()
                    for p in _paths(sub, (*here, name))}
    return {here}


def _sent_by_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """What ``pod-agent ARGV`` hands to the socket's client."""
    sent: list[Any] = []
    monkeypatch.setattr(cli, "relay", lambda req: sent.append(req) or 0)
    assert cli.main(argv) == 0
    (req,) = sent
    return req


def test_the_registry_the_handlers_and_the_command_line_are_one_set() -> None:
    assert set(EXAMPLES) == set(rq.REQUESTS), "every request needs an example here"
    assert set(HANDLERS) == set(rq.REQUESTS.values()), "a request without a handler"
    on_cli = _paths(cli.build_parser()) - LOCAL
    assert on_cli == {c.words for c in rq.COMMANDS}
    # every request has a subcommand, but the exporter's feed (a socket-only request)
    assert {k for k, c in rq.REQUESTS.items() if not c.words} == {"gpus"}
    assert all(rq.REQUESTS[c.key()] for c in rq.COMMANDS)


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_a_request_keeps_its_shape_from_the_console_to_the_handler(
        key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    req = EXAMPLES[key]
    if req.words:  # console → SSH → the pod's command line: the same model
        got = _sent_by_cli(req.argv(), monkeypatch)
        assert type(got) is type(req) and got == req, (req.argv(), got)
    # command line → socket → supervisor: the same model
    line = json.dumps(req.wire()).encode()
    back = rq.parse_line(line)
    assert type(back) is type(req) and back == req
    assert type(req) in HANDLERS


def test_the_command_line_fills_who_and_an_action_id(monkeypatch) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "erin")
    stop = _sent_by_cli(["watchdog", "stop-now"], monkeypatch)
    assert stop.by == "erin" and rq.valid_action_id(stop.action_id)
    assert stop.action_id.startswith("stop-now-")
    reb = _sent_by_cli(["rebalance", "--set", "A=0.5"], monkeypatch)
    assert reb.set == {"A": 0.5} and reb.action_id.startswith("rebalance-")
    assert _sent_by_cli(["watchdog", "status"], monkeypatch).wire() == {"op": "status"}
    assert _sent_by_cli(["watchdog", "extend", "--clear"], monkeypatch) == \
        rq.ExtendRequest(clear=True)


@pytest.mark.parametrize(("make", "field"), [
    (lambda: rq.LogsRequest(slot="A", lines="5"), "lines"),  # type: ignore[arg-type]
    (lambda: rq.LogsRequest(slot=None), "slot"),  # type: ignore[arg-type]
    (lambda: rq.RebalanceRequest(set={"A": math.nan}), "set.A"),
    (lambda: rq.RebalanceRequest(set={"A": "0.5"}), "set.A"),  # type: ignore[dict-item]
    (lambda: rq.AttachRequest(action_id="../../etc/passwd"), "action_id"),
    (lambda: rq.RestartRequest(slot="A", action_id="a b"), "action_id"),
    (lambda: rq.MemFloorRequest(value=1e308), "value"),
    (lambda: rq.ExtendRequest(until="+1h", clear="yes"), "clear"),  # type: ignore[arg-type]
])
def test_the_console_cannot_build_a_malformed_request(make: Any, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        make()
    assert rq.explain("x", err.value).startswith(f"x: {field}: ")


@pytest.mark.parametrize(("obj", "says"), [
    ({"op": "logs", "slot": "A", "lines": "5"}, "logs: lines: Input should be a valid "
                                                "integer (got str)"),
    ({"op": "rebalance", "set": {"A": "0.5"}}, "rebalance: set.A: Input should be a valid "
                                               "number"),
    ({"op": "attach", "action_id": "../x"}, "attach: action_id: "),
    ({"op": "watchdog", "cmd": "mem-floor", "value": "nan"}, "watchdog mem-floor: value: "),
    ({"op": "watchdog", "cmd": "extend"}, "watchdog extend: extend needs"),
    ({"op": "watchdog", "cmd": "extend", "until": "+1h", "replaces_next_stop": "no"},
     "watchdog extend: replaces_next_stop: "),
    ({"op": "watchdog", "cmd": "explode"}, "unknown watchdog command 'explode'"),
    ({"op": "frobnicate"}, "unknown op 'frobnicate'"),
    ({"cmd": "arm"}, "unknown op None"),
])
def test_the_agent_refuses_a_malformed_request_naming_the_field(obj: dict,
                                                                 says: str) -> None:
    with pytest.raises(rq.BadRequest) as err:
        rq.parse(obj)
    assert str(err.value).startswith(says), str(err.value)


def test_the_supervisor_answers_a_malformed_request_before_any_handler(monkeypatch) -> None:
    """``dispatch`` reads a decoded object with the models: a handler only ever sees a
    checked one (here: no handler may run at all)."""
    from pod_agent import dispatch

    ran: list[Any] = []
    monkeypatch.setitem(dispatch.HANDLERS, rq.LogsRequest,
                        lambda *a: ran.append(a))  # type: ignore[arg-type,return-value]
    sent: list[dict] = []

    async def send(ev: dict) -> None:
        sent.append(ev)

    asyncio.run(dispatch.dispatch(SimpleNamespace(), {"op": "logs", "slot": 5}, send))
    assert not ran
    assert sent[-1]["kind"] == "error"
    assert sent[-1]["message"].startswith("bad request: logs: slot: Input should be a "
                                          "valid string")


def test_the_client_sends_the_models_command_line_with_its_timeout() -> None:
    from console.sources.agent_client import AgentClient

    seen: list[tuple[list[str], float]] = []

    class Transport:
        async def run(self, args: list[str], on_event: Any = None,
                      timeout_s: float = 60.0) -> Any:
            seen.append((args, timeout_s))
            return SimpleNamespace(ok=True)

    client = AgentClient(Transport())  # type: ignore[arg-type]
    req = EXAMPLES["rebalance"]
    asyncio.run(client.request(req))
    asyncio.run(client.request(rq.StatusRequest(), timeout_s=5))
    assert seen == [(req.argv(), 3600.0), (["status", "--json"], 5)]


def test_w_refuses_a_malformed_extension_without_asking_the_agent() -> None:
    """The console's end: the model is built before anything is sent."""
    from console.operations.ops import watchdog

    calls: list[Any] = []

    class Agent:
        configured = True

        async def request(self, req: Any, on_event: Any = None) -> Any:
            calls.append(req)
            return SimpleNamespace(ok=True, final={})

    deps = SimpleNamespace(agent=Agent())
    out = asyncio.run(watchdog.handler(deps, {"cmd": "extend", "until": ""},  # type: ignore[arg-type]
                                       lambda *a: None))
    assert not out.ok and out.message.startswith("bad request: watchdog extend: extend "
                                                  "needs"), out.message
    assert calls == []
