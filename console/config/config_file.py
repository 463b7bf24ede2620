"""Where configuration lives and how its file is read: no pydantic here.

Both the typed settings (``settings.py``) and the fast first frame
(``boot.py``) start from these, so they agree on which file, which state
directory and which remembered pod they mean.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from pod_agent.sourcemap import SourceDoc, load_file

ENV_PREFIX = "POD_CONSOLE_"


def xdg(var: str, fallback: str) -> Path:
    return Path(os.environ.get(var) or Path.home() / fallback)


def default_config_path() -> Path:
    return xdg("XDG_CONFIG_HOME", ".config") / "pod-console" / "config.yaml"


def default_state_dir() -> Path:
    return xdg("XDG_STATE_HOME", ".local/state") / "pod-console"


def config_path(path: Path | None) -> tuple[Path, bool]:
    """The config file to read and whether it was asked for (then it must exist)."""
    if path is not None:
        return path, True
    return Path(os.environ.get("POD_CONSOLE_CONFIG") or default_config_path()), False


DEPLOYMENT_ENV = ("POD_CONSOLE_POD", "POD_CONSOLE_PROFILES_DIR", "POD_CONSOLE_PROFILE",
                  "POD_CONSOLE_PROMETHEUS_URL", "POD_CONSOLE_GATEWAY_URL",
                  "POD_CONSOLE_GPU_METRICS_URL")
"""Environment variables that say which deployment to watch (``POD_CONSOLE_POD__*``
included); the state directory, the refresh or the context alone say nothing of it."""


def deployment_env() -> list[str]:
    """The environment variables set that describe a deployment, sorted."""
    return sorted(k for k in os.environ
                  if k.upper() in DEPLOYMENT_ENV or k.upper().startswith("POD_CONSOLE_POD__"))


def no_config_found(path: Path | None) -> str | None:
    """Why there is no deployment to open the console on (every place looked at, and
    how to make one), or None when a config file or the environment names one.

    Without it the console would open on the defaults (the profiles in ``./profiles``,
    the slots on 127.0.0.1) and show whatever listens there, say a demo, as if it were
    the operator's pod, offering to start and bill a pod nobody named."""
    if path is not None:
        return None  # asked for: a missing file is the settings' error, with its path
    if os.environ.get("POD_CONSOLE_CONFIG") or deployment_env():
        return None
    found, _ = config_path(None)
    if found.exists():
        return None
    return "\n".join([
        "pod-console: no config found, so there is no pod to watch. Looked at:",
        "  --config PATH                  not given",
        "  $POD_CONSOLE_CONFIG            not set",
        f"  {found}  no such file",
        "  $POD_CONSOLE_POD__* and the other deployment variables: none set",
        "Make one (docs/configuration.md, \"The console\"): at least",
        "  profiles_dir: /path/to/profiles",
        "  pod: {machine_id: <the RunPod pod id>, host: <its address>}",
        f"in {found} or a file given with --config PATH.",
        "To see the console first, on simulated pods: pod-console demo",
    ])


def read_config(path: Path, explicit: bool) -> SourceDoc | None:
    """The file's document, or None when there is no file and none was asked for.

    Raises ``pod_agent.sourcemap.SourceError`` (with a line) for a broken file.
    """
    if not (explicit or path.exists()):
        return None
    return load_file(path)


def ledger_path(state_dir: Path) -> Path:
    """Where ``up``, ``down`` and the ``r``/``f`` keys record every pod that may bill
    (``console/operations/ledger.py``)."""
    return state_dir / "pods.jsonl"


def current_pod_file(state_dir: Path) -> Path:
    return state_dir / "current_pod.json"


def replace_whole(path: Path, data: bytes, tmp: Path | None = None) -> None:
    """Write ``path`` whole or not at all (temp file, fsync, rename); ``tmp``: the temp
    file, where writers in several processes must not share one."""
    tmp = tmp or path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_current_pod(state_dir: Path, pod_id: str, profile: str, host: str,
                      port_map: dict[int, int]) -> None:
    """Remember the pod ``up``, ``r`` or ``f`` brought up; raises OSError (a full disk)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    replace_whole(current_pod_file(state_dir), json.dumps({
        "pod_id": pod_id, "profile": profile, "host": host,
        "port_map": {str(k): v for k, v in port_map.items()}, "since": time.time()},
        indent=1).encode())


def current_pod_bytes(state_dir: Path) -> bytes | None:
    """The file as it is (to put back when an adoption fails), None when there is none."""
    try:
        return current_pod_file(state_dir).read_bytes()
    except OSError:
        return None


def restore_current_pod(state_dir: Path, before: bytes | None) -> None:
    if before is None:
        current_pod_file(state_dir).unlink(missing_ok=True)
    else:
        replace_whole(current_pod_file(state_dir), before)


def read_current_pod(state_dir: Path) -> dict[str, Any]:
    """What ``pod-console up`` last brought up: it wins over the config file's pod.

    Returns only well-formed keys among ``machine_id``, ``host``, ``port_map``,
    ``profile``; nothing when there is no such pod.
    """
    try:
        data = json.loads(current_pod_file(state_dir).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not data.get("pod_id"):
        return {}
    out: dict[str, Any] = {"machine_id": str(data["pod_id"])}
    if data.get("host"):
        out["host"] = str(data["host"])
    if isinstance(data.get("port_map"), dict):
        with contextlib.suppress(TypeError, ValueError):  # a hand-edited file: ignore it
            out["port_map"] = {int(k): int(v) for k, v in data["port_map"].items()}
    if data.get("profile"):
        out["profile"] = str(data["profile"])
    return out


CONTEXT_ENV = "POD_CONSOLE_CONTEXT"
CONTEXT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A context's name is a directory under ``STATE_DIR/contexts``: a plain name, never a
path (``../x``, ``/abs``), never ``.`` or ``..``, nothing a shell or a terminal reads."""


class ContextError(Exception):
    """A context that the config does not define, or one that is not a mapping."""

    def __init__(self, message: str, where: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.where = where


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else v
    return out


def select_context(data: dict[str, Any], name: str | None
                   ) -> tuple[dict[str, Any], str | None]:
    """The config as one deployment sees it: the file's top level, with the chosen
    context's keys over it (nested sections merged key by key), and which context that
    is. ``name`` (``--context``, ``POD_CONSOLE_CONTEXT``) wins over ``current_context``;
    a config without ``contexts`` is one deployment and reads as it always did."""
    contexts = data.get("contexts")
    name = name or os.environ.get(CONTEXT_ENV) or data.get("current_context")
    top = {k: v for k, v in data.items() if k not in ("contexts", "current_context")}
    if contexts is None:
        if name and name != "default":
            raise ContextError(f"context {name!r}: the config defines no contexts",
                               ("contexts",))
        return top, None
    if not isinstance(contexts, dict) or not all(isinstance(k, str) for k in contexts):
        raise ContextError("contexts: a mapping of context name to its settings",
                           ("contexts",))
    for key in contexts:
        if not CONTEXT_NAME.fullmatch(key):
            raise ContextError(f"context name {key!r}: letters, digits, '.', '_' and '-', "
                               "starting with a letter or digit (it names a directory)",
                               ("contexts", key))
    if not name:
        return top, None
    if name not in contexts:
        have = ", ".join(sorted(contexts)) or "none"
        raise ContextError(f"context {name!r} is not in the config (have: {have})",
                           ("current_context",) if name == data.get("current_context")
                           else ("contexts",))
    mine = contexts[name] or {}
    if not isinstance(mine, dict):
        raise ContextError(f"contexts.{name}: a mapping of settings", ("contexts", name))
    nested = [k for k in ("contexts", "current_context", "context") if k in mine]
    if nested:
        raise ContextError(f"contexts.{name}.{nested[0]}: not allowed inside a context",
                           ("contexts", name, nested[0]))
    return _merged(top, mine), name
