"""The requests the console sends the pod agent: one model per command, the one shape
from the console's call to the supervisor's handler.

The console builds a model and runs ``python3 -m pod_agent`` with its :meth:`argv`
over SSH; ``pod-agent``'s parser is made from these models (:func:`add_commands`), so
the command line parses back into the same model (:meth:`from_cli`), which goes over
the supervisor's Unix socket as :meth:`wire` JSON and is read there with :func:`parse`
— the same model, so a malformed request is refused at either end with the field named
(:class:`BadRequest`). The supervisor's handlers are keyed by these classes
(``dispatch.HANDLERS``); ``tests/unit/test_agent_requests.py`` holds the three to one
set. Pydantic is on the pod already (the profile is a pydantic model).
"""

from __future__ import annotations

import argparse
import getpass
import json
import math
import re
import uuid
from typing import Annotated, Any, ClassVar, Dict, List, Literal, Tuple, Type

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
MEM_FLOOR_MAX_GIB = 4096.0
"""No pod has more host memory than this; a larger floor is a typo that stops every slot."""


def valid_action_id(action_id: str) -> bool:
    """Ids name files under ``actions/``: letters, digits, ``_.-``, never a path."""
    return bool(_ID.fullmatch(action_id)) and ".." not in action_id


def new_action_id(op: str) -> str:
    """An id for a new action; the caller keeps it to attach again after a drop."""
    return f"{op}-{uuid.uuid4().hex[:12]}"


class BadRequest(ValueError):
    """A request that is no request: answered ``bad request: …``, never a crash."""


class Refused(Exception):
    """A well-formed request the agent will not carry out (an unknown slot, a floor this
    host cannot meet): its handler raises it and the message is the error event."""


class AgentRequest(BaseModel):
    """What every request has: its socket ``op`` (and, for the watchdog's, its ``cmd``),
    the words that name it on ``pod-agent``'s command line, and how long the console
    waits for its answer."""

    # an older supervisor (the package replaced under a running one) ignores a field it
    # does not know; every field it reads is checked, once, before any code uses it
    model_config = ConfigDict(extra="ignore", frozen=True)

    words: ClassVar[Tuple[str, ...]] = ()
    """``pod-agent`` subcommand words; () for a request only the socket takes."""
    help: ClassVar[str] = ""
    timeout_s: ClassVar[float] = 60.0
    """How long the console waits for the final event (long actions: an hour)."""

    @classmethod
    def key(cls) -> str:
        """The registry's name for it: ``op``, or ``op cmd`` for the watchdog's."""
        fields = cls.model_fields
        cmd = fields["cmd"].default if "cmd" in fields else None
        return f"{fields['op'].default} {cmd}" if cmd else str(fields["op"].default)

    def wire(self) -> Dict[str, Any]:
        """The socket's JSON object."""
        return self.model_dump(mode="json", exclude_none=True)

    def argv(self) -> List[str]:
        """``pod-agent``'s arguments for this request (its subcommand words first)."""
        return [*self.words, *self.cli_args()]

    def cli_args(self) -> List[str]:
        return []

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """The subcommand's options; :meth:`from_cli` reads them back."""

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        return cls()


def _by(ns: argparse.Namespace) -> str:
    return ns.by or getpass.getuser()


def _action_id_arg(value: str) -> str:
    if not valid_action_id(value):
        raise argparse.ArgumentTypeError("letters, digits and _.- only (it names a file)")
    return value


def _check_action_id(value: str | None) -> str | None:
    if value is not None and not valid_action_id(value):
        raise ValueError("letters, digits and _.- only (it names a file)")
    return value


class StatusRequest(AgentRequest):
    words: ClassVar[Tuple[str, ...]] = ("status",)
    help: ClassVar[str] = "supervisor, slots and watchdog state"
    timeout_s: ClassVar[float] = 30.0
    op: Literal["status"] = "status"

    def cli_args(self) -> List[str]:
        return ["--json"]

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", required=True)


class GpusRequest(AgentRequest):
    """The exporter's feed (``exporter --from-agent``): the GPUs and the stop plan."""

    op: Literal["gpus"] = "gpus"


class LogsRequest(AgentRequest):
    words: ClassVar[Tuple[str, ...]] = ("logs",)
    help: ClassVar[str] = "recent log lines of a slot"
    timeout_s: ClassVar[float] = 10.0
    op: Literal["logs"] = "logs"
    slot: StrictStr
    lines: StrictInt = 50

    def cli_args(self) -> List[str]:
        return ["-n", str(self.lines), "--", self.slot]

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("slot")
        parser.add_argument("-n", "--lines", type=int, default=50)

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        return cls(slot=ns.slot, lines=ns.lines)


class AttachRequest(AgentRequest):
    words: ClassVar[Tuple[str, ...]] = ("attach",)
    help: ClassVar[str] = "follow an action by id (after a dropped connection)"
    timeout_s: ClassVar[float] = 3600.0
    op: Literal["attach"] = "attach"
    action_id: StrictStr

    _id = field_validator("action_id")(_check_action_id)

    def cli_args(self) -> List[str]:
        return ["--", self.action_id]

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action_id", type=_action_id_arg)

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        return cls(action_id=ns.action_id)


Util = Annotated[float, Field(strict=True, allow_inf_nan=False)]
"""A gpu_util: a finite number (strict: ``"0.5"`` is no number here)."""


class RebalanceRequest(AgentRequest):
    words: ClassVar[Tuple[str, ...]] = ("rebalance",)
    help: ClassVar[str] = "apply a new gpu_util split (rolls back on failure)"
    timeout_s: ClassVar[float] = 3600.0
    op: Literal["rebalance"] = "rebalance"
    set: Dict[StrictStr, Util] = Field(default_factory=dict)
    action_id: StrictStr | None = None

    _id = field_validator("action_id")(_check_action_id)

    def cli_args(self) -> List[str]:
        out: List[str] = []
        for k, v in sorted(self.set.items()):
            out += ["--set", f"{k}={v!r}"]  # repr: the exact float back on the pod
        return out + (["--action-id", self.action_id] if self.action_id else [])

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--set", action="append", required=True, metavar="SLOT=UTIL")
        parser.add_argument("--action-id", default=None, type=_action_id_arg)

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        split: Dict[str, float] = {}
        for item in ns.set:
            try:
                k, v = item.split("=", 1)
                split[k] = float(v)
            except ValueError:
                raise BadRequest(f"--set {item!r}: expected SLOT=UTIL") from None
        return cls(set=split, action_id=ns.action_id or new_action_id("rebalance"))


class RestartRequest(AgentRequest):
    words: ClassVar[Tuple[str, ...]] = ("restart",)
    help: ClassVar[str] = "restart one slot"
    timeout_s: ClassVar[float] = 3600.0
    op: Literal["restart"] = "restart"
    slot: StrictStr
    action_id: StrictStr | None = None

    _id = field_validator("action_id")(_check_action_id)

    def cli_args(self) -> List[str]:
        aid = ["--action-id", self.action_id] if self.action_id else []
        return [*aid, "--", self.slot]

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("slot")
        parser.add_argument("--action-id", default=None, type=_action_id_arg)

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        return cls(slot=ns.slot, action_id=ns.action_id or new_action_id("restart"))


class StopNowRequest(AgentRequest):
    words: ClassVar[Tuple[str, ...]] = ("watchdog", "stop-now")
    help: ClassVar[str] = "stop the slots and the pod now"
    timeout_s: ClassVar[float] = 300.0
    op: Literal["stop-now"] = "stop-now"
    action_id: StrictStr | None = None
    by: StrictStr | None = None

    _id = field_validator("action_id")(_check_action_id)

    def cli_args(self) -> List[str]:
        out = [f"--by={self.by}"] if self.by is not None else []
        return out + (["--action-id", self.action_id] if self.action_id else [])

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--by", help="who (default: this user)")
        parser.add_argument("--action-id", default=None, type=_action_id_arg)

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        return cls(action_id=ns.action_id or new_action_id("stop-now"), by=_by(ns))


class _WatchdogRequest(AgentRequest):
    timeout_s: ClassVar[float] = 300.0
    op: Literal["watchdog"] = "watchdog"


class ArmRequest(_WatchdogRequest):
    words: ClassVar[Tuple[str, ...]] = ("watchdog", "arm")
    help: ClassVar[str] = "let the watchdog stop the pod (schedule, idle)"
    cmd: Literal["arm"] = "arm"


class DisarmRequest(_WatchdogRequest):
    words: ClassVar[Tuple[str, ...]] = ("watchdog", "disarm")
    help: ClassVar[str] = "nothing stops the pod until it is armed again"
    cmd: Literal["disarm"] = "disarm"


class MemFloorRequest(_WatchdogRequest):
    words: ClassVar[Tuple[str, ...]] = ("watchdog", "mem-floor")
    help: ClassVar[str] = "the memory guard's floor, GiB of MemAvailable"
    cmd: Literal["mem-floor"] = "mem-floor"
    value: float

    @field_validator("value", mode="before")
    @classmethod
    def _gib(cls, v: Any) -> float:
        # nan would switch the guard off silently; 1e308 can never be met and stops
        # every slot at once (the supervisor also holds it to this host's memory)
        try:
            f = float(v) if isinstance(v, (int, float, str)) and not isinstance(v, bool) \
                else math.nan
        except ValueError:
            f = math.nan
        if not (math.isfinite(f) and 0 <= f <= MEM_FLOOR_MAX_GIB):
            raise ValueError(f"mem-floor needs a number of GiB from 0 to "
                             f"{MEM_FLOOR_MAX_GIB:g}, got {str(v)[:40]!r}")
        return f

    def cli_args(self) -> List[str]:
        return ["--", repr(self.value)]

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("value", metavar="GIB")

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        return cls(value=ns.value)


class ExtendRequest(_WatchdogRequest):
    """Keep the pod up until a time (``+1h``, ``HH:MM``, ``tomorrow HH:MM``, ISO), or end
    the extension (``clear``)."""

    words: ClassVar[Tuple[str, ...]] = ("watchdog", "extend")
    help: ClassVar[str] = "keep the pod running until a time, or end that (--clear)"
    cmd: Literal["extend"] = "extend"
    until: StrictStr | None = None
    clear: StrictBool = False
    by: StrictStr | None = None
    reason: StrictStr | None = None
    replaces_next_stop: StrictBool = False

    @model_validator(mode="after")
    def _until_or_clear(self) -> ExtendRequest:
        if not self.clear and not self.until:
            raise ValueError("extend needs +1h, +90m, HH:MM or an ISO time (or --clear)")
        return self

    def cli_args(self) -> List[str]:
        if self.clear:
            return ["--clear"]
        # --opt=value: a reason that starts with "-" is still a reason
        out = [f"--by={self.by}"] if self.by is not None else []
        out += [f"--reason={self.reason}"] if self.reason is not None else []
        out += ["--replaces-next-stop"] if self.replaces_next_stop else []
        return [*out, "--", self.until or ""]

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("value", nargs="?", metavar="UNTIL",
                            help="+1h, +90m, HH:MM (today, the profile's zone; refused "
                                 "once past), 'tomorrow HH:MM' or an ISO time")
        parser.add_argument("--by", help="who (default: this user)")
        parser.add_argument("--reason", default="", help="why, said in every warning")
        parser.add_argument("--clear", action="store_true", help="end the extension now")
        parser.add_argument("--replaces-next-stop", action="store_true",
                            help="its end is a stop even in working hours, in place of "
                                 "that evening's scheduled stop (default: an end in "
                                 "working hours stops nothing; the evening's stop applies)")

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        if ns.clear:
            return cls(clear=True)
        return cls(until=ns.value, by=_by(ns), reason=ns.reason,
                   replaces_next_stop=ns.replaces_next_stop)


class StoppingRequest(_WatchdogRequest):
    """Someone else (the console's ``down``) is about to stop this pod."""

    words: ClassVar[Tuple[str, ...]] = ("watchdog", "stopping")
    help: ClassVar[str] = "the pod is being stopped from outside: end the extension"
    cmd: Literal["stopping"] = "stopping"
    by: StrictStr | None = None
    reason: StrictStr | None = None

    def cli_args(self) -> List[str]:
        out = [f"--by={self.by}"] if self.by is not None else []
        return out + ([f"--reason={self.reason}"] if self.reason is not None else [])

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--by", help="who (default: this user)")
        parser.add_argument("--reason", default="", help="what stops the pod (down)")

    @classmethod
    def from_cli(cls, ns: argparse.Namespace) -> AgentRequest:
        return cls(by=_by(ns), reason=ns.reason or "down")


class WatchdogStatusRequest(StatusRequest):
    """``watchdog status``: the status, under the watchdog's words too."""

    words: ClassVar[Tuple[str, ...]] = ("watchdog", "status")
    help: ClassVar[str] = "the same as status --json"

    def cli_args(self) -> List[str]:
        return []

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        pass


class ShutdownRequest(AgentRequest):
    words: ClassVar[Tuple[str, ...]] = ("shutdown",)
    help: ClassVar[str] = "stop every slot and the supervisor"
    op: Literal["shutdown"] = "shutdown"


REQUESTS: Dict[str, Type[AgentRequest]] = {cls.key(): cls for cls in (
    StatusRequest, GpusRequest, LogsRequest, AttachRequest, RebalanceRequest,
    RestartRequest, StopNowRequest, ArmRequest, DisarmRequest, MemFloorRequest,
    ExtendRequest, StoppingRequest, ShutdownRequest)}
"""Every request the supervisor takes, by ``op`` (``op cmd`` for the watchdog's)."""

GROUPS = {"watchdog": "arm, disarm, extend, or stop the pod now"}
"""``pod-agent`` subcommands that hold requests of their own (``watchdog arm`` …)."""
COMMANDS: Tuple[Type[AgentRequest], ...] = (*(c for c in REQUESTS.values() if c.words),
                                            WatchdogStatusRequest)
"""Every request ``pod-agent``'s command line sends."""


def add_commands(sub: Any, send: Any) -> None:
    """One ``pod-agent`` subcommand per request (under its group's, for ``watchdog …``);
    each parses into its model and hands it to ``send``."""
    groups: Dict[str, Any] = {}
    for cls in COMMANDS:
        here = sub
        if len(cls.words) > 1:
            if cls.words[0] not in groups:
                g = sub.add_parser(cls.words[0], help=GROUPS[cls.words[0]])
                groups[cls.words[0]] = g.add_subparsers(dest="cmd", required=True)
            here = groups[cls.words[0]]
        p = here.add_parser(cls.words[-1], help=cls.help)
        cls.add_arguments(p)
        p.set_defaults(func=lambda ns, cls=cls: send(_from_cli(cls, ns)))


def _from_cli(cls: Type[AgentRequest], ns: argparse.Namespace) -> AgentRequest | BadRequest:
    try:
        return cls.from_cli(ns)
    except ValidationError as exc:
        return BadRequest(explain(cls.key(), exc))
    except BadRequest as exc:
        return exc


def parse(obj: Any) -> AgentRequest:
    """A decoded socket request as its model; BadRequest naming the field that is wrong
    (or ``unknown op``)."""
    if not isinstance(obj, dict):
        raise BadRequest(f"request must be an object, not {type(obj).__name__}")
    op = obj.get("op")
    key = f"{op} {obj.get('cmd')}" if op == "watchdog" else op
    cls = REQUESTS.get(key) if isinstance(key, str) else None
    if cls is None:
        if op == "watchdog":
            raise BadRequest(f"unknown watchdog command {obj.get('cmd')!r}")
        raise BadRequest(f"unknown op {op!r}")
    try:
        return cls.model_validate(obj)
    except ValidationError as exc:
        raise BadRequest(explain(cls.key(), exc)) from None


def parse_line(line: bytes) -> AgentRequest:
    """One request line of the agent's socket, decoded and checked."""
    try:
        obj = json.loads(line.decode("utf-8") or "{}")
    except RecursionError:  # json gives up on deep nesting this way, not as ValueError
        raise BadRequest("nested too deeply") from None
    except ValueError as exc:  # not JSON, not UTF-8
        raise BadRequest(str(exc)[:200]) from None
    return parse(obj)


def explain(key: str, exc: ValidationError) -> str:
    """What is wrong with a request, each field named: ``logs: lines: Input should be a
    valid integer (got NoneType)``."""
    parts = []
    for err in exc.errors()[:5]:
        if not err["loc"]:  # the request as a whole (extend: neither until nor clear)
            parts.append(err["msg"].removeprefix("Value error, "))
            continue
        where = ".".join(str(x) for x in err["loc"])
        got = type(err.get("input")).__name__
        parts.append(f"{where}: {err['msg']} (got {got})")
    return f"{key}: " + "; ".join(parts)

