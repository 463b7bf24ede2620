"""What a doctor's check finds: its result (ok, warn, fail, skip), one sentence and the
next step, and the report of them all (its exit status, its JSON, its lines)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from msgspec import Struct

from console.model.printable import printable

if TYPE_CHECKING:
    pass

Status = Literal["ok", "warn", "fail", "skip"]
RANK: dict[str, int] = {"skip": 0, "ok": 0, "warn": 1, "fail": 2}
"""The exit status a result gives the command: 0 all ok (skips are not problems), 1 a
warning, 2 a failure."""


class Finding(Struct, frozen=True):
    """One check's result."""

    id: str
    status: Status
    sentence: str
    next_step: str
    """What to do about it ("" when there is nothing to do)."""
    elapsed_s: float
    timeout_s: float

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "status": self.status, "sentence": self.sentence,
                "next_step": self.next_step, "elapsed_s": round(self.elapsed_s, 3),
                "timeout_s": self.timeout_s}


class DoctorReport(Struct, frozen=True):
    findings: tuple[Finding, ...]
    started_at: float
    config: str | None = None
    context: str | None = None

    @property
    def exit_code(self) -> int:
        return max((RANK[f.status] for f in self.findings), default=0)

    def by_id(self) -> dict[str, Finding]:
        return {f.id: f for f in self.findings}

    def to_json(self) -> dict[str, object]:
        counts = {s: sum(f.status == s for f in self.findings)
                  for s in ("ok", "warn", "fail", "skip")}
        return {"started_at": self.started_at, "config": self.config,
                "context": self.context, "exit_code": self.exit_code, "counts": counts,
                "checks": [f.to_json() for f in self.findings]}

    def lines(self) -> list[str]:
        width = max((len(f.id) for f in self.findings), default=0)
        out = []
        for f in self.findings:
            out.append(f"{f.status.upper():<4}  {f.id:<{width}}  {f.sentence}")
            if f.next_step:
                out.append(f"{'':<4}  {'':<{width}}  → {f.next_step}")
        n = {s: sum(f.status == s for f in self.findings) for s in ("ok", "warn", "fail")}
        out.append(f"{n['ok']} ok, {n['warn']} warning(s), {n['fail']} failure(s)")
        return out


class Verdict(Struct, frozen=True):
    status: Status
    sentence: str
    next_step: str = ""


def ok(sentence: str) -> Verdict:
    return Verdict("ok", sentence)


def skip(sentence: str) -> Verdict:
    return Verdict("skip", sentence)


def warn(sentence: str, next_step: str) -> Verdict:
    return Verdict("warn", sentence, next_step)


def fail(sentence: str, next_step: str) -> Verdict:
    return Verdict("fail", sentence, next_step)


def outside(text: object, n: int = 240) -> str:
    """Outside words (a server's, an exception's) as one printable line."""
    return printable(" ".join(str(text).split()), n)


