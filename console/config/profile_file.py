"""Write a new gpu_util split into a profile file: in place, comments kept, atomically.

The profile changes only after the pod applied the split. The new text is
validated like any profile before it replaces the old one (temp file +
rename), and the old file is kept as a timestamped backup.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from pod_agent.profiles import check_file
from pod_agent.sourcemap import load_file


def replace_utils(text: str, lines_of: dict[str, int], values: dict[str, float]) -> str:
    lines = text.splitlines(keepends=True)
    for slot, value in values.items():
        i = lines_of[slot] - 1
        # a number's text holds no backslash: safe in a replacement template
        new, n = re.subn(r"(gpu_util:\s*)[0-9.]+", r"\g<1>" + f"{value:g}", lines[i],
                         count=1)
        if n != 1:
            raise ValueError(f"line {i + 1} does not hold {slot}'s gpu_util")
        lines[i] = new
    return "".join(lines)


def write_split(path: Path, values: dict[str, float], backup_dir: Path) -> str:
    """Apply ``values`` to ``path``; return what changed, in one line of words."""
    doc = load_file(path)
    lines_of = {s: doc.key_lines[("slots", s, "gpu_util")] for s in values}
    old = path.read_text()
    new = replace_utils(old, lines_of, values)
    if new == old:
        return "profile unchanged"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".yaml")
    with os.fdopen(fd, "w") as fh:
        fh.write(new)
        fh.flush()
        os.fsync(fh.fileno())
    _, problems = check_file(tmp)
    if problems:
        os.unlink(tmp)
        raise ValueError("the new split does not validate: " + "; ".join(map(str, problems)))
    backup_dir.mkdir(parents=True, exist_ok=True)
    backup = backup_dir / f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.copy2(path, backup)
    os.chmod(tmp, os.stat(path).st_mode & 0o777)
    os.replace(tmp, path)
    # in words, as the console's log shows it: no diff lines
    saved = ", ".join(f"{slot} at {float(v):.2f}" for slot, v in values.items())
    return f"{path.name} saved with {saved} (the old one kept as {backup})"
