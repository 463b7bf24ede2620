"""Where the agent keeps its state on the pod (one directory, on the persistent volume)."""

from __future__ import annotations

import os


def home() -> str:
    """``$POD_AGENT_HOME``, else ``/workspace/pod-agent`` (the volume), else ``~/.pod-agent``."""
    env = os.environ.get("POD_AGENT_HOME")
    if env:
        return env
    if os.path.isdir("/workspace") and os.access("/workspace", os.W_OK):
        return "/workspace/pod-agent"
    return os.path.join(os.path.expanduser("~"), ".pod-agent")


def path(*parts: str) -> str:
    p = os.path.join(home(), *parts)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


def env_file() -> str:
    return path(".env")


def socket_path() -> str:
    return path("agent.sock")


def audit_log() -> str:
    return path("audit.jsonl")


def slot_log(slot: str) -> str:
    return path("logs", f"{slot}.log")
