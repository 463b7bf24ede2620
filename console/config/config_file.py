"""Where configuration lives and how its file is read: no pydantic here.

Both the typed settings (``settings.py``) and the fast first frame
(``boot.py``) start from these, so they agree on which file, which state
directory and which remembered pod they mean.
"""

from __future__ import annotations

import contextlib
import json
import os
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


def read_current_pod(state_dir: Path) -> dict[str, Any]:
    """What ``pod-console up`` last brought up: it wins over the config file's pod.

    Returns only well-formed keys among ``runpod_id``, ``host``, ``port_map``,
    ``profile``; nothing when there is no such pod.
    """
    try:
        data = json.loads(current_pod_file(state_dir).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not data.get("pod_id"):
        return {}
    out: dict[str, Any] = {"runpod_id": str(data["pod_id"])}
    if data.get("host"):
        out["host"] = str(data["host"])
    if isinstance(data.get("port_map"), dict):
        with contextlib.suppress(TypeError, ValueError):  # a hand-edited file: ignore it
            out["port_map"] = {int(k): int(v) for k, v in data["port_map"].items()}
    if data.get("profile"):
        out["profile"] = str(data["profile"])
    return out


CONTEXT_ENV = "POD_CONSOLE_CONTEXT"


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
