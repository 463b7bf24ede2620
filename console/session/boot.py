"""The first frame's plan, read without pydantic: which slots to poll, and how often.

Why this exists: validating settings and profiles means importing pydantic and
building its schemas (~150 ms), and the console should show live numbers within
about twice a bare Textual app's start. So ``watch`` and ``wall`` start from this
plain reading of the same files — config file, ``POD_CONSOLE_*`` environment,
the pod ``up`` remembered, today's profile — poll once and paint, while the typed
settings and the validated profiles load in a worker thread. The full load then
checks that it would poll exactly the same targets the same way
(``DeploymentPoller.config_key``); if not, its poller replaces this one, and a
config or profile that does not validate stops the console with every problem.

Anything this reader is not sure about (an odd type, a JSON-valued environment
variable, an unreadable file) makes it return None: the console then starts the
ordinary way, validation first.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from msgspec import Struct

from console.config import defaults
from console.config.config_file import (
    CONTEXT_ENV,
    ENV_PREFIX,
    config_path,
    default_state_dir,
    read_config,
    read_current_pod,
)
from console.model.printable import has_controls
from console.sources.collect.targets import SlotTarget

REFRESH_FLOOR_S = defaults.REFRESH_FLOOR_S
DEFAULTS: dict[str, Any] = {"refresh_s": defaults.REFRESH_S, "window_s": defaults.WINDOW_S,
                            "history_s": defaults.HISTORY_S,
                            "plot_refresh_s": defaults.PLOT_REFRESH_S,
                            "profiles_dir": defaults.PROFILES_DIR}
_PREFIX = re.compile(r"^(\d+)[-_]")


class _Unsure(Exception):
    """Something the fast path will not guess about: take the validated path."""


class BootPlan(Struct, frozen=True):
    """What the first poll and the first frame need, nothing more."""

    profile_name: str
    targets: tuple[SlotTarget, ...]
    refresh_s: float
    window_s: float
    history_s: float
    plot_refresh_s: float
    prometheus_url: str | None
    pod_id: str | None
    api_key: str | None
    """The slots' API key (``VLLM_API_KEY``); only ever sent in a header."""
    demo: bool = False
    theme: str = defaults.THEME

    @property
    def request_timeout_s(self) -> float:
        return defaults.request_timeout_s(self.refresh_s)

    @property
    def prom_selector(self) -> str:
        return defaults.prom_selector(self.pod_id)


def plan(config: Path | None, refresh_s: float | None = None) -> BootPlan | None:
    """The plan, or None when only the validated path can tell."""
    try:
        return _plan(config, refresh_s)
    except _Unsure:
        return None
    except Exception:  # an unreadable file, say: the validated path will say what is wrong
        return None


def _plan(config: Path | None, refresh_override: float | None) -> BootPlan:
    path, explicit = config_path(config)
    doc = read_config(path, explicit)
    data = doc.data if doc is not None else {}
    if "contexts" in data or os.environ.get(CONTEXT_ENV):
        raise _Unsure("contexts: the validated path merges the chosen one")
    env = {k.upper(): v for k, v in os.environ.items() if k.upper().startswith(ENV_PREFIX)}

    def value(*keys: str) -> Any:
        name = ENV_PREFIX + "__".join(keys).upper()
        if name in env:
            return env[name]
        for i in range(1, len(keys)):
            if ENV_PREFIX + "__".join(keys[:i]).upper() in env:
                raise _Unsure(f"{keys[:i]} given whole in the environment")
        node: Any = data
        for k in keys:
            if node is None:
                break  # a section the file leaves out: the default
            if not isinstance(node, dict):
                raise _Unsure(".".join(keys))
            node = node.get(k)
        return DEFAULTS.get(keys[-1]) if node is None and len(keys) == 1 else node

    refresh = _num(refresh_override if refresh_override is not None else value("refresh_s"))
    if not 0 < refresh <= 3600:
        raise _Unsure(f"refresh_s {refresh}")  # the validated path says what is wrong
    state_raw = value("state_dir")
    if state_raw is not None and not _str(state_raw).strip():
        raise _Unsure("an empty state_dir")  # never the current directory
    state_dir = Path(_str(state_raw)) if state_raw is not None else default_state_dir()
    current = read_current_pod(state_dir)
    new_id, old_id = _opt_str(value("pod", "machine_id")), _opt_str(value("pod", "runpod_id"))
    if new_id is not None and old_id is not None:
        raise _Unsure("pod.machine_id and its old name runpod_id both given")
    pod_id = current.get("machine_id") or new_id or old_id
    host = current.get("host") or _opt_str(value("pod", "host")) or "127.0.0.1"
    port_map = current.get("port_map")
    if port_map is None:
        port_map = _port_map(value("pod", "port_map"))
    wanted = current.get("profile") or _opt_str(value("profile"))
    profiles_dir = Path(_str(value("profiles_dir")))
    name, slots = _today(profiles_dir, wanted)
    targets = tuple(_target(slot, s, host, port_map) for slot, s in slots.items())
    theme = value("theme") or defaults.THEME
    if theme not in defaults.THEMES:
        raise _Unsure(f"theme {theme!r}")  # the validated path says what is wrong
    return BootPlan(
        profile_name=name, targets=targets, refresh_s=max(refresh, REFRESH_FLOOR_S),
        window_s=_num(value("window_s")), history_s=_num(value("history_s")),
        plot_refresh_s=_num(value("plot_refresh_s")),
        prometheus_url=_opt_str(value("prometheus_url")), pod_id=pod_id,
        api_key=os.environ.get("VLLM_API_KEY") or None, demo=_bool(value("demo")),
        theme=theme)


def _target(slot: str, s: dict[str, Any], host: str, port_map: dict[int, int]) -> SlotTarget:
    slot = _str(slot)
    port = _int(s.get("port"))  # the same URL ``targets_for`` builds from a valid profile
    return SlotTarget(slot=slot, served_model_name=_str(s.get("served_model_name")),
                      port=port, base_url=f"http://{host}:{port_map.get(port, port)}",
                      gpus=tuple(_int(g) for g in _list(s.get("gpus"))),
                      gpu_util=_num(s.get("gpu_util")))


def _today(directory: Path, wanted: str | None) -> tuple[str, dict[str, dict[str, Any]]]:
    """Today's profile as ``load_profiles`` orders them: (priority or prefix, file name)."""
    if not directory.is_dir():
        raise _Unsure(f"{directory} is not a directory")
    found = []
    for p in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        d = read_config(p, True)
        if d is None:
            raise _Unsure(str(p))
        prof = d.data
        m = _PREFIX.match(p.name)
        prio = prof.get("priority")
        if prio is None:
            prio = int(m.group(1)) if m else 999
        name = prof.get("name") or _PREFIX.sub("", p.stem)
        slots = prof.get("slots")
        if not isinstance(slots, dict) or not all(isinstance(v, dict) for v in slots.values()):
            raise _Unsure(f"{p}: slots")
        found.append(((_int(prio), p.name), _str(name), slots))
    found.sort(key=lambda f: f[0])
    if wanted is not None:
        found = [f for f in found if f[1] == wanted]
    if not found:
        raise _Unsure("no profile")
    return found[0][1], found[0][2]


def _num(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise _Unsure(repr(v))
    try:
        f = float(v)
    except ValueError:
        raise _Unsure(repr(v)) from None
    if not math.isfinite(f):
        raise _Unsure(repr(v))  # NaN and infinity: validation refuses them, with a line
    return f


def _bool(v: Any) -> bool:
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false", "1", "0"):
        return v.lower() in ("true", "1")
    raise _Unsure(repr(v))


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Unsure(repr(v))
    return v


def _str(v: Any) -> str:
    # a name with a control character is left to the validated start (which refuses it)
    if not isinstance(v, str) or not v or has_controls(v):
        raise _Unsure(repr(v))
    return v


def _opt_str(v: Any) -> str | None:
    return None if v is None else _str(v)


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise _Unsure(repr(v))
    return v


def _port_map(v: Any) -> dict[int, int]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _Unsure("port_map")
    # YAML mapping keys reach us as text ("8881"), as they do pydantic, which reads them
    # as numbers: so do we, digits only
    return {_port(k): _port(x) for k, x in v.items()}


def _port(v: Any) -> int:
    if isinstance(v, str) and v.isdigit():
        return int(v)
    return _int(v)
