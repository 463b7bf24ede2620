"""Benchmark records: one JSON file per run, compared with the last one and the baseline.

A record lives at ``<state_dir>/bench/<UTC time>-<profile>-<slot>.json`` and holds the
plan's knobs, where it ran (profile, slot, pod, GPU type, P2P verdict, vLLM version),
every request's timing, each configuration's means and spread, the speculative figures
of each window with the counters they came from, and the comparison made when it was
written. Files are written whole (temporary file, then rename); an unreadable one is
skipped when looking back, never removed.

Regressions: a configuration whose mean tok/s is ``pct`` % or more below the previous
comparable run's, or the profile's ``bench_baseline``, or whose mean TTFT is ``pct`` %
or more above, is flagged. A previous run is comparable when it used the same knobs and
the same GPU type. A tok/s drop of that size says "check P2P": the field measured about
15 % lower tok/s on hosts whose GPUs could not reach each other.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from msgspec import Struct

from console.model.fmt import aligned
from console.operations.benchmark.measure import METRICS, BenchResult, PodFacts

SCHEMA = 1
P2P_HINT = ("check P2P: the field measured ~15 % lower tok/s on hosts with broken GPU "
            "peer-to-peer (host checks: key h, or `pod-agent hostcheck`)")


def bench_dir(state_dir: Path) -> Path:
    return state_dir / "bench"


def _stamp(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds")


def build_record(res: BenchResult, facts: PodFacts) -> dict[str, Any]:
    p = res.plan
    return {
        "schema": SCHEMA, "id": f"{_stamp(res.started_at)}-{p.profile}-{p.slot}",
        "started_at": _iso(res.started_at), "started_ts": res.started_at,
        "duration_s": round(res.duration_s, 3), "profile": p.profile, "slot": p.slot,
        "served_model_name": p.served_model_name, "via": p.via,
        "pod": {"id": facts.pod_id, "gpu_type": facts.gpu_type, "gpu_count": facts.gpu_count,
                "p2p": facts.p2p, "p2p_unknown": facts.p2p_unknown,
                "read_at": None if facts.read_at is None else _iso(facts.read_at)},
        "vllm_version": res.vllm_version, "knobs": p.knobs(),
        "failed_requests": res.failed_requests, "errors": res.errors(),
        "stopped": res.stopped,
        "configs": [c.to_json() for c in res.configs],
        "tasks": [t.to_json() for t in res.tasks],
    }


def load_history(state_dir: Path, profile: str | None = None, slot: str | None = None
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """Records (oldest first) and the files that could not be read (left in place)."""
    d = bench_dir(state_dir)
    out, bad = [], []
    if not d.is_dir():
        return [], []
    for f in sorted(d.glob("*.json")):
        try:
            rec = json.loads(f.read_text(encoding="utf-8"))
            if not isinstance(rec, dict) or rec.get("schema") != SCHEMA:
                raise ValueError("not a benchmark record of this version")
            float(rec["started_ts"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            bad.append(f"{f}: {exc}")
            continue
        if (profile is None or rec.get("profile") == profile) and \
                (slot is None or rec.get("slot") == slot):
            out.append(rec)
    out.sort(key=lambda r: float(r["started_ts"]))
    return out, bad


def _means(rec: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    out = {}
    for c in rec.get("configs") or ():
        try:
            out[str(c["name"])] = {m: c["summary"][m]["mean"] for m in METRICS}
        except (KeyError, TypeError):
            continue
    return out


def _pct(new: float | None, old: float | None) -> float | None:
    if new is None or not old:
        return None
    return (new - old) / old * 100.0


class Change(Struct, frozen=True):
    config: str
    figure: str
    """``tok_s`` or ``ttft_s``."""
    new: float
    old: float
    against: str
    """``previous run <id>`` or ``baseline``."""

    @property
    def pct(self) -> float:
        return (self.new - self.old) / self.old * 100.0

    def regressed(self, limit_pct: float) -> bool:
        return self.pct <= -limit_pct if self.figure == "tok_s" else self.pct >= limit_pct

    def text(self) -> str:
        if self.figure == "tok_s":
            return (f"{self.config}: tok/s {self.new:.1f} is {-self.pct:.0f} % below the "
                    f"{self.against} ({self.old:.1f})")
        return (f"{self.config}: TTFT {self.new * 1000:.0f} ms is {self.pct:.0f} % above the "
                f"{self.against} ({self.old * 1000:.0f} ms)")


def compare(rec: dict[str, Any], history: list[dict[str, Any]],
            baseline: dict[str, dict[str, float | None]] | None, limit_pct: float
            ) -> dict[str, Any]:
    """The record's comparison block: against the latest earlier record of the same
    profile and slot, and against the profile's baseline; and the regressions flagged."""
    mine = _means(rec)
    changes: list[Change] = []
    prev_block: dict[str, Any] | None = None
    earlier = [h for h in history if h.get("id") != rec["id"]
               and float(h["started_ts"]) < float(rec["started_ts"])]
    # the last COMPARABLE run, not merely the last: a quick or failed run in between
    # must not leave a full run with nothing to compare against
    prev = next((h for h in reversed(earlier) if not _why_not(h, rec)), None)
    if prev is not None:
        theirs = _means(prev)
        per: dict[str, Any] = {}
        for name, m in mine.items():
            t = theirs.get(name)
            if t is None:
                continue
            per[name] = {"tok_s_pct": _r1(_pct(m["tok_s"], t["tok_s"])),
                         "ttft_pct": _r1(_pct(m["ttft_s"], t["ttft_s"]))}
            for fig in ("tok_s", "ttft_s"):
                new, old = m[fig], t[fig]
                if new is not None and old:
                    changes.append(Change(name, fig, new, old,
                                          f"previous run ({prev['started_at']})"))
        prev_block = {"id": prev.get("id"), "started_at": prev.get("started_at"),
                      "comparable": True, "why_not": "", "configs": per}
    elif earlier:
        # nothing comparable: name the latest and why, and show no deltas against it
        last = earlier[-1]
        prev_block = {"id": last.get("id"), "started_at": last.get("started_at"),
                      "comparable": False, "why_not": _why_not(last, rec), "configs": {}}
    base_block: dict[str, Any] | None = None
    if baseline:
        per = {}
        for name, want in baseline.items():
            ours = mine.get(name)
            if ours is None:
                continue
            got = {"tok_s": ours["tok_s"], "ttft_s": ours["ttft_s"]}
            per[name] = {"want": want, "got": {k: _r1(v, 4) for k, v in got.items()},
                         "tok_s_pct": _r1(_pct(ours["tok_s"], want.get("tok_s"))),
                         "ttft_pct": _r1(_pct(ours["ttft_s"], want.get("ttft_s")))}
            for fig in ("tok_s", "ttft_s"):
                new, old = got[fig], want.get(fig)
                if new is not None and old:
                    changes.append(Change(name, fig, new, old, "baseline"))
        base_block = {"configs": per}
    regressions = []
    for ch in changes:
        if ch.regressed(limit_pct):
            line = ch.text()
            if ch.figure == "tok_s":
                line += " — " + (
                    "P2P is disabled on this pod (NCCL_P2P_DISABLE=1): the field saw ~15 % "
                    "lower tok/s that way" if rec["pod"]["p2p"] == "disabled" else P2P_HINT)
            regressions.append(line)
    return {"previous": prev_block, "baseline": base_block, "limit_pct": limit_pct,
            "regressions": regressions}


def _why_not(prev: dict[str, Any], rec: dict[str, Any]) -> str:
    """Why an earlier record is not comparable with ``rec`` ("" when it is): the same
    protocol (knobs, path), slot, profile, model and GPU type, and a run that measured
    something."""
    if prev.get("knobs") != rec["knobs"]:
        return "different benchmark settings"
    for key, what in (("profile", "profile"), ("slot", "slot"),
                      ("served_model_name", "model")):
        if prev.get(key) != rec.get(key):
            return f"different {what} ({prev.get(key)} → {rec.get(key)})"
    g0, g1 = (prev.get("pod") or {}).get("gpu_type"), (rec.get("pod") or {}).get("gpu_type")
    if g0 != g1:
        return f"different GPU type ({g0} → {g1})"
    if not any(m.get("tok_s") for m in _means(prev).values()):
        return "it measured nothing (every request failed)"
    return ""


def _r1(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(x, nd)


def save(state_dir: Path, rec: dict[str, Any]) -> Path:
    d = bench_dir(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{rec['id']}.json"
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(rec, fh, indent=1, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


# -- reading a record ----------------------------------------------------------------------

def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x * 1000:.0f}"


def _num(x: float | None, nd: int = 1) -> str:
    return "–" if x is None else f"{x:.{nd}f}"


def _pm(st: dict[str, Any], scale: float = 1.0, nd: int = 1) -> str:
    mean, sd = st.get("mean"), st.get("stdev")
    if mean is None:
        return "–"
    out = f"{mean * scale:.{nd}f}"
    return out + (f" ±{sd * scale:.{nd}f}" if sd else "")


def _pct_text(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f} %"


def _signed(x: float | None) -> str:
    return "–" if x is None else f"{x:+.0f} %"


def bar(frac: float | None, width: int = 24) -> str:
    """A horizontal bar in eighths (the plot of a terminal or a log)."""
    if frac is None:
        return "·" * width
    cells = max(0.0, min(1.0, frac)) * width
    full = int(cells)
    part = " ▏▎▍▌▋▊▉"[int((cells - full) * 8)]
    return ("█" * full + (part if full < width else "")).ljust(width, " ")[:width]


def lines(rec: dict[str, Any]) -> list[str]:
    """The record as a person reads it: a table per configuration, acceptance by task type
    and tok/s as bars, then what regressed and where the file is."""
    pod = rec.get("pod") or {}
    gpu = pod.get("gpu_type") or "GPU ?"
    if pod.get("gpu_count"):
        gpu += f" ×{pod['gpu_count']}"
    out = [f"bench {rec['slot']} ({rec['served_model_name']}) via {rec['via']} · "
           f"vLLM {rec.get('vllm_version') or '?'} · pod {pod.get('id') or '?'} {gpu} · "
           f"P2P {pod.get('p2p')}"
           + (f" ({pod['p2p_unknown']})" if pod.get("p2p_unknown") else "")
           + f" · {rec['duration_s']:.0f} s · {rec['started_at']}"]
    k = rec["knobs"]
    out.append(f"  {k['warmup']} warm-up + {k['runs']} measured runs per configuration, "
               f"max {k['max_tokens']} output tokens, streaming")
    comp = rec.get("comparison") or {}
    prev = (comp.get("previous") or {}).get("configs") or {}
    base = (comp.get("baseline") or {}).get("configs") or {}
    rows = [("config", "in tok", "TTFT ms", "TPOT ms", "tok/s", "per req", "decode",
             "accept", "len", "by position", "vs prev", "vs base")]
    for c in rec["configs"]:
        s, sp = c["summary"], c.get("spec") or {}
        rows.append((
            c["name"], str(c.get("prompt_tokens") or "–"), _pm(s["ttft_s"], 1000, 0),
            _pm(s["tpot_s"], 1000, 1), _pm(s["tok_s"]), _num(s["tok_s_per_request"]["mean"]),
            _num(s["decode_tok_s"]["mean"]), _pct_text(sp.get("acceptance_rate")),
            _num(sp.get("mean_acceptance_length"), 2),
            "/".join("–" if p is None else f"{p * 100:.0f}" for p in
                     sp.get("per_position") or ()) + (" %" if sp.get("per_position") else ""),
            _signed((prev.get(c["name"]) or {}).get("tok_s_pct")),
            _signed((base.get(c["name"]) or {}).get("tok_s_pct"))))
    out += ["  " + ln for ln in aligned(rows)]
    top = max([c["summary"]["tok_s"]["mean"] or 0.0 for c in rec["configs"]] or [0.0])
    if top:
        out.append("  tok/s by configuration")
        for c in rec["configs"]:
            v = c["summary"]["tok_s"]["mean"]
            out.append(f"    {c['name']:<9} {bar(None if v is None else v / top)} {_num(v)}")
    if rec.get("tasks"):
        out.append("  speculative acceptance by task type (counter deltas over each set)")
        for t in rec["tasks"]:
            sp = t.get("spec") or {}
            rate = sp.get("acceptance_rate")
            tail = (f"len {_num(sp.get('mean_acceptance_length'), 2)}  "
                    if sp else f"({t.get('spec_note')})  ")
            out.append(f"    {t['task']:<13} {bar(rate)} {_pct_text(rate):>7}  {tail}"
                       f"{t['requests']} requests, {t['completion_tokens']} tokens, "
                       f"{_num(t.get('tok_s'))} tok/s")
    notes = []
    for c in [*rec["configs"], *(rec.get("tasks") or ())]:
        f = (c.get("spec") or {}).get("foreign_requests")
        if f:
            notes.append(f"{c.get('name') or c.get('task')}: {f:.0f} other requests "
                         "finished in the window; its acceptance counts them too")
    if rec.get("configs") and not (rec["configs"][0].get("spec")):
        notes.append(f"no acceptance: {rec['configs'][0].get('spec_note')}")
    out += ["  note: " + n for n in notes]
    p = comp.get("previous")
    if p and not p.get("comparable"):
        out.append(f"  previous run {p.get('started_at')} not compared: {p.get('why_not')}")
    if rec.get("stopped"):
        out.append(f"  STOPPED EARLY: {rec['stopped']}")
    for e in rec.get("errors") or ():
        out.append(f"  FAILED requests: {e}")
    for r in comp.get("regressions") or ():
        out.append(f"  REGRESSION {r}")
    return out
