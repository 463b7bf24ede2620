"""The web wall fitted to the window (issue 47, #7): in a real Chromium, the page's font
follows the viewport as a dashboard's stat panel does, and the wall then draws its
5-row digits; the small-text table of every slot's figures stays a short strip below
the middle instead of the screen's middle third.

Measured, not assumed: the cell height is the one Chromium laid the terminal out with
(the xterm screen's box over its rows); the rows are those the websocket drew (the same
bytes xterm.js renders, fed to a terminal emulator)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from tests.support.procs import free_port

GLYPH_INK = set("█╭╮╰╯─│┤├┬┴┼╷╵╶╴┌┐└┘┏┓┗┛━┃╺╸╹╻•:$╫ ")



def digit_rows(lines: list[str], label: str) -> int:
    """How many rows the figure left of ``label`` (a metric's unit) is drawn on: the
    rows around the label's row whose text up to the label is glyph strokes only."""
    row = next(i for i, line in enumerate(lines) if label in line)
    col = lines[row].index(label)
    left = lines[row].rfind("│", 0, col) + 1  # the card's border

    def inked(i: int) -> bool:
        part = lines[i][left:col] if 0 <= i < len(lines) else ""
        return bool(part.strip()) and set(part) <= GLYPH_INK

    # a figure is centred on its unit's row (either font): the rows k above and below
    k = 0
    while k < 2 and inked(row - k - 1) and inked(row + k + 1):
        k += 1
    return 2 * k + 1 if inked(row) else 0


def box_rows(lines: list[str], title: str) -> tuple[int, int]:
    """(first row, rows) of the bordered box titled ``title``."""
    top = next(i for i, line in enumerate(lines) if f"─ {title} " in line)
    bottom = next(i for i in range(top + 1, len(lines)) if lines[i].lstrip().startswith("╰"))
    return top, bottom - top + 1


def test_digit_rows_reads_both_fonts() -> None:
    three = ["│ pod x  RUNNING │", "│ ╭╫╮╷ ╷ │", "│ ╰╫╮╰─┤ per hour │", "│ ╰╫╯  ╵ │", "│ x │"]
    assert digit_rows(three, "per hour") == 3
    five = ["│ pod x │", "│ ██ ██ │", "│ ██ ██ │", "│ ██ ██ per hour │", "│ ██ │", "│ ██ │",
            "│ ██ ██ │"]  # the next figure's first row
    assert digit_rows(five, "per hour") == 5


def _cell_height(page, rows: int) -> tuple[float, float]:
    """(the top of the terminal's screen, one row's height), in CSS pixels."""
    box = page.evaluate("(() => { const r = document.querySelector('.xterm-screen')"
                        ".getBoundingClientRect(); return [r.top, r.height]; })()")
    return float(box[0]), float(box[1]) / rows


def test_the_web_wall_fits_its_digits_to_the_window(tmp_path: Path) -> None:
    from tests.support.browser import CHROMIUM, WallPage, launch, start_demo_web, stop_server

    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None
    if sync_api is None or not Path(CHROMIUM).exists():
        why = f"{CHROMIUM} or playwright missing: .ci/run installs both"
        if os.environ.get("CI"):
            raise AssertionError(why)
        pytest.skip(why)
    port = free_port()
    log = tmp_path / "server.log"
    # the overview stays (no rotation within the test): its table is the small text
    server = start_demo_web(port, tmp_path / "state", log, "--refresh", "1",
                            "--rotate", "3600", "--max-sessions", "2")
    measured: dict[tuple[int, int], tuple[float, float, float]] = {}
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, log.read_text()
                time.sleep(0.2)
        with sync_api.sync_playwright() as pw:
            browser = launch(pw)
            for viewport in ((1920, 1080), (1600, 900)):
                wall = WallPage(browser, f"http://127.0.0.1:{port}/", viewport)
                # the pod's price is always known in the demo: its figure is drawn whole
                text = wall.wait_for(lambda t: "per hour" in t and "all slots" in t
                                     and digit_rows(t.splitlines(), "per hour") >= 3, 120)
                assert wall.screen is not None
                lines = text.splitlines()
                top_px, cell_h = _cell_height(wall.page, wall.screen.lines)
                digits_px = digit_rows(lines, "per hour") * cell_h
                first, rows = box_rows(lines, "all slots")
                measured[viewport] = (digits_px, top_px + first * cell_h, rows * cell_h)
                wall.page.screenshot(path=str(tmp_path / f"wall-{viewport[0]}.png"))
                wall.page.close()
            browser.close()
    finally:
        stopped = stop_server(server)
    assert stopped, log.read_text()[-3000:]
    print("measured (digits px, table top px, table height px):", measured)
    digits_px, _, _ = measured[(1920, 1080)]
    assert digits_px >= 120, measured
    _, box_top, box_h = measured[(1600, 900)]
    # the big digits take the upper half; the table of small text is a strip below it
    assert box_top >= 900 / 2 and box_h <= 900 / 6, measured
