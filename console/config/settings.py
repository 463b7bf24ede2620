"""Typed settings for a real deployment: YAML file + ``POD_CONSOLE_*`` environment.

Precedence (highest first): command-line flags (applied by the CLI), environment
variables (``POD_CONSOLE_REFRESH_S=5``, nested with ``__``: ``POD_CONSOLE_POD__SSH_HOST``),
the config file (``--config PATH``, else ``$XDG_CONFIG_HOME/pod-console/config.yaml``),
then defaults. Secrets are ``SecretStr``: their repr is ``'**********'``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from msgspec import Struct
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from console.config import defaults
from console.config.config_file import (
    ContextError,
    config_path,
    default_state_dir,
    read_config,
    select_context,
)

REFRESH_FLOOR_S = defaults.REFRESH_FLOOR_S
REFRESH_MAX_S = 3600.0
"""A refresh interval longer than an hour is a typo (and 1e308 overflows every deadline)."""

Port = Annotated[int, Field(ge=1, le=65535)]


class PodSettings(BaseModel):
    """How to reach the pod."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True,
                              allow_inf_nan=False)

    machine_id: str | None = None
    """The provider's id of the machine the deployment runs on (RunPod: the pod id,
    ``RUNPOD_POD_ID`` on the pod). ``runpod_id``, its old name, is accepted where a
    config is read (and nowhere else)."""
    host: str = "127.0.0.1"
    """Address the slots' ports are reached at (direct TCP or an SSH tunnel)."""
    port_map: dict[Port, Port] = Field(default_factory=dict)
    """Pod port → public port, for RunPod's direct TCP mappings."""
    ssh_host: str | None = None
    """SSH host of the pod agent; unset means no agent (read-only figures only)."""
    ssh_port: Port = 22
    ssh_user: str = "root"
    ssh_key: Path | None = None
    """Private key file for the agent (never needed in wall mode)."""
    agent_dir: str = "/workspace/pod-agent"
    """Where the agent lives on the pod (on the volume, so it survives a stop)."""

    @model_validator(mode="before")
    @classmethod
    def _old_name(cls, data: Any) -> Any:
        """``PodSettings(runpod_id=...)`` and a section given whole: the old key read."""
        return renamed_old_keys(data) if isinstance(data, dict) else data


OLD_POD_KEYS = {"runpod_id": "machine_id"}
"""Keys of ``pod:`` that were renamed: old name → new name. The old one keeps working in
the config file, in a context and in the environment (``POD_CONSOLE_POD__RUNPOD_ID``)."""


def renamed_old_keys(section: dict[str, Any],
                     spelled: Callable[[str], str] = str) -> dict[str, Any]:
    """``pod:`` with its old key names replaced by the new ones. Both names in one place
    with different values is an error (which one was meant cannot be told); the same
    value twice is read once. ``spelled``: a key as the error names it."""
    if not any(old in section for old in OLD_POD_KEYS):
        return section
    out = dict(section)
    for old, new in OLD_POD_KEYS.items():
        if old not in out:
            continue
        value = out.pop(old)
        if new in out and out[new] != value:
            raise ValueError(f"{spelled(old)} is the old name of {spelled(new)}, and both "
                             f"are given ({value!r}, {out[new]!r}): keep {spelled(new)} only")
        out[new] = value
    return out


class SlotThresholds(BaseModel):
    """Alert thresholds for one slot (defaults are the field's)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True,
                              allow_inf_nan=False)

    ttft_p95_s: float = Field(default=2.0, gt=0)
    """TTFT p95 above this raises an alert."""
    kv_p99: float = Field(default=0.60, gt=0, le=1)
    """KV usage p99 above this is the field's trigger to revisit KV offload."""
    acceptance_baseline: float | None = Field(default=None, gt=0, le=1)
    """Expected speculative acceptance rate; alert when far below it."""
    ttft_target_s: float | None = Field(default=None, gt=0, le=3600)
    """SLO target for time to first token (seconds): the share of the window's requests
    at or under it is the slot's SLO attainment. It is snapped down to an edge of the
    engine's TTFT histogram (every request counted was under the target); the screens
    say which edge. Unset: no TTFT objective."""
    tpot_target_s: float | None = Field(default=None, gt=0, le=600)
    """SLO target for time per output token (seconds), counted the same way from vLLM's
    per-request TPOT histogram (SGLang exports none)."""
    slo_objective: float = Field(default=0.99, gt=0, le=1)
    """SLO attainment below this share (of the window's requests) raises an alert."""

    @property
    def slo_objective_set(self) -> float | None:
        """The objective where a target gives it something to judge (None: no target)."""
        return self.slo_objective if (self.ttft_target_s or self.tpot_target_s) else None


class AlertTiming(BaseModel):
    """When a condition becomes an alert and when an alert clears (Prometheus's ``for`` and
    ``keep_firing_for``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True,
                              allow_inf_nan=False)

    down_for_s: float = Field(default=6.0, ge=0, le=3600)
    """A slot down, an agent or API unreachable, this long before it fires (a blip of
    one poll is not an outage)."""
    for_s: float = Field(default=30.0, ge=0, le=3600)
    """A figure past its threshold this long before it fires."""
    hold_s: float = Field(default=30.0, ge=0, le=3600)
    """A firing alert clears once its condition has been gone this long."""
    stall_after_s: float = Field(default=30.0, ge=1, le=3600)
    """A slot with requests running whose generation and prompt token counters have not
    moved for this long is STALLED (a CRIT alert, whatever ``/health`` says). Keep it
    above Prometheus's scrape interval: through Prometheus the counters move only when
    it scrapes."""


class GatewaySettings(BaseModel):
    """The gateway users call (LiteLLM), watched through its ``/metrics`` and health
    endpoints (``console/sources/collect/gateway.py``). Its URL is ``gateway_url``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True,
                              allow_inf_nan=False)

    watch: bool = True
    """Watch the gateway when ``gateway_url`` is set (false: the smoke test only)."""
    via: Literal["direct", "prometheus"] = "direct"
    """``direct``: scrape the proxy's ``/metrics`` with a key; ``prometheus``: read
    ``prometheus_url``'s copy of it (the liveliness and readiness still come direct)."""
    prometheus_match: str = Field(default="", pattern=r'^$|^[a-zA-Z_][a-zA-Z0-9_]*=~?"[^"]*"$')
    """With ``via: prometheus``: one label matcher picking this gateway's series when
    Prometheus scrapes several (``job="litellm"``)."""
    metrics_path: str = "/metrics/"
    """The proxy's exposition path (LiteLLM mounts it at ``/metrics/``; ``/metrics``
    answers a redirect)."""
    key_env: str = "LITELLM_MASTER_KEY"
    """The environment variable holding the bearer key for ``/metrics`` (never argv,
    never shown): LiteLLM asks for a key there unless the proxy sets
    ``require_auth_for_metrics_endpoint: false``."""
    key_file: Path | None = None
    """A file holding that key instead (its first line); read at each poll, so a
    rotated key is picked up."""
    cooldown_s: float = Field(default=5.0, gt=0, le=3600)
    """The router's ``cooldown_time`` (LiteLLM's default 5 s): a deployment whose
    cooldown counter moved within this long is in cooldown; a ``deployment_state`` of 2
    older than that is the last outage seen, kept until its next success."""
    error_5xx_ratio: float = Field(default=0.05, gt=0, le=1)
    """The gateway's 5xx share of requests above this raises an alert."""
    overhead_p95_s: float = Field(default=0.5, gt=0)
    """The gateway's own overhead p95 (seconds) above this raises an alert."""
    idle_source: Literal["slots", "gateway", "both"] = "slots"
    """What counts as activity for the idle countdown: the slots' requests, the
    gateway's, or either."""
    active_window_s: float = Field(default=3600.0, ge=60, le=86400)
    """"Who is using it": users/keys with a request within this long."""


ThemeName = Literal["default", "high-contrast", "colour-blind", "mono"]
"""``defaults.THEMES``, spelled out for pydantic (a test keeps the two the same)."""
BenchLength = Literal["short", "long"]
BenchTask = Literal["json", "code", "summarisation", "ko_qa", "en_qa", "translation",
                    "tool_call"]
BENCH_LENGTHS: tuple[BenchLength, ...] = ("short", "long")
BENCH_TASKS: tuple[BenchTask, ...] = ("json", "code", "summarisation", "ko_qa", "en_qa",
                                      "translation", "tool_call")


class BenchSettings(BaseModel):
    """``pod-console bench``: the field's protocol by default (``console/operations/benchmark``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True,
                              allow_inf_nan=False)

    runs: int = Field(default=3, ge=1, le=20)
    """Measured runs per configuration."""
    warmup: int = Field(default=1, ge=0, le=5)
    """Unmeasured runs before them (JIT compilation, cold caches)."""
    concurrency: list[int] = Field(default_factory=lambda: [1, 4], min_length=1)
    """Concurrent requests per run, one configuration each."""
    lengths: list[BenchLength] = Field(default_factory=lambda: list(BENCH_LENGTHS),
                                       min_length=1)
    """Inputs: ``short`` (a question, ~21 tokens) and ``long`` (a document to summarise)."""
    tasks: list[BenchTask] = Field(default_factory=lambda: list(BENCH_TASKS))
    """Task-type prompt sets for acceptance by type (empty: none)."""
    long_tokens: int = Field(default=3000, ge=100, le=200_000)
    """Size of the long input (a document to summarise), in tokens, about."""
    max_tokens: int = Field(default=1024, ge=1, le=32768)
    """Output tokens per request at most (the field used 1,024)."""
    task_max_tokens: int = Field(default=768, ge=1, le=32768)
    """Output tokens per task-type request at most (the field used 768)."""
    timeout_s: float = Field(default=600.0, gt=0, le=3600)
    """One request gives up after this long."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sampling temperature; unset: the server's own (as the field measured). 0 makes each
    run send and get the same text, which steadies acceptance between runs."""
    regression_pct: float = Field(default=10.0, gt=0, le=90)
    """tok/s this many % below the previous run or the baseline (or TTFT this many %
    above) is flagged as a regression."""

    @field_validator("concurrency")
    @classmethod
    def _conc(cls, v: list[int]) -> list[int]:
        if any(c < 1 or c > 64 for c in v) or len(set(v)) != len(v):
            raise ValueError("each concurrency is 1..64, each once")
        return v


class Settings(BaseSettings):
    """pod-console configuration."""

    model_config = SettingsConfigDict(
        env_prefix="POD_CONSOLE_", env_nested_delimiter="__", extra="forbid",
        use_attribute_docstrings=True, allow_inf_nan=False)

    prometheus_url: str | None = None
    """Prometheus base URL (``http://127.0.0.1:9090``); without it slots are scraped directly."""
    profiles_dir: Path = Path(defaults.PROFILES_DIR)
    """Directory of ordered profile YAML files."""
    profile: str | None = None
    """Name of today's profile; default: the first in order."""
    pod: PodSettings = Field(default_factory=PodSettings)
    refresh_s: float = defaults.REFRESH_S
    """Refresh interval in seconds (floor 1 s)."""
    window_s: float = Field(default=defaults.WINDOW_S, ge=30, le=86400)
    """Window for rates, quantiles and p99s."""
    plot_refresh_s: float = Field(default=defaults.PLOT_REFRESH_S, ge=5, le=3600)
    """How far a full plot's time axis moves on at a time. New points are drawn as the
    polls bring them (every few seconds at most) and cost the cells they change; a move
    of the axis redraws the plots (~10 KB of terminal output). Lower it on a fast link."""
    history_s: float = Field(default=defaults.HISTORY_S, ge=60, le=86400)
    """How much history the plots keep in memory (ring buffers)."""
    thresholds: dict[str, SlotThresholds] = Field(default_factory=dict)
    """Per-slot alert thresholds keyed by slot name; ``default`` applies to all others."""
    alerts: AlertTiming = Field(default_factory=AlertTiming)
    state_dir: Path = Field(default_factory=default_state_dir)
    """Audit log, host keys and remembered KV points (``POD_CONSOLE_STATE_DIR``)."""
    record: bool = True
    """Record every poll to ``STATE_DIR/recordings/`` (``pod-console replay`` reads it)."""
    record_keep_days: float = Field(default=7.0, gt=0, le=3650)
    """Recordings older than this are deleted, oldest chunks first."""
    record_max_mb: float = Field(default=1024.0, gt=0)
    """The recordings directory is kept under this many MiB, oldest chunks first."""
    webhook_url: SecretStr | None = None
    """Slack-compatible webhook for alert changes (a secret: it embeds a token)."""
    alertmanager_url: str | None = None
    """An Alertmanager (``http://127.0.0.1:9093``): every session sends its alerts there
    through the v2 API as Prometheus does, and ``a`` makes silences there. Dedup,
    grouping, inhibition and receivers are then Alertmanager's (``profile render``
    writes an ``alertmanager.yml``)."""
    alertmanager_ack_max_s: float = Field(default=4 * 3600.0, gt=0, le=7 * 86400)
    """An acknowledgement's silence ends when its alert clears, and at the latest after
    this long."""
    runbook_url: str | None = None
    """Sent as each alert's ``runbook_url`` annotation; ``{alertname}`` is replaced by the
    alert's name (``https://wiki.example/runbooks#{alertname}``)."""
    gpu_metrics_url: str | None = None
    """``pod-agent exporter``'s ``/metrics`` URL. The console reads GPUs from the agent
    over SSH; a wall (no SSH key) reads them here, or through ``prometheus_url``."""
    gpu_metrics_token: SecretStr | None = Field(default=None,
                                                validation_alias="GPU_METRICS_TOKEN")
    """The exporter's bearer token, from ``GPU_METRICS_TOKEN`` only."""
    demo: bool = False
    """The deployment is ``pod-console demo``'s simulation: every screen says DEMO. Set by
    ``pod-console demo --web`` in the config its browser sessions read."""
    provider: Literal["runpod"] = "runpod"
    """The GPU cloud (``console/sources/provider/``): provisioning and pod state go through it."""
    runpod_api_key: SecretStr | None = Field(default=None, validation_alias="RUNPOD_API_KEY")
    """RunPod API key, from ``RUNPOD_API_KEY`` only."""
    vllm_api_key: SecretStr | None = Field(default=None, validation_alias="VLLM_API_KEY")
    """The slots' API key for completion probes, from ``VLLM_API_KEY`` only."""
    gateway_url: str | None = None
    """The gateway users call (the LiteLLM proxy on ``litellm.yaml``, e.g.
    ``http://127.0.0.1:4000``): the smoke test goes through it; without it, to each slot."""
    gateway_key: SecretStr | None = Field(default=None,
                                          validation_alias="LITELLM_MASTER_KEY")
    """The gateway's key, from ``LITELLM_MASTER_KEY`` only."""
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    smoke_timeout_s: float = Field(default=60.0, gt=0, le=600)
    """Each smoke check's requests give up after this long (a hang is a failed check)."""
    trace_url: str | None = None
    """The trace sink behind the gateway: Langfuse's base URL (``http://127.0.0.1:3000``).
    The smoke test's last check looks its request up there."""
    trace_public_key: SecretStr | None = Field(default=None,
                                               validation_alias="LANGFUSE_PUBLIC_KEY")
    """Langfuse project key pair, from ``LANGFUSE_PUBLIC_KEY`` and ``LANGFUSE_SECRET_KEY``."""
    trace_secret_key: SecretStr | None = Field(default=None,
                                               validation_alias="LANGFUSE_SECRET_KEY")
    trace_wait_s: float = Field(default=30.0, gt=0, le=600)
    """How long the smoke test waits for its trace to be listed (ingestion is batched)."""
    bench: BenchSettings = Field(default_factory=BenchSettings)
    theme: ThemeName = "default"
    """How the console looks: ``default``, ``high-contrast``, ``colour-blind`` (no
    red/green opposition) or ``mono`` (no colour; what ``NO_COLOR`` always gets). The
    palette's "Theme: …" switches it for the session."""
    context: str | None = None
    """The deployment these settings describe, among the config's ``contexts``
    (``--context NAME``, ``POD_CONSOLE_CONTEXT``, else ``current_context``); None: the
    file's top level, the one deployment of a config without contexts."""
    context_names: list[str] = Field(default_factory=list)
    _source: Path | None = PrivateAttr(default=None)
    """The config file these settings were read from (None: none, or built in code)."""
    """Every context the config defines, in its order (the fleet and ``:ctx`` list)."""

    @field_validator("refresh_s")
    @classmethod
    def _floor(cls, v: float) -> float:
        # NaN and infinity are refused by allow_inf_nan; a zero or negative interval, or
        # one past an hour, is a mistake to say, not a value to floor
        if not 0 < v <= REFRESH_MAX_S:
            raise ValueError(f"a refresh interval in seconds, more than 0 and at most "
                             f"{REFRESH_MAX_S:g} (below {REFRESH_FLOOR_S:g} s counts as "
                             f"{REFRESH_FLOOR_S:g} s)")
        return max(v, REFRESH_FLOOR_S)

    @field_validator("state_dir", mode="before")
    @classmethod
    def _state_dir(cls, v: Any) -> Any:
        # Path("") is the current directory: an empty POD_CONSOLE_STATE_DIR would put the
        # ledger, the audit log and the lock wherever the command happened to run
        if isinstance(v, str) and not v.strip():
            raise ValueError("empty (POD_CONSOLE_STATE_DIR or state_dir set to nothing): "
                             "name a directory, or leave it unset for the default")
        return v

    def thresholds_for(self, slot: str, profile: Any = None) -> SlotThresholds:
        """The slot's thresholds: its own, else ``default``'s; its SLO targets, where the
        config sets none, from the profile's ``slots.SLOT.slo`` (``profile``: the
        profile it runs; the config's win, so a console can judge tighter)."""
        th = self.thresholds.get(slot) or self.thresholds.get("default") or SlotThresholds()
        served = profile.slots.get(slot) if profile is not None else None
        targets = getattr(served, "slo", None)
        if targets is None:
            return th
        fill = {k: v for k, v in (("ttft_target_s", targets.ttft_s),
                                   ("tpot_target_s", targets.tpot_s))
                if v is not None and getattr(th, k) is None}
        return th.model_copy(update=fill) if fill else th

    @property
    def spend_path(self) -> Path | None:
        """Where the spend book is kept across runs (``console/session/spend.py``); None:
        in memory only. The demo's simulated pods cost nothing real: their spend is the
        demo's own, never booked into the user's ``today`` and gone when it ends."""
        return None if self.demo else self.state_dir / "spend.json"

    @property
    def request_timeout_s(self) -> float:
        """Every request finishes (or fails) well inside one refresh interval."""
        return defaults.request_timeout_s(self.refresh_s)

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        # highest first; nested sections merge key by key, so POD_CONSOLE_POD__SSH_KEY
        # overrides one key of the file's ``pod:`` and keeps the others
        return (init_settings, _NewNames(settings_cls, env_settings), _FileSource(settings_cls),
                file_secret_settings)


_FILE_DATA: ContextVar[dict[str, Any] | None] = ContextVar("pod_console_file_data",
                                                       default=None)
"""The config file's data for the source below, set by ``load_settings`` for one call
(a context variable: settings may be loaded from a worker thread)."""


class _FileSource(PydanticBaseSettingsSource):
    """The YAML config file as a settings source below the environment."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return (_FILE_DATA.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_DATA.get() or {})


class _NewNames(PydanticBaseSettingsSource):
    """Another source with the old key names of ``pod:`` read as the new ones. Renamed per
    source, before the sources merge: ``POD_CONSOLE_POD__RUNPOD_ID`` then wins over the
    file's ``machine_id`` as any environment variable wins over the file."""

    def __init__(self, settings_cls: type[BaseSettings],
                 inner: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self.inner = inner

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.inner.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        data = self.inner()
        pod = data.get("pod")
        if isinstance(pod, dict):
            try:
                data = {**data, "pod": renamed_old_keys(
                    pod, lambda k: f"POD_CONSOLE_POD__{k.upper()}")}
            except ValueError as exc:
                raise ConfigError(f"environment: {exc}") from None
        return data


def _file_with_new_names(raw: dict[str, Any], doc: Any, path: Path) -> dict[str, Any]:
    """The file's ``pod:`` sections (top level and each context's) with the old key names
    read as the new ones, before a context's section is merged over the top level's."""
    def section(pod: Any, where: tuple[str, ...]) -> Any:
        if not isinstance(pod, dict):
            return pod  # not a mapping: validation says so, with its line
        try:
            return renamed_old_keys(pod)
        except ValueError as exc:
            line = doc.line_of((*where, "runpod_id")) if doc is not None else 0
            raise ConfigError(f"{path}:{line}: {'.'.join(where)}: {exc}" if line else
                              f"{path}: {'.'.join(where)}: {exc}") from None

    out = dict(raw)
    if "pod" in out:
        out["pod"] = section(out["pod"], ("pod",))
    contexts = out.get("contexts")
    if isinstance(contexts, dict):
        out["contexts"] = {
            name: ({**c, "pod": section(c["pod"], ("contexts", str(name), "pod"))}
                   if isinstance(c, dict) and "pod" in c else c)
            for name, c in contexts.items()}
    return out


def _as_written(loc: tuple[Any, ...], doc: Any) -> tuple[Any, ...]:
    """An error's location as the file spells it: ``pod.runpod_id`` where the file still
    uses the old name of ``pod.machine_id``."""
    if doc is None or not loc or loc[-1] not in OLD_POD_KEYS.values() \
            or loc in doc.key_lines:
        return loc
    old = (*loc[:-1], {v: k for k, v in OLD_POD_KEYS.items()}[loc[-1]])
    return old if old in doc.key_lines else loc


class ConfigError(Exception):
    """The config file is unreadable or invalid; the message names file, line and key."""


class ConfigSource(Struct, frozen=True):
    """The config file read and parsed once: every context's settings are built from it
    (the fleet's N contexts cost one parse of the file, not N)."""

    path: Path
    doc: Any
    """The parsed document with its lines (None: no file, and none was asked for)."""
    raw: dict[str, Any]

    @classmethod
    def read(cls, path: Path | None = None) -> ConfigSource:
        from pod_agent.sourcemap import SourceError

        path, explicit = config_path(path)
        try:
            doc = read_config(path, explicit)
        except SourceError as exc:
            where = f"{path}:{exc.line}" if exc.line else str(path)
            raise ConfigError(f"{where}: {exc.message}") from None
        raw = _file_with_new_names(dict(doc.data), doc, path) if doc is not None else {}
        return cls(path, doc, raw)

    def settings(self, **overrides: Any) -> Settings:
        """One deployment's settings (``context=NAME`` picks a context): the file, then
        the environment, then ``overrides``."""
        from pydantic import ValidationError

        path, doc, raw = self.path, self.doc, self.raw
        try:
            data, ctx = select_context(raw, overrides.pop("context", None))
        except ContextError as exc:
            line = doc.line_of(exc.where) if doc is not None and exc.where else 0
            raise ConfigError(f"{path}:{line}: {exc.message}" if line else
                              f"{path}: {exc.message}") from None
        mine = (raw.get("contexts") or {}).get(ctx) or {} if ctx else {}
        names = (list(raw.get("contexts") or {}) if isinstance(raw.get("contexts"), dict)
                 else [])
        token = _FILE_DATA.set(data)
        try:
            settings = Settings(**{k: v for k, v in overrides.items() if v is not None},
                                context=ctx, context_names=names)
        except ValidationError as exc:
            lines = []
            for err in exc.errors(include_url=False):
                loc = tuple(err["loc"])
                # a key the context sets is reported where the context sets it
                in_ctx = bool(loc) and loc[0] in mine
                full = _as_written(("contexts", ctx, *loc) if in_ctx else loc, doc)
                line = doc.line_of(full) if doc is not None else 0
                dotted = ".".join(str(p) for p in full)
                where = f"{path}:{line}" if line else str(path)
                lines.append(f"{where}: {dotted}: {err['msg']}")
            raise ConfigError("\n".join(lines)) from None
        finally:
            _FILE_DATA.reset(token)
        if ctx is not None and "state_dir" not in mine:
            # each pod's state apart: its current pod, ledger, spend, audit and bench
            # records (select_context admits only plain names: this stays under the state
            # dir)
            settings.state_dir = settings.state_dir / "contexts" / ctx
        settings._source = path if doc is not None else None
        return settings


def load_settings(path: Path | None = None, **overrides: Any) -> Settings:
    """Read the YAML config (if any), then the environment, then ``overrides``."""
    return ConfigSource.read(path).settings(**overrides)


def pods_in_use(settings: Settings) -> set[str]:
    """Every pod some context of this config calls its own: its configured pod and the
    one its ``current_pod.json`` names (``up``, ``r`` or ``f`` brought it up). A ledger
    sweep never terminates one of these, whatever the ledger says."""
    from console.config.config_file import read_current_pod

    def of(s: Settings) -> set[str | None]:
        return {s.pod.machine_id, read_current_pod(s.state_dir).get("machine_id")}

    ids = of(settings)
    if settings._source is not None:
        try:
            source = ConfigSource.read(settings._source)  # read once, not per context
        except ConfigError:
            return {i for i in ids if i}
        for name in settings.context_names:
            try:
                ids |= of(source.settings(context=name))
            except ConfigError:
                continue  # a context that does not load has no pod to protect
    return {i for i in ids if i}
