"""Loading profile files: problems with file, line and dotted field; ordering by priority."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .profile import Profile, parse_profile
from .sourcemap import SourceDoc, SourceError, load_file


@dataclass(frozen=True)
class FileProblem:
    """One problem in one file, printable as ``PATH:LINE: field: message``."""

    path: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        if self.field:
            return f"{where}: {self.field}: {self.message}"
        return f"{where}: {self.message}"


class ProfileError(Exception):
    """A profile file failed to load; ``problems`` lists every reason."""

    def __init__(self, problems: Sequence[FileProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class LoadedProfile:
    """A valid profile with where it came from and its place in the fallback order."""

    path: Path
    name: str
    order: tuple[int, str]
    profile: Profile


_PREFIX = re.compile(r"^(\d+)[-_]")


def _dotted(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for p in loc:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts)


_KEY_PROBLEMS = ("unknown key", "required field is missing", "slot name")
"""Messages about a key itself (not its value) point at the key's line."""


def _line_for(doc: SourceDoc, loc: tuple[Any, ...], message: str) -> int:
    # Unknown keys and missing fields point at a key; bad values at the value.
    prefer_value = not message.startswith(_KEY_PROBLEMS)
    return doc.line_of(loc, prefer_value=prefer_value)


def check_file(path: str | os.PathLike[str]) -> tuple[Profile | None, list[FileProblem]]:
    """Load and validate one file, returning the profile or every problem in it."""
    shown = os.fspath(path)
    try:
        doc = load_file(path)
    except SourceError as exc:
        return None, [FileProblem(shown, exc.line, "", exc.message)]
    profile, problems = parse_profile(doc.data)
    out = [FileProblem(shown, _line_for(doc, loc, msg), _dotted(loc), msg) for loc, msg in problems]
    out.sort(key=lambda p: (p.line, p.field))
    return profile, out


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Load one profile or raise :class:`ProfileError` with every problem."""
    profile, problems = check_file(path)
    if problems or profile is None:
        raise ProfileError(problems)
    return profile


def profile_name(path: Path, profile: Profile) -> str:
    if profile.name:
        return profile.name
    return _PREFIX.sub("", path.stem)


def expand_paths(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Files as given; directories become their ``*.yaml`` / ``*.yml`` files, sorted."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted([*p.glob("*.yaml"), *p.glob("*.yml")]))
        else:
            out.append(p)
    return out


def load_profiles(directory: str | os.PathLike[str]) -> list[LoadedProfile]:
    """Every profile of a directory in fallback order; raise on the first broken file."""
    loaded: list[LoadedProfile] = []
    problems: list[FileProblem] = []
    for path in expand_paths([directory]):
        profile, probs = check_file(path)
        if probs or profile is None:
            problems.extend(probs)
            continue
        m = _PREFIX.match(path.name)
        prio = profile.priority if profile.priority is not None else (
            int(m.group(1)) if m else 999)
        loaded.append(LoadedProfile(path, profile_name(path, profile), (prio, path.name), profile))
    if problems:
        raise ProfileError(problems)
    names = [lp.name for lp in loaded]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ProfileError([FileProblem(os.fspath(directory), 0, "name",
                                        f"two profiles are named {dupes[0]!r}")])
    return sorted(loaded, key=lambda lp: lp.order)
