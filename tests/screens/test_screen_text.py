"""Text on the screen is shown as written: key hints in brackets, key names as keys."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button, Static

from console.ui.screens.modals import ConfirmScreen, HelpScreen, WatchdogScreen
from tests.support.static_app import build
from tests.support.waits import wait_for


async def test_key_hints_and_names_are_literal(tmp_path: Path) -> None:
    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready)
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = str(app.screen.query_one(Static).render())
        assert "question_mark" not in text
        assert "  ?" in text and "ctrl+r / f5" in text
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.press("f")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen)
                              and len(app.screen.query(Button)) == 2)
        labels = [str(b.label) for b in app.screen.query(Button)]
        assert labels == ["Yes [y]", "No [n]"], labels
        await pilot.press("n")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        app.push_screen(WatchdogScreen(True, None, 0.0))
        assert await wait_for(pilot, lambda: isinstance(app.screen, WatchdogScreen)
                              and len(app.screen.query(Button)) == 4)
        labels = [str(b.label) for b in app.screen.query(Button)]
        # armed, no extension: only what can be done now (no "arm", no "end the extension")
        assert labels == ["[1] +1 h", "[2] +2 h", "[d] disarm (nothing stops the pod)",
                          "[s] stop the pod now"], labels
        await pilot.press("escape")


def test_remote_text_with_brackets_is_not_markup(tmp_path: Path) -> None:
    from rich.console import Console

    from console.model.snapshot import SlotSnapshot
    from console.ui.screens.detail import figures_table

    snap = SlotSnapshot(slot="S", served_model_name="m[/]x", port=1, url="u", health="down",
                        health_detail="HTTP 502 [bold]bad gateway[/bold] [/]",
                        served_models=("m[/]x",))
    con = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    con.print(figures_table(snap, 0.0))  # "[/]" as markup would raise
    out = con.export_text()
    assert "[bold]bad gateway[/bold] [/]" in out and "m[/]x" in out


async def test_failed_operation_is_an_event_and_ack_is_audited(tmp_path: Path) -> None:
    from console.ui.screens.alerts import AlertHistoryScreen
    from console.ui.screens.main import MainScreen
    from console.ui.screens.modals import ProgressScreen

    app = build(tmp_path, down_slot=True)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and app.alerts.firing())
        firing = {a.key for a in app.alerts.firing()}
        assert "down:Q27" in firing or any(k.startswith("down:") for k in firing), firing
        # fallback with no RunPod configured: fails, and is an event, not an alert
        await pilot.press("f")
        assert await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        assert await wait_for(pilot, lambda: any(e.kind == "failed"
                                                 for e in app.alerts.history))
        assert not any(k.startswith("action:") for k in app.alerts.active)
        assert await wait_for(pilot, lambda: isinstance(app.screen, ProgressScreen)
                              and app.screen.done)
        # the dialog itself says how it ended, and how long it took
        from textual.widgets import Label

        step = str(app.screen.query_one("#pstep", Label).content)
        assert "FAILED" in step and "RunPod is not configured" in step, step
        assert "took" in str(app.screen.query_one("#pelapsed", Label).content)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        # a: acknowledge, recorded in the audit log with who did it
        await pilot.press("a")
        assert await wait_for(pilot, lambda: all(a.acked_by for a in app.alerts.firing()))
        rec = [r for r in app.ctx.registry.audit.records() if r["action"] == "ack"]
        assert [r["result"] for r in rec] == ["started", "ok"] and rec[0]["user"]
        # A: the history, newest first, names all three kinds of event
        await pilot.press("A")
        assert await wait_for(pilot, lambda: isinstance(app.screen, AlertHistoryScreen))
        text = str(app.screen.query_one("#aevents", Static).render())
        assert "FAILED" in text and "Fallback provisioning failed" in text
        assert "ACK" in text and "FIRED" in text
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))


async def test_preflight_says_why_before_asking(tmp_path: Path) -> None:
    from console.ui.widgets.panels import ActionLog

    app = build(tmp_path)  # the pod is RUNNING; no agent is configured
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready)
        log = app.screen.query_one(ActionLog)
        for key, why in (("r", "already RUNNING"), ("h", "no pod agent configured"),
                         ("b", "no pod agent configured"), ("w", "no pod agent configured")):
            await pilot.press(key)
            assert await wait_for(pilot, lambda why=why: why in log.lines[-1].plain), key
            assert not isinstance(app.screen, ConfirmScreen), key
        assert not app.ctx.registry.executed  # nothing ran, nothing was asked


async def test_refresh_rate_changes_at_run_time_and_help_has_a_column_legend(
        tmp_path: Path) -> None:
    from console.model import catalog

    app = build(tmp_path)  # refresh_s 5
    # wide enough for the refresh rate, the header's last field but P2P (issue 47)
    async with app.run_test(size=(240, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready)
        lines_before = len(app.log_lines)
        await pilot.press("plus")
        assert await wait_for(pilot, lambda: app.refresh_s == 2.0)
        assert app.poller.timeout_s < 2.0  # requests still end inside the interval
        # the header says the rate; the action log gets no line per press (issue 30 #11)
        from console.ui.widgets.header import PodHeader

        header = app.screen.query_one(PodHeader)
        assert await wait_for(pilot, lambda: "refresh 2s" in str(header.render()))
        assert not any("refresh every" in text for _, text, _ in
                       list(app.log_lines)[lines_before:])
        await pilot.press("minus")
        await pilot.press("minus")
        assert await wait_for(pilot, lambda: app.refresh_s == 10.0)
        await pilot.press("question_mark")
        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = str(app.screen.query_one(Static).render())
        for fig, col in catalog.columns():
            assert col.header in text, col.header
            assert catalog.describe(fig).split("; yellow ")[0] in text, col.header
        # the threshold that colours TTFT p95 as the value in force (its setting's
        # default), not the config key that sets it
        limit = app.ctx.settings.thresholds_for("FLASH").ttft_p95_s
        assert f"TTFT p95  p95 of vllm:time_to_first_token_seconds over the window; " \
               f"yellow above {limit:.1f}s" in text, text


def _fill_of(svg: str, word: str) -> str:
    import re

    styles = dict(re.findall(r"\.(terminal-\d+-r\d+) \{ fill: (#[0-9a-f]{6})", svg))
    m = re.search(r'<text class="(terminal-\d+-r\d+)"[^>]*>[^<]*' + word, svg)
    assert m, word
    return styles[m.group(1)]


async def test_the_selected_row_keeps_its_state_colour(tmp_path: Path) -> None:
    from console.ui.widgets.slots import SlotsTable

    app = build(tmp_path, down_slot=True)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready)
        table = app.screen.query_one(SlotsTable)
        table.focus()
        down_row = table.slots.index("Q27")
        table.move_cursor(row=1 - down_row)
        await pilot.pause()  # its refresh handled (a turn of the loop, not a delay)
        away = _fill_of(app.export_screenshot(), "DOWN")
        table.move_cursor(row=down_row)
        await pilot.pause()
        under = _fill_of(app.export_screenshot(), "DOWN")
        assert under == away, (under, away)


def test_plot_ticks_are_round_and_labelled_with_the_digits_they_need() -> None:
    from console.ui.widgets.plot_widgets import nice_ticks, tick_label

    for lo, hi in ((0.8, 1.0), (0.0, 3.5), (54.0, 66.0), (0.98751, 0.98758), (5.0, 5.0)):
        ticks = nice_ticks(lo, hi)
        assert 2 <= len(ticks) <= 6 and ticks[0] <= lo and ticks[-1] >= hi, (lo, hi, ticks)
        labels = [tick_label(v, ticks[1] - ticks[0]) for v in ticks]
        assert len(set(labels)) == len(labels), labels  # no two ticks read the same
        assert all(len(x) <= 8 for x in labels), labels  # never 0.987500000000000044


async def test_plots_have_a_clock_axis_and_no_empty_axes(tmp_path: Path) -> None:
    import time as _time

    from console.model.history import History
    from console.ui.widgets.plot_widgets import SeriesPlot

    app = build(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and app.screen.query(SeriesPlot))
        plot = app.screen.query(SeriesPlot).first()
        now = app.now()
        plot.show(app.history, ["FLASH", "Q27"], now, force=True)
        drawn = plot.text
        # the right end of the time axis is the last poll
        assert plot.drawn is not None
        assert _time.strftime("%H:%M:%S", _time.localtime(plot.drawn.end)) in drawn
        # without colour the second series has a glyph of its own
        import os as _os

        _os.environ["NO_COLOR"] = "1"
        try:
            plot.show(app.history, ["FLASH", "Q27"], now, force=True)
            assert "•" in plot.text
        finally:
            del _os.environ["NO_COLOR"]
        plot.show(History(3600, 1), ["FLASH"], now, force=True)
        empty = plot.text
        assert "waiting for data" in empty and "┤" not in empty and "-1" not in empty


async def test_full_action_log_scrolls_and_filters(tmp_path: Path) -> None:
    from textual.widgets import Input, RichLog

    from console.ui.screens.log import LogScreen
    from console.ui.screens.main import MainScreen

    app = build(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.ready)
        for i in range(60):
            app.note(f"line {i} {'[bold]needle[/]' if i % 20 == 0 else 'hay'}")
        await pilot.press("L")
        assert await wait_for(pilot, lambda: isinstance(app.screen, LogScreen))
        log = app.screen.query_one("#llog", RichLog)
        assert await wait_for(pilot, lambda: len(log.lines) >= 60)
        await pilot.press("slash")
        assert await wait_for(pilot, lambda: app.screen.query_one("#lsearch", Input).has_focus)
        for ch in "needle":
            await pilot.press(ch)
        assert await wait_for(pilot, lambda: len(log.lines) == 3)
        assert all("[bold]needle[/]" in line.text for line in log.lines)  # never markup
        app.note("a new needle arrives")
        assert await wait_for(pilot, lambda: len(log.lines) == 4)
        await pilot.press("escape")  # clears the filter
        assert await wait_for(pilot, lambda: len(log.lines) >= 61)
        await pilot.press("escape")  # back
        assert await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))


def test_operation_arguments_read_as_sentences() -> None:
    from console.ui.operation_flow import args_text

    assert args_text({"set": {"FLASH": 0.7, "Q27": 0.25}}) == "FLASH → 0.70, Q27 → 0.25"
    assert args_text({"cmd": "arm"}) == "arm"
    assert "{" not in args_text({"set": {"A": 0.1}, "cmd": "x"})


async def test_wall_board_reads_from_across_the_room_at_80x24_and_220x60(
        tmp_path: Path) -> None:
    from textual.widgets import Digits

    from console.ui.widgets.board import Metric, PodCard, SlotCard
    from console.ui.widgets.panels import AlertsPanel

    for size in ((80, 24), (220, 60)):
        app = build(tmp_path / f"{size[0]}", wall=True, down_slot=True)
        async with app.run_test(size=size) as pilot:
            assert await wait_for(pilot, lambda app=app: app.ready and app.alerts.firing())
            assert await wait_for(pilot, lambda app=app: {
                c.slot for c in app.screen.query(SlotCard)} == {"FLASH", "Q27"} and all(
                    m.query_one(Digits).value for m in app.screen.query(Metric)))
            cards = {c.slot: c for c in app.screen.query(SlotCard)}
            assert set(cards) == {"FLASH", "Q27"}
            flash_ttft = cards["FLASH"].query_one(".m-ttft_p95_s", Metric)
            # a p95 is a rate over two polls: "-" until the second one (a loaded machine
            # may paint the first poll's board before the second one lands)
            assert await wait_for(pilot, lambda m=flash_ttft: m.query_one(Digits).value != "-")
            assert flash_ttft.query_one(Digits).value == "2.0"  # 2.05 s, past its 2 s
            assert flash_ttft.has_class("warn")
            # the down slot shows no live-looking numbers
            assert all(m.query_one(Digits).value == "-" for m in cards["Q27"].query(Metric))
            assert "DOWN" in str(cards["Q27"].query_one(".title").content)
            assert app.screen.query_one(PodCard).query_one(".m-cost", Metric).query_one(
                Digits).value == "$4.18"
            # the alerts stay on screen whatever the height
            panel = app.screen.query_one(AlertsPanel)
            assert panel.region.height > 0 and panel.region.bottom <= size[1] - 1, size
            assert "Q27 down" in panel.text


async def test_main_table_colours_follow_a_per_slot_threshold(tmp_path: Path) -> None:
    """A threshold set for one slot in config.yaml colours that slot's cell on the main
    screen (not only its alert): FLASH's limit is raised past its TTFT, Q27 keeps 0.5 s."""
    from console.config.settings import SlotThresholds
    from console.ui.widgets.slots import SlotsTable

    app = build(tmp_path, thresholds={"FLASH": SlotThresholds(ttft_p95_s=60.0),
                                      "default": SlotThresholds(ttft_p95_s=0.5)})
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and app.snapshot is not None)
        table = app.screen.query_one(SlotsTable)
        assert await wait_for(pilot, lambda: len(table.slots) == 2)
        styles = {}
        for slot in ("FLASH", "Q27"):
            cells = table._last_rows[slot]
            from console.ui.widgets.slots import COLUMNS

            by_key = {k: c for (k, _, _), c in zip(COLUMNS, cells, strict=True)}
            styles[slot] = str(by_key["ttft_p95_s"].style)
        assert "warn" not in styles["FLASH"], styles
        assert "warn" in styles["Q27"], styles


async def test_sort_by_column_and_filter_the_slots(tmp_path: Path) -> None:
    """htop's keys: > and < choose the sort column, I inverts it; / filters (k9s)."""
    from console.ui.widgets.slots import SlotsTable

    app = build(tmp_path, down_slot=True)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and app.snapshot is not None)
        table = app.screen.query_one(SlotsTable)
        # worst first from the start: the down slot on top, HEALTH marked ascending
        assert await wait_for(pilot, lambda: table.slots == ["Q27", "FLASH"])
        assert table.sort_key == "health" and "HEALTH▲" in table._header.plain
        while table.sort_key != "slot":  # the first column: SLOT
            await pilot.press("greater_than_sign")
        assert table.slots == ["FLASH", "Q27"]
        # ▲ ascending, beside the label (never over it); I inverts to ▼
        assert "SLOT▲" in table._header.plain
        await pilot.press("I")
        assert table.slots == ["Q27", "FLASH"] and "SLOT▼" in table._header.plain
        await pilot.press("I")
        # on to HEALTH: the down slot first (worst first)
        while table.sort_key != "health":
            await pilot.press("greater_than_sign")
        assert table.slots == ["Q27", "FLASH"]
        # a figure column: the down slot has none and sorts last, whichever way
        while table.sort_key != "ttft_p95_s":
            await pilot.press("greater_than_sign")
        assert table.slots == ["FLASH", "Q27"]
        await pilot.press("I")
        assert table.slots == ["FLASH", "Q27"]
        await pilot.press("less_than_sign")
        assert table.sort_key != "ttft_p95_s"
        # / filters by name or model, any case; escape clears
        await pilot.press("slash")
        assert await wait_for(pilot, lambda: app.focused is not None
                              and app.focused.id == "filter")
        for ch in "q27":
            await pilot.press(ch)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: table.slots == ["Q27"])
        # the filter kept under the rows, whole (the header's right end is cut first)
        assert table.crumb().plain == "filter /q27: 1 of 2 slots · esc clears"
        assert app.focused is table
        await pilot.press("slash")
        assert await wait_for(pilot, lambda: app.focused is not None
                              and app.focused.id == "filter")
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: sorted(table.slots) == ["FLASH", "Q27"])
        assert not table.filter and table.get_content_height(None, None, 160) == 3  # type: ignore[arg-type]
        assert app.focused is table
        # the help lists the keys
        await pilot.press("question_mark")
        from console.ui.screens.modals import HelpScreen

        assert await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = " ".join(str(w.render()) for w in app.screen.query("*"))
        assert "sort by next column" in text and "filter slots" in text


async def test_todays_spend_survives_a_stop_and_a_resume(tmp_path: Path) -> None:
    """Finding 15: after a resume the header's "today" counted only the new run."""
    import re

    from msgspec.structs import replace

    from console.ui.widgets.header import PodHeader

    app = build(tmp_path)
    async with app.run_test(size=(200, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and app.pod is not None)

        def today() -> str:
            m = re.search(r"today (\$[0-9.,]+|–)", str(app.screen.query_one(PodHeader).render()))
            return m.group(1) if m else ""

        assert await wait_for(pilot, lambda: today().startswith("$"))
        before = today()
        assert before not in ("$0.0", "")
        pods = app.ctx.pod_collector
        running = pods.pod
        pods.pod = replace(running, status="EXITED", cost_per_hr=0.0)
        app.action_refresh_now()
        assert await wait_for(pilot, lambda: app.pod is not None and app.pod.status == "EXITED"), (
            app.session.poll_failure, app.pod and app.pod.status)
        assert await wait_for(pilot, lambda: today() == before), today()
        pods.pod = replace(running, started_at=running.fetched_at)  # resumed just now
        app.action_refresh_now()
        assert await wait_for(pilot, lambda: app.pod.started_at == running.fetched_at)
        assert await wait_for(pilot, lambda: today() == before), today()
    # and the next console (a restart) still knows the morning's run
    assert (tmp_path / "spend.json").exists()


async def test_wall_board_follows_the_slots_polled_now(tmp_path: Path) -> None:
    """A fallback to another profile brings other slots: the board shows those, and no
    card for a slot that is no longer there."""
    from msgspec.structs import replace

    from console.ui.widgets.board import SlotCard

    app = build(tmp_path, wall=True)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.ready and app.snapshot is not None)
        assert await wait_for(pilot, lambda: {c.slot for c in app.screen.query(SlotCard)}
                              == {"FLASH", "Q27"})
        poller = app.ctx.poller
        big = replace(poller.snap.slots[0], slot="BIG", served_model_name="big-model")
        poller.snap = replace(poller.snap, slots=(big,))
        app.session.refresh_now()  # (a viewer's ctrl+r on a wall waits a second)
        assert await wait_for(pilot, lambda: {c.slot for c in app.screen.query(SlotCard)}
                              == {"BIG"})
        card = next(iter(app.screen.query(SlotCard)))
        assert await wait_for(pilot, lambda: "BIG" in str(card.query_one(".title").content))
