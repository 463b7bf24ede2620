"""What the screens say of GPU faults and of the pod's stop (issue 30, findings 5 and 6),
from fixed ``ConsoleState``s: a GPU with an Xid is marked on its row and on the slots
it carries, heat says why the clock is down, and the header's STALE, "overdue",
planned stop and spend projection mean what they say. No process behind them."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from msgspec.structs import replace
from rich.text import Text
from textual.widgets import Label, Static

from console.model.snapshot import StopPlan
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.main import MainScreen
from console.ui.screens.modals import WatchdogScreen
from console.ui.widgets.header import PodHeader
from console.ui.widgets.slots import SlotsTable
from tests.screens import states
from tests.screens.host import ScreenHost, settle

SIZE = (160, 48)
NOW = states.NOW


def _plain(widget: Static) -> str:
    """What a Static shows, as text (a rich Table rendered as the screen would)."""
    import io

    from rich.console import Console

    r = widget.content
    if isinstance(r, Text):
        return r.plain
    console = Console(width=200, file=io.StringIO(), color_system=None)
    with console.capture() as cap:
        console.print(r)
    return cap.get()


def _rows(text: str) -> dict[str, str]:
    """The GPU table's lines by their GPU index."""
    out = {}
    for line in text.splitlines():
        head = line.split()
        if head and head[0].isdigit():
            out[head[0]] = line
    return out


def xid_state():
    return states.state(pod_=states.pod(gpus=states.gpus(xid_events=[states.XID_79])))


async def test_an_xid_marks_its_gpu_row_and_the_slots_on_it() -> None:
    st = xid_state()
    app = ScreenHost(lambda: GpuScreen(st))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rows = _rows(_plain(app.top.query_one("#gtable", Static)))
        # the numbers of GPU 0 still look healthy: its state says they are not
        assert "XID 79" in rows["0"] and "ok" not in rows["0"].split()[1]
        assert rows["1"].split()[1] == "ok"
    app = ScreenHost(lambda: MainScreen(st, states.log_lines()))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.top.query_one(SlotsTable)
        gpu_of = {slot: st.gpus[slot] for slot in table.slots}
        for slot in table.slots:
            health = table.get_row(slot)[table.columns.index("health")]
            if "0" in gpu_of[slot].split(","):
                assert health == "✖ XID 79", (slot, health)  # never "● UP"
            else:
                assert health == "● UP", (slot, health)
    assert st.gpu_marks == {0: "XID 79"}


async def test_heat_marks_its_gpu_and_says_why_the_clock_is_down() -> None:
    st = states.state(pod_=states.pod(gpus=states.hot_gpus(0)))
    throttle = [a for a in st.alerts if a.key == "throttle:0"]
    assert throttle and "SM 727/1980 MHz (thermal)" in throttle[0].detail
    app = ScreenHost(lambda: GpuScreen(st))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        rows = _rows(_plain(app.top.query_one("#gtable", Static)))
        assert "HOT" in rows["0"] and "727/1980 thermal" in rows["0"]
        assert "HOT" not in rows["1"]
    assert st.gpu_marks == {0: "HOT"}


def _header(st) -> str:
    """The header's text for a state, every segment (as a terminal wide enough shows)."""
    header = PodHeader(st.view.title, st.view.demo, st.view.read_only)
    stop = getattr(st, "stop", None)
    args = (st.pod, st.now, st.stale, st.operation) + ((None, stop) if stop else ())
    return " │ ".join(t.plain for _, t in header.segments(*args))


def test_one_dead_slot_is_not_a_stale_header() -> None:
    st = states.state(down=("Q27",))
    assert st.stale is None and "STALE" not in _header(st)
    every = states.state(down=tuple(states.profile().slots))
    assert every.stale is not None and every.stale.startswith("STALE since")


def test_a_planned_stop_says_stopped_at_not_stale_or_a_countdown() -> None:
    # the watchdog's idle stop, made 2 minutes ago; the pod is stopped
    plan = StopPlan.parse({"now": NOW, "stop_in_s": 29 * 60.0, "next_stop_reason": "idle",
                           "last_stop_reason": "idle", "last_stop": {
                               "reason": "idle", "at": NOW - 120, "by": "watchdog",
                               "ok": True, "detail": "stopped"}}, NOW)
    pod = states.pod(status="EXITED", stop_plan=plan, started_at=NOW - 3 * 3600)
    st = states.state(pod_=pod, down=tuple(states.profile().slots))
    text = _header(st)
    at = time.strftime("%H:%M", time.localtime(NOW - 120))
    assert f"stopped at {at} (idle)" in text, text
    assert "STALE" not in text and "stop in" not in text, text
    stopped = [a for a in st.alerts if a.key == "stopped"]
    assert [a.severity for a in stopped] == ["info"]
    assert not [a for a in st.alerts if a.key.startswith(("down:", "agent"))]


def test_overdue_only_when_the_stop_is_late() -> None:
    def header_at(left: float) -> str:
        plan = states.stop_plan(in_s=left)
        # the agent still answers: the stop has not been made
        return _header(states.state(pod_=states.pod(stop_plan=plan)))

    assert "stop in 6h00m" in header_at(6 * 3600.0)
    # just past its time: due (the watchdog acts at its next tick), not late
    assert "stop due now" in header_at(-60.0) and "overdue" not in header_at(-60.0)
    assert "stop overdue" in header_at(-400.0)


def test_no_stop_known_no_projection() -> None:
    pod = states.pod(stop_plan=None, next_stop=None, spent_earlier_today=10.0)
    text = _header(states.state(pod_=pod))
    assert "today $" in text and "→" not in text, text
    known = _header(states.state(pod_=states.pod(spent_earlier_today=10.0)))
    assert "→" in known  # a stop in 6 h: today's spend until then


async def test_the_watchdog_dialog_counts_on_the_headers_clock() -> None:
    """The pod's clock runs ×60 and reads hours apart from ours (the demo's): the dialog
    and the header still count the same minutes to the stop."""
    from console.operations.operation import OperationFacts
    from console.operations.ops.watchdog import ask

    pod_now = NOW - 5 * 3600.0  # the pod's clock, hours behind ours
    zone = dt.timezone(dt.timedelta(hours=9))
    next_stop = dt.datetime.fromtimestamp(pod_now + 1800, zone).isoformat()
    plan = StopPlan.parse({"now": pod_now, "stop_in_s": 1800.0, "clock_speed": 60.0,
                           "next_stop_reason": "idle", "clock_simulated": True}, NOW - 10)
    pod = states.pod(stop_plan=plan, next_stop=next_stop)
    st = states.state(pod_=pod)
    assert "stop in 20m (idle)" in _header(st)  # 30 min less 10 s ×60
    opened: list[WatchdogScreen] = []

    class Dialogs:
        async def choose_watchdog(self, armed, next_stop_, now, extension):
            opened.append(WatchdogScreen(armed, next_stop_, now, extension))
            return None

        async def choose_split(self, *a):
            return None

    facts = OperationFacts(NOW, pod, st.snapshot, states.settings(), st.view.profile_name,
                           states.profile(), st.view.targets, True)
    assert await ask(facts, {}, Dialogs()) is None  # type: ignore[arg-type]
    app = ScreenHost(lambda: opened[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        first = str(app.top.query(Label).first().render())
        assert "in 20m" in first and "overdue" not in first, first


def test_a_stop_being_made_is_stopping_not_overdue() -> None:
    plan = states.stop_plan(next_reason="idle", in_s=-30.0)
    pod = replace(states.pod(stop_plan=plan), agent_error="connection refused")
    st = states.state(pod_=pod, down=tuple(states.profile().slots))
    text = _header(st)
    assert "stopping (idle)" in text and "overdue" not in text and "STALE" not in text


def _restarting(state: str) -> object:
    """Q27 refused on /health while the agent reports ``state`` for it, with the phases
    of its last attempt (it died capturing CUDA graphs)."""
    agent = {n: {"gpu_util": s.gpu_util, "state": "ready"}
             for n, s in states.profile().slots.items()}
    agent["Q27"] = {"gpu_util": 0.19, "state": state,
                    "phases": [["loading weights", 40.0], ["capturing CUDA graphs", 1.0]],
                    "detail": "restart in 5 s (attempt 1)" if state == "backoff" else ""}
    return states.state(down=("Q27",), pod_=states.pod(agent_slots=agent))


async def test_a_dead_slot_says_down_on_its_row_its_card_and_its_alert() -> None:
    """Issue 47: a slot whose engine died and waits for its restart (the agent's
    ``backoff``) read ``GRAPH 1s`` on its row, a start-up phase of the attempt that died,
    while its alert said "Q27 down: connection refused". One state, one word: DOWN."""
    from console.ui.screens.wall import WallScreen
    from console.ui.widgets.board import SlotCard

    dead, starting = _restarting("backoff"), _restarting("starting")
    assert any(a.key == "down:Q27" for a in dead.alerts)
    assert not any(a.key == "down:Q27" for a in starting.alerts)
    for st, word in ((dead, "✖ DOWN"), (starting, "GRAPH 1s")):
        app = ScreenHost(lambda st=st: MainScreen(st, states.log_lines()))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            table = app.top.query_one(SlotsTable)
            assert table.get_row("Q27")[table.columns.index("health")] == word
        wall = ScreenHost(lambda st=st: WallScreen(replace(st, view=replace(
            st.view, read_only=True)), rotate_s=60))
        async with wall.run_test(size=SIZE) as pilot:
            await settle(pilot)
            card = next(c for c in wall.top.query(SlotCard) if c.slot == "Q27")
            title = str(card.query_one(".title").render())
            assert ("DOWN" if st is dead else "START") in title, title


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 48)])
async def test_the_gpu_table_is_a_line_a_gpu_with_why_it_is_hot_whole(size) -> None:
    """Issue 47: the GPU table wrapped the GPU's name onto 5 rows (``RTX / PRO / 6000 /
    Bla… / Ser…``) while the throttle reasons that explain HOT were cut to ``sw_…``. Now a
    line per GPU, the columns that do not fit left out whole (the name among the first),
    the state, heat and throttle reasons never."""
    from tests.support.snapshot_text import svg_rows

    st = states.state(pod_=states.pod(gpus=states.faulty_gpus()))
    app = ScreenHost(lambda: GpuScreen(st))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        rows = svg_rows(app.export_screenshot())
    top = next(i for i, r in enumerate(rows) if "─ GPUs ─" in r)
    end = next(i for i in range(top + 1, len(rows)) if rows[i].lstrip().startswith("╰"))
    body = [r.strip("│ ") for r in rows[top + 1:end]]
    assert len(body) == 1 + len(st.pod.gpus.gpus), body  # the header and a line a GPU
    hot = next(r for r in body if r.startswith("1 "))
    assert "ECC" in hot and "91°C" in hot and "thermal (sw), thermal (hw)" in hot, body
    assert "XID 79" in body[1] and "…" not in "".join(body), body
    if size[0] >= 160:  # the short name where there is room
        assert "RTX PRO 6000" in hot and "Blackwell" not in hot, body
