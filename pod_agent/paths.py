"""Where the agent keeps its state on the pod (one directory, on the persistent volume)."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile


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


SUN_PATH_MAX = 103
"""Bytes a unix socket's path may take: Linux allows 107 (108 with the NUL), macOS 103;
the smaller, so that a home that works on one works on the other."""


def socket_path() -> str:
    return socket_path_for(home())


def socket_path_for(agent_home: str) -> str:
    """``HOME/agent.sock``, or, where that is longer than a unix socket's path may be (a
    deep home: a test's temporary directory, a long volume path), a short path derived
    from the home in a directory only this user may enter. The agent and every client
    compute it the same way, so nothing has to tell them where it is."""
    full = os.path.join(agent_home, "agent.sock")
    os.makedirs(agent_home, exist_ok=True)
    if len(os.fsencode(full)) <= SUN_PATH_MAX:
        return full
    digest = hashlib.sha256(os.fsencode(os.path.abspath(agent_home))).hexdigest()[:20]
    private = os.path.join(tempfile.gettempdir(), f"pod-agent-{os.getuid()}")
    os.makedirs(private, mode=0o700, exist_ok=True)
    st = os.lstat(private)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise RuntimeError(f"{private} is not a directory only this user may enter: the "
                           "agent's socket is not put there")
    return os.path.join(private, f"{digest}.sock")


def audit_log() -> str:
    return path("audit.jsonl")


def slot_log(slot: str) -> str:
    return path("logs", f"{slot}.log")
