"""The profile schema: one YAML file per GPU kind describes the whole deployment.

This module is shared by the laptop console and the pod agent, so it depends on
nothing but pydantic and the standard library and stays Python 3.10 compatible.

Structural checks (types, ranges, unknown keys) live on the models; the rules
that relate several fields (GPU sharing, unique ports, aliases) live in
:func:`cross_checks` so that they can run even when some unrelated part of the
file failed structural validation: the user sees every problem at once.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections import defaultdict
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from .engines import ENGINES

MAX_GPU_UTIL_PER_GPU = 0.95
"""The field's rule: the slots sharing one GPU may claim at most 95 % of its memory.

vLLM's own allocator, the CUDA context of each process and NCCL buffers live in
the remaining 5 %; at 0.96+ the second slot on a GPU fails to start."""

_NAME_RE = r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$"
SLOT_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
_TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
_SECRETISH = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_DURATION_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_s(text: str) -> float:
    """``45m``, ``1h30m``, ``90s`` → seconds."""
    m = _DURATION_RE.match(text.strip()) if isinstance(text, str) else None
    if not m or not any(m.groups()):
        raise ValueError(f"{text!r} is not a duration; write e.g. 45m, 1h30m or 90s")
    h, mi, s = (int(x or 0) for x in m.groups())
    return float(h * 3600 + mi * 60 + s)


_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

# Flags the renderer sets itself from typed fields: allowing them again in
# extra_args would let two sources of truth disagree on the command line.
MANAGED_FLAGS: frozenset = frozenset().union(*(e.managed_flags for e in ENGINES.values()))


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, strict=True)


class Speculative(_Strict):
    """Speculative decoding as passed to ``--speculative-config``."""

    method: str = Field(pattern=r"^[a-z0-9_]+$")
    """vLLM method name: ``mtp`` (draft head inside the checkpoint), ``ngram``, ``eagle``, …"""
    num_speculative_tokens: int = Field(ge=1, le=8)
    """Draft tokens per step. The field ran MTP with 3; Flash-Next starts with at most 4."""
    model: str | None = None
    """Separate draft model (``draft_model``/``eagle``); unset for MTP and n-gram."""
    prompt_lookup_max: int | None = Field(default=None, ge=1, le=64)
    """n-gram only: longest prompt n-gram to match."""
    prompt_lookup_min: int | None = Field(default=None, ge=1, le=64)
    """n-gram only: shortest prompt n-gram to match."""


class BenchFigures(_Strict):
    """What a good host gives for one benchmark configuration (``pod-console bench``)."""

    tok_s: float | None = Field(default=None, gt=0)
    """Mean tok/s as the client sees it (the run's completion tokens over its wall time)."""
    ttft_ms: float | None = Field(default=None, gt=0)
    """Mean time to first token, in milliseconds."""


BENCH_CONFIG_RE = r"^(short|long)-c[1-9][0-9]?$"


class SlotSlo(_Strict):
    """The slot's latency targets (SLO attainment, ``docs/numbers.md``): the console
    counts the share of each window's requests at or under them, from the engine's
    per-request histograms, the target snapped down to a bucket edge."""

    ttft_s: float | None = Field(default=None, gt=0, le=3600)
    """Time to first token target, in seconds."""
    tpot_s: float | None = Field(default=None, gt=0, le=600)
    """Time per output token target, in seconds (vLLM only: SGLang exports no such
    histogram)."""
    add_bucket_edges: bool = True
    """vLLM 0.32+: add each target to its histogram's buckets
    (``--custom-histogram-buckets``, vLLM's default edges plus the target), so the
    count is at the target itself and not at the edge below it."""


class Slot(_Strict):
    """One server process (``vllm serve``, SGLang's ``launch_server``): one model on one
    port."""

    engine: Literal["vllm", "sglang"] = "vllm"
    """The serving engine (``pod_agent/engines/``): vLLM unless told otherwise."""
    served_model_name: str = Field(pattern=_NAME_RE)
    """Name clients and Prometheus (``model_name`` label) see."""
    hf_repo_id: str = Field(pattern=r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
    """Hugging Face repository of the weights, ``owner/name``."""
    port: int = Field(ge=1024, le=65535)
    """Port of the OpenAI-compatible server on the pod."""
    gpus: list[int] = Field(min_length=1, max_length=16)
    """GPU indices; tensor-parallel size is their count."""
    gpu_util: float = Field(gt=0.0, le=MAX_GPU_UTIL_PER_GPU)
    """``--gpu-memory-utilization`` (SGLang: ``--mem-fraction-static``): this slot's share
    of each of its GPUs."""
    max_model_len: int = Field(gt=0, le=10_000_000)
    """``--max-model-len`` in tokens."""
    speculative: Speculative | None = None
    """Speculative decoding; unset means none."""
    min_gpu_util: float | None = Field(default=None, gt=0.0, le=MAX_GPU_UTIL_PER_GPU)
    """Lowest gpu_util the rebalancer may give this slot (the 27B failed at 0.15)."""
    priority: int = Field(default=0, ge=0, le=100)
    """Rebalancing priority: higher keeps more headroom when memory is short."""
    weights_gb: float | None = Field(default=None, gt=0, le=4000)
    """Disk the weights take (GB); used by the host's free-disk check and the KV planner."""
    startup_timeout_s: int = Field(default=900, ge=30, le=7200)
    """How long the supervisor waits for ``/health``; Flash-Next needs 8–12 minutes."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for this slot only (no secrets: those come from the agent's env)."""
    extra_args: list[str] = Field(default_factory=list)
    """Additional ``vllm serve`` flags not covered by typed fields."""
    bench_baseline: dict[Annotated[str, Field(pattern=BENCH_CONFIG_RE)], BenchFigures] = \
        Field(default_factory=dict)
    """The benchmark's expected figures per configuration (``short-c1``, ``long-c4``, …):
    a run this far below them is flagged (the console's ``bench_regression_pct``)."""
    slo: SlotSlo | None = None
    """Latency targets for SLO attainment (TTFT, TPOT); unset: none. The objective (the
    share below which an alert fires) is the console's ``thresholds.SLOT.slo_objective``."""

    @field_validator("gpus")
    @classmethod
    def _gpus_valid(cls, v: list[int]) -> list[int]:
        if any(g < 0 for g in v):
            raise ValueError("GPU indices must be >= 0")
        if len(set(v)) != len(v):
            raise ValueError("GPU indices must be unique")
        return v

    @field_validator("env")
    @classmethod
    def _env_valid(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_env(v)

    @field_validator("extra_args")
    @classmethod
    def _extra_args_valid(cls, v: list[str]) -> list[str]:
        for arg in v:
            flag = arg.split("=", 1)[0]
            if flag in MANAGED_FLAGS:
                raise ValueError(f"{flag} is set from the slot's typed fields; remove it here")
        return v

    @property
    def tensor_parallel_size(self) -> int:
        return len(self.gpus)


class Schedule(_Strict):
    """Working hours: the watchdog stops the pod at ``stop``; alerts fire outside them."""

    timezone: str = "UTC"
    """IANA zone of the times below, e.g. ``Asia/Seoul``."""
    start: str = "08:30"
    """Local time the pod is expected up (``HH:MM``, quoted in YAML)."""
    stop: str = "18:00"
    """Local time the on-pod watchdog stops the pod (``HH:MM``)."""
    days: list[str] = Field(default_factory=lambda: list(_WEEKDAYS[:5]), min_length=1)
    """Weekdays the pod runs: ``mon`` … ``sun``."""
    idle_stop_after: str | None = None
    """Stop the pod after this long with no request on any slot (``45m``, ``1h30m``);
    unset: no idle stop."""
    idle_stop_in_hours: bool = True
    """Whether the idle stop also applies inside working hours (``start`` … ``stop`` on a
    scheduled day); false: only outside them."""
    busy_grace: str = "15m"
    """At a scheduled stop, requests still running postpone it by at most this long."""
    warn_before: str = "10m"
    """Warn (screen, webhook) this long before any stop."""

    @field_validator("idle_stop_after", "busy_grace", "warn_before")
    @classmethod
    def _duration(cls, v: str | None) -> str | None:
        if v is not None:
            duration_s(v)  # raises ValueError with the accepted forms
        return v

    def seconds(self, name: str) -> float | None:
        v = getattr(self, name)
        return None if v is None else duration_s(v)

    @field_validator("start", "stop")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not _TIME_RE.match(v):
            raise ValueError("must be HH:MM (24 h), quoted in YAML")
        return v

    @field_validator("days")
    @classmethod
    def _days(cls, v: list[str]) -> list[str]:
        bad = [d for d in v if d not in _WEEKDAYS]
        if bad:
            raise ValueError(f"unknown weekday {bad[0]!r}; use mon … sun")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r}") from None
        return v


class Profile(_Strict):
    """A whole deployment on one GPU kind."""

    name: str | None = Field(default=None, pattern=_NAME_RE)
    """Profile name; defaults to the file name without prefix and extension."""
    priority: int | None = Field(default=None, ge=0, le=999)
    """Fallback order; defaults to the file name's numeric prefix (``10-``, ``20-``)."""
    gpu_type_ids: list[str] = Field(min_length=1)
    """RunPod GPU type ids, tried in this order for one create request."""
    gpu_count: int | None = Field(default=None, ge=1, le=16)
    """GPUs per pod; defaults to one more than the highest index a slot uses."""
    image: str = Field(min_length=1)
    """Container image of the pod."""
    min_cuda: str | None = Field(default=None, pattern=r"^\d{1,2}\.\d{1,2}$")
    """Lowest host driver CUDA version the image runs on (``"13.0"``), checked on the host."""
    cloud_type: str = Field(default="SECURE", pattern=r"^(SECURE|COMMUNITY)$")
    """RunPod cloud to rent from."""
    container_disk_gb: int = Field(default=50, ge=10, le=2000)
    """Container disk (wiped on stop)."""
    volume_gb: int = Field(default=200, ge=0, le=10000)
    """Pod volume holding the weights (kept on stop)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment for every slot (no secrets)."""
    patches: list[str] = Field(default_factory=list)
    """Patch files (under ``profiles/patches/``) the agent applies to vLLM, idempotently."""
    schedule: Schedule = Field(default_factory=Schedule)
    """Working hours and the watchdog's stop time."""
    slots: dict[str, Slot] = Field(min_length=1)
    """Slots keyed by slot name (``FLASH``, ``Q27``)."""
    aliases: dict[str, str] = Field(default_factory=dict)
    """Client-facing names mapped to slot names."""
    gpu_metrics_port: int | None = Field(default=None, ge=1024, le=65535)
    """Where ``pod-agent exporter`` serves GPU metrics (dcgm-exporter names) on the pod;
    ``serve`` starts it, provisioning exposes the port, ``profile render`` adds it to
    Prometheus's targets. Unset: no exporter (the console still reads GPUs via SSH)."""

    @field_validator("env")
    @classmethod
    def _env_valid(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_env(v)

    @field_validator("patches")
    @classmethod
    def _patches_valid(cls, v: list[str]) -> list[str]:
        for p in v:
            if not re.match(r"^[\w.-]+\.(patch|diff)$", p):
                raise ValueError(f"{p!r}: a plain file name ending in .patch or .diff")
        return v

    @property
    def effective_gpu_count(self) -> int:
        if self.gpu_count is not None:
            return self.gpu_count
        return 1 + max(g for s in self.slots.values() for g in s.gpus)

    def alias_targets(self) -> dict[str, str]:
        """Alias → served model name."""
        return {a: self.slots[s].served_model_name for a, s in sorted(self.aliases.items())}


def _check_env(v: dict[str, str]) -> dict[str, str]:
    for k in v:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
            raise ValueError(f"{k!r} is not a valid environment variable name")
        if _SECRETISH.search(k):
            raise ValueError(
                f"{k} looks like a secret; secrets reach slots from the agent's environment, "
                "never from a profile")
    return v


Problem = tuple[tuple[Any, ...], str]
"""A problem found by a rule: (path inside the document, message)."""


def cross_checks(raw: dict[str, Any], slots: dict[str, Slot]) -> list[Problem]:
    """Rules across fields, run on the slots that validated on their own.

    ``raw`` is the document as loaded; ``slots`` holds only the slots whose own
    fields are valid, so one broken slot does not hide a port clash elsewhere.
    """
    problems: list[Problem] = []

    slots_doc = raw.get("slots")
    raw_slots: dict[str, Any] = slots_doc if isinstance(slots_doc, dict) else {}
    for name in raw_slots:
        if not SLOT_NAME_RE.match(name):
            problems.append((("slots", name),
                             f"slot name {name!r}: a letter, then letters, digits, _ or -; "
                             "32 characters at most"))

    per_gpu: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for name, slot in slots.items():
        for g in slot.gpus:
            per_gpu[g].append((name, slot.gpu_util))
    # GPUs shared by the same slots (the usual TP case) are reported together.
    by_users: dict[tuple[tuple[str, float], ...], list[int]] = defaultdict(list)
    for gpu, on_gpu in sorted(per_gpu.items()):
        by_users[tuple(on_gpu)].append(gpu)
    for users, gpus in by_users.items():
        total = round(sum(u for _, u in users), 6)
        if total > MAX_GPU_UTIL_PER_GPU:
            parts = " + ".join(f"{n} {u:g}" for n, u in users)
            which = "GPU" if len(gpus) == 1 else "GPUs"
            problems.append((("slots", users[-1][0], "gpu_util"),
                             f"{which} {', '.join(map(str, gpus))} over-committed: {parts} = "
                             f"{total:g} > {MAX_GPU_UTIL_PER_GPU:g}"))

    gpu_count = raw.get("gpu_count")
    if isinstance(gpu_count, int) and not isinstance(gpu_count, bool):
        for name, slot in slots.items():
            high = [g for g in slot.gpus if g >= gpu_count]
            if high:
                problems.append((("slots", name, "gpus"),
                                 f"GPU {high[0]} does not exist on a {gpu_count}-GPU pod"))

    seen_ports: dict[int, str] = {}
    seen_served: dict[str, str] = {}
    for name, slot in slots.items():
        if slot.port in seen_ports:
            problems.append((("slots", name, "port"),
                             f"port {slot.port} already used by slot {seen_ports[slot.port]}"))
        else:
            seen_ports[slot.port] = name
        if slot.served_model_name in seen_served:
            problems.append((("slots", name, "served_model_name"),
                             f"{slot.served_model_name!r} already served by slot "
                             f"{seen_served[slot.served_model_name]}"))
        else:
            seen_served[slot.served_model_name] = name
        spec = slot.speculative
        if spec and spec.method == "ngram" and spec.prompt_lookup_max is None:
            problems.append((("slots", name, "speculative", "prompt_lookup_max"),
                             "ngram speculative decoding needs prompt_lookup_max"))
        if (spec and spec.prompt_lookup_min and spec.prompt_lookup_max
                and spec.prompt_lookup_min > spec.prompt_lookup_max):
            problems.append((("slots", name, "speculative", "prompt_lookup_min"),
                             "prompt_lookup_min is larger than prompt_lookup_max"))
        if slot.min_gpu_util is not None and slot.min_gpu_util > slot.gpu_util:
            problems.append((("slots", name, "min_gpu_util"),
                             f"min_gpu_util {slot.min_gpu_util:g} is above gpu_util "
                             f"{slot.gpu_util:g}"))

    problems.extend(_schedule_checks(raw.get("schedule")))

    metrics_port = raw.get("gpu_metrics_port")
    if isinstance(metrics_port, int) and metrics_port in seen_ports:
        problems.append((("gpu_metrics_port",),
                         f"port {metrics_port} already used by slot {seen_ports[metrics_port]}"))

    aliases = raw.get("aliases")
    if isinstance(aliases, dict):
        for alias, target in aliases.items():
            if not isinstance(target, str):
                continue  # the type error is reported by the structural pass
            if target not in raw_slots:
                known = ", ".join(sorted(raw_slots)) or "none"
                problems.append((("aliases", alias),
                                 f"alias points at unknown slot {target!r} (slots: {known})"))
            if alias in seen_served or alias in raw_slots:
                problems.append((("aliases", alias),
                                 f"alias {alias!r} shadows a served model or slot name"))
    return problems


def _schedule_checks(sched: Any) -> list[Problem]:
    """An idle limit within the warning's lead would warn after every request (and post
    each to the webhook): the warning is due as soon as the pod falls silent."""
    if not isinstance(sched, dict) or sched.get("idle_stop_after") is None:
        return []
    idle = sched["idle_stop_after"]
    warn = sched.get("warn_before", Schedule.model_fields["warn_before"].default)
    try:
        idle_s, warn_s = duration_s(idle), duration_s(warn)
    except ValueError:
        return []  # the structural pass says what is wrong with it
    if idle_s > warn_s:
        return []
    said = "warn_before" if "warn_before" in sched else "warn_before (by default)"
    return [(("schedule", "idle_stop_after"),
             f"{idle} is not longer than {said} {warn}: every request would be followed "
             "by a warning; make idle_stop_after longer or warn_before shorter")]


def parse_profile(raw: dict[str, Any]) -> tuple[Profile | None, list[Problem]]:
    """Validate a loaded document; return the profile (if valid) and every problem."""
    problems: list[Problem] = []
    profile: Profile | None = None
    try:
        profile = Profile.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            problems.append((tuple(err["loc"]), _message(err)))
    good_slots: dict[str, Slot] = {}
    raw_slots = raw.get("slots")
    if isinstance(raw_slots, dict):
        for name, body in raw_slots.items():
            with contextlib.suppress(ValidationError):
                good_slots[name] = Slot.model_validate(body)
    problems.extend(cross_checks(raw, good_slots))
    if problems:
        return None, problems
    return profile, []


def _message(err: ErrorDetails) -> str:
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        loc = tuple(err.get("loc", ()))
        near = difflib.get_close_matches(str(loc[-1]), _keys_at(loc[:-1]), n=1,
                                         cutoff=0.75) if loc else []
        return f"unknown key (did you mean {near[0]}?)" if near else "unknown key"
    if kind == "missing":
        return "required field is missing"
    msg = str(err.get("msg", "invalid"))
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    got = err.get("input")
    if kind.endswith("_type") or kind.endswith("_parsing"):
        msg = f"{msg} (got {type(got).__name__} {_short(got)})"
    return msg


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at ``loc`` (within a profile) accepts: where a misspelt key
    is looked up for a near one (``priorty`` → ``priority``)."""

    def bare(t: Any) -> Any:  # Optional[X], Annotated[X, ...] → X (the model if any)
        while get_origin(t) not in (None, dict, list) and get_args(t):
            args = get_args(t)
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            t = models[0] if models else args[0]
        return t

    t: Any = Profile
    for part in loc:
        t = bare(t)
        if isinstance(t, type) and issubclass(t, BaseModel):
            field = t.model_fields.get(str(part))
            if field is None:
                return []
            t = field.annotation
        elif get_origin(t) in (dict, list) and get_args(t):
            t = get_args(t)[-1]  # the key or index is this part: its value's type
        else:
            return []
    t = bare(t)
    return list(t.model_fields) if isinstance(t, type) and issubclass(t, BaseModel) else []


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."
