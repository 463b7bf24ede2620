"""On a snapshot mismatch, the text of both pictures in the test's report.

pytest-textual-snapshot writes its HTML report where the run happened; a CI log shows
only "assert False". The plugin pickles what it compared (expected SVG, actual SVG) per
test; this reads that back and puts a line diff of the characters on screen in the
report, so a mismatch seen once on a loaded runner can be understood from the log.
"""

from __future__ import annotations

import difflib
import html
import pickle
import re
from collections.abc import Generator

import pytest

_TEXT = re.compile(r'<text[^>]*?\by="([\d.]+)"[^>]*>(.*?)</text>', re.S)


def svg_rows(svg: str) -> list[str]:
    """The characters of a Textual SVG screenshot, one string per terminal row."""
    rows: dict[float, list[str]] = {}
    for m in _TEXT.finditer(svg):
        rows.setdefault(float(m.group(1)), []).append(html.unescape(m.group(2)))
    return ["".join(parts).replace("\xa0", " ").rstrip() for _, parts in sorted(rows.items())]


def text_diff(expected_svg: str, actual_svg: str) -> str:
    diff = difflib.unified_diff(svg_rows(expected_svg), svg_rows(actual_svg),
                                "expected", "actual", lineterm="", n=2)
    return "\n".join(diff) or "(the same characters: colours or styles differ)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator:
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.failed or "snap_compare" not in getattr(
            item, "fixturenames", ()):
        return
    try:
        from pytest_textual_snapshot import node_to_report_path

        data = pickle.loads(node_to_report_path(item).read_bytes())
        expected, actual = data[1], data[2]
    except Exception as exc:  # no data: the test failed before comparing
        report.sections.append(("snapshot text", f"no comparison recorded ({exc!r})"))
        return
    report.sections.append(("snapshot text (expected → actual)", text_diff(expected, actual)))
