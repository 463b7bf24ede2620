"""The acceptance-by-position bars as text: exact to an eighth of a cell, the percent
printed, rows that do not fit counted, and a one-percent move redrawing one row."""

from __future__ import annotations

from console.ui.widgets.position_bars import EMPTY, TITLE, bar, bar_lines, percents


def test_a_bar_is_its_percent_of_the_track_to_an_eighth_of_a_cell() -> None:
    assert bar(100, 10) == "█" * 10
    assert bar(0, 10) == " " * 10
    assert bar(50, 10) == "█████     "
    assert bar(55, 10) == "█████▌    "  # 5.5 cells: five and four eighths
    assert bar(82, 20) == "████████████████▍   "  # 16.4 cells: 131 eighths of 160
    assert bar(140, 4) == "████" and bar(-3, 4) == "    "  # a counter glitch stays on its track


def test_rows_say_slot_position_and_percent_and_the_track_runs_to_100() -> None:
    data = percents({"TINY": (0.823, 0.641, None), "SMALL": (), "BIG": (None, 0.5)})
    assert data == (("TINY", (82, 64, None)), ("BIG", (None, 50)))  # SMALL: nothing read
    lines = [t.plain for t in bar_lines(data, 40, 20)]
    assert lines[0].strip() == TITLE
    assert lines[1].startswith("TINY #0 ") and lines[1].endswith("  82%")
    assert lines[2].startswith("     #1 ") and lines[2].endswith("  64%")
    assert lines[3].rstrip().endswith("—") and "█" not in lines[3]  # no drafts yet: no bar
    assert lines[5].startswith("     #1 ") and lines[5].endswith("  50%")
    for line in lines[1:]:
        assert len(line) == 40  # every row as wide as the cell: bar + track is 100 %
    track = 40 - len("TINY #0 ") - len("  82%")
    assert lines[1][8:8 + track].count("█") == 82 * track // 100


def test_rows_that_do_not_fit_are_counted_not_dropped_in_silence() -> None:
    data = percents({f"S{i}": (0.8, 0.6, 0.4) for i in range(4)})  # twelve rows
    lines = [t.plain for t in bar_lines(data, 60, 6)]
    assert len(lines) == 6
    assert lines[-1].startswith("… 8 more rows")
    assert lines[4].startswith("S1 ")  # the first four rows, then the count


def test_no_speculative_decoding_says_so() -> None:
    lines = [t.plain for t in bar_lines(percents({"A": (), "B": (None,)}), 50, 8)]
    assert lines[0].strip() == TITLE and lines[2].strip() == EMPTY


def test_slots_keep_the_series_plots_colours_and_no_color_draws_none() -> None:
    data = percents({"A": (0.9,), "B": (0.8,)})
    coloured = bar_lines(data, 40, 8)
    styles = [str(s.style) for line in coloured[1:] for s in line.spans if "█" in
              line.plain[s.start:s.end]]
    assert styles == ["bright_blue", "bright_green"]  # the first two: blue+, green+
    plain = bar_lines(data, 40, 8, no_color=True)
    assert not [s for line in plain[1:] for s in line.spans if "█" in line.plain[s.start:s.end]
                and s.style]
