"""The README and docs/ hold together: every relative link reaches a file (and a heading,
for ``#anchor``), the README stays short, the README's test command is the one CI runs,
and every ``pod-console …`` / ``pod-agent …`` written in code names a command and flags
that the real parsers have."""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
FILES = [README, *PAGES]
README_MAX_LINES = 250

FENCE = re.compile(r"^\s*(```|~~~)")


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


# --- markdown, as far as these checks need it ----------------------------------------

def _prose_and_code(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """The file's lines outside fenced blocks and inside them, each with its number."""
    prose: list[tuple[int, str]] = []
    code: list[tuple[int, str]] = []
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        (code if fenced else prose).append((n, line))
    return prose, code


def _paragraphs(prose: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Runs of consecutive non-blank prose lines (an inline code span never leaves one),
    each with its first line's number."""
    out: list[tuple[int, str]] = []
    start, buf, last = 0, [], -1
    for n, line in prose:
        if not line.strip() or n != last + 1:
            if buf:
                out.append((start, "\n".join(buf)))
            buf = []
        if line.strip():
            if not buf:
                start = n
            buf.append(line)
        last = n
    if buf:
        out.append((start, "\n".join(buf)))
    return out


INLINE = re.compile(r"(`+)(.+?)\1", re.S)


def _inline_code(prose: list[tuple[int, str]]) -> list[tuple[int, str]]:
    spans = []
    for start, para in _paragraphs(prose):
        for m in INLINE.finditer(para):
            spans.append((start + para.count("\n", 0, m.start()), m.group(2).replace("\n", " ")))
    return spans


def _without_code(line: str) -> str:
    return INLINE.sub("", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as shown, lower case, punctuation dropped
    (``-`` and ``_`` kept), each space a ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    prose, _ = _prose_and_code(path.read_text())
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose:
        m = re.match(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(2))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.add(base if k == 0 else f"{base}-{k}")
    return out


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(path: Path) -> list[tuple[int, str]]:
    prose, _ = _prose_and_code(path.read_text())
    return [(n, m.group(1)) for n, line in prose for m in LINK.finditer(_without_code(line))]


# --- links ---------------------------------------------------------------------------

def test_there_are_docs_pages_and_the_readme_maps_each() -> None:
    assert len(PAGES) >= 10, PAGES
    targets = {t.split("#")[0] for _, t in links(README)}
    missing = [_rel(p) for p in PAGES if _rel(p) not in targets]
    assert not missing, f"README.md links to no docs page of: {missing}"


@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_every_relative_link_resolves(path: Path) -> None:
    bad = []
    for n, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{_rel(path)}:{n}: {target}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{_rel(path)}:{n}: {target}: no heading #{anchor} in "
                       f"{dest.relative_to(REPO).as_posix()}")
    assert not bad, "\n".join(bad)


def test_slugs_are_githubs() -> None:
    assert slug("Several pods: contexts") == "several-pods-contexts"
    assert slug("`status` and today's spend") == "status-and-todays-spend"
    assert slug("The exporter: dcgm-exporter's names") == "the-exporter-dcgm-exporters-names"
    assert slug("GPU activity beyond util (GPM, Hopper on)") == \
        "gpu-activity-beyond-util-gpm-hopper-on"


# --- the README itself -----------------------------------------------------------------

def test_the_readme_is_short() -> None:
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES}); " \
        "move the detail to a page of docs/"


def test_a_newcomer_is_told_to_try_it_before_the_test_extra() -> None:
    """Issue 47: the README's only install line installed the test extra (3.5 min); a
    plain ``pip install -e .`` to try the demo comes first."""
    section = README.read_text().split("## Try it, test it", 1)[1].split("\n## ", 1)[0]
    lines = [ln.strip() for ln in section.splitlines() if "pip install" in ln]
    assert lines and lines[0].startswith("python3 -m pip install -e . ") \
        and "pod-console demo" in lines[0], lines
    assert any("'.[test]'" in ln for ln in lines[1:]), lines


def test_ci_runs_the_readmes_test_command() -> None:
    """``.ci/run`` ends with exactly the command the README gives for the tests."""
    text = README.read_text()
    section = text.split("## Try it, test it", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    commands = [ln.strip() for b in blocks for ln in b.splitlines()
                if ln.strip().startswith("python3 -m pytest")]
    assert commands == ["python3 -m pytest -q"], commands
    ci = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not ln.strip().startswith("#")]
    assert ci[-1] == commands[0], ci[-1]


# --- commands and flags ----------------------------------------------------------------

@dataclass
class Cmd:
    """One parser level: its options (string → takes a value?) and its subcommands."""
    options: dict[str, bool]
    commands: dict[str, Cmd]
    positionals: int


def _tree(parser: argparse.ArgumentParser) -> Cmd:
    options: dict[str, bool] = {}
    commands: dict[str, Cmd] = {}
    positionals = 0
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                commands[name] = _tree(sp)
        elif action.option_strings:
            for s in action.option_strings:
                options[s] = action.nargs != 0
        else:
            positionals += 1
    return Cmd(options, commands, positionals)


def parsers() -> dict[str, Cmd]:
    from console.cli import build_parser as console_parser
    from pod_agent.cli import build_parser as agent_parser

    return {"pod-console": _tree(console_parser()), "pod-agent": _tree(agent_parser())}


PROG = re.compile(r"(?<![\w./'\"$\[-])(pod-console|pod-agent)(?![\w\[./-])")
ENDS = {"&&", "||", ";", ">", ">>", "<", "2>", "2>&1", "|&"}
FLAG = re.compile(r"^--?[A-Za-z][\w-]*")


def _tokens(rest: str) -> list[str]:
    try:
        words = shlex.split(rest, comments=False)
    except ValueError:  # an apostrophe in prose
        words = rest.split()
    out: list[str] = []
    for w in words:
        for i, part in enumerate(w.split("|")):
            if i:
                out.append("|")
            if part:
                out.append(part)
    return out


def check_command(prog: str, rest: str, tree: dict[str, Cmd]) -> list[str]:
    """What is wrong with ``prog rest`` as written in the docs: flags the command does
    not have, a subcommand that does not exist. Placeholders (``FILE``, ``[--json]``,
    ``a|b``, ``…``) are read the way the docs write them."""
    root = tree[prog]
    here, path = root, [prog]
    chosen = False  # a subcommand taken at this level (or it has none)
    value_next = False
    after_bar = False
    problems = []
    for raw in _tokens(rest):
        if raw in ENDS:
            break
        stop = raw.rstrip().endswith((")", ",", ";"))
        tok = raw.strip("[]()…,;.") if not FLAG.match(raw.lstrip("[(")) else \
            raw.lstrip("[(").rstrip("])…,;.")
        if raw == "|":
            after_bar, value_next = True, False
            continue
        if not tok:
            continue
        if after_bar and tok in root.commands:  # `a --x | b --y`: another command
            here, path, chosen = root.commands[tok], [prog, tok], not root.commands[tok].commands
            after_bar = value_next = False
            continue
        after_bar = False
        if FLAG.match(tok):
            flag = tok.split("=", 1)[0]
            if flag not in here.options:
                problems.append(f"{' '.join(path)}: no option {flag}")
                value_next = False
            else:
                value_next = here.options[flag] and "=" not in tok
        elif value_next:
            value_next = False
        elif here.commands and not chosen:
            if tok in here.commands:
                here = here.commands[tok]
                path.append(tok)
                chosen = not here.commands
            elif here.positionals == 0:
                problems.append(f"{' '.join(path)}: no command {tok!r}")
                break
        if stop:
            break
    return problems


def command_uses(path: Path) -> list[tuple[int, str, str]]:
    """Every ``pod-console …`` and ``pod-agent …`` in the file's code: fenced blocks (a
    line's comment read on its own, ``\\`` continuations joined) and inline code."""
    prose, code = _prose_and_code(path.read_text())
    segments: list[tuple[int, str]] = []
    joined, first = "", 0
    for n, line in code:
        if not joined:
            first = n
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1] + " "
            continue
        joined += line
        body, sep, comment = joined.partition(" #")
        segments.append((first, body))
        if sep:  # a comment: its inline code, and its words around that
            segments += [(first, m.group(2)) for m in INLINE.finditer(comment)]
            segments.append((first, _without_code(comment)))
        joined = ""
    segments.extend(_inline_code(prose))
    uses = []
    for n, text in segments:
        for m in PROG.finditer(text):
            uses.append((n, m.group(1), text[m.end():]))
    return uses


def test_the_flag_check_catches_a_wrong_flag_and_command() -> None:
    tree = parsers()
    assert check_command("pod-console", "wall --web 8080 --rotate 15", tree) == []
    assert check_command("pod-console", "--context fallback down", tree) == []
    assert check_command("pod-console", "record export --from \"30m ago\" --to now F", tree) \
        == []
    assert check_command("pod-agent", "status --json | logs SLOT | rebalance --set S=U", tree) \
        == []
    assert check_command("pod-console", "wall --webb 8080", tree) == \
        ["pod-console wall: no option --webb"]
    assert check_command("pod-console", "walls --web 8080", tree) == \
        ["pod-console: no command 'walls'"]
    assert check_command("pod-agent", "gpus [--json] [--all]", tree) == \
        ["pod-agent gpus: no option --all"]
    assert check_command("pod-agent", "status --json | logs --since 5m", tree) == \
        ["pod-agent logs: no option --since"]


def test_every_command_and_flag_in_the_docs_exists() -> None:
    tree = parsers()
    problems, seen = [], 0
    for path in FILES:
        for n, prog, rest in command_uses(path):
            seen += 1
            problems += [f"{_rel(path)}:{n}: {p}" for p in check_command(prog, rest, tree)]
    assert seen >= 40, f"only {seen} commands found in the docs: is the reader broken?"
    assert not problems, "\n".join(problems)
