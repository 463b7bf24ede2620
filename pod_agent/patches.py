"""Apply the profile's patches to the installed vLLM, idempotently (skip what is applied)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class PatchResult:
    name: str
    state: str  # applied | already | failed | missing
    detail: str = ""


def vllm_site_root(vllm_exe: str) -> str | None:
    """The site-packages directory holding the ``vllm`` package of this executable."""
    exe = shutil.which(vllm_exe) or vllm_exe
    try:
        with open(exe, encoding="utf-8", errors="replace") as fh:
            first = fh.readline()
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    python = first[2:].strip().split()[0]
    try:
        out = subprocess.run(
            [python, "-c", "import importlib.util,os;"
             "s=importlib.util.find_spec('vllm');"
             "print(os.path.dirname(os.path.dirname(s.origin)) if s and s.origin else '')"],
            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    root = out.stdout.strip()
    return root or None


def _patch(args: list[str], root: str, patch_file: str) -> subprocess.CompletedProcess:
    # --force: never guess that a patch "looks reversed" (--batch would, and apply it)
    return subprocess.run(["patch", "-p1", "--force", "-d", root, "-i", patch_file, *args],
                          capture_output=True, text=True, timeout=60)


def apply_patch(patch_file: str, root: str) -> PatchResult:
    name = os.path.basename(patch_file)
    if not os.path.exists(patch_file):
        return PatchResult(name, "missing", f"{patch_file} not found")
    if shutil.which("patch") is None:
        return PatchResult(name, "failed", "the patch program is not installed")
    if _patch(["--dry-run", "-R"], root, patch_file).returncode == 0:
        return PatchResult(name, "already", "reverse applies cleanly: already applied")
    dry = _patch(["--dry-run", "--forward"], root, patch_file)
    if dry.returncode != 0:
        lines = (dry.stdout + dry.stderr).strip().splitlines()
        return PatchResult(name, "failed", lines[-1] if lines else "does not apply")
    real = _patch(["--forward"], root, patch_file)
    if real.returncode != 0:
        return PatchResult(name, "failed", (real.stdout + real.stderr).strip()[-300:])
    return PatchResult(name, "applied", "applied")
