"""Issue 32, item 5: replay computes every figure from the stored samples with the
poller's own code, so a figure plotted since a recording was made is drawn on it too.
The gateway's reading (issue 34: the real LiteLLM capture, its counters growing too) is
stored each poll and read back equal.

The console's ``DeploymentPoller`` reads the real vLLM 0.32 exposition
(``tests/fixtures``), its counters growing poll by poll (the HTTP fetch is the only part
replaced); a real recorder writes each poll as the session hands it over."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from console.model.history import History
from console.session.record import store
from console.session.record.reader import SqliteTape
from console.session.record.store import PollItem, Recorder
from console.session.view import ConsoleState, ConsoleView
from console.sources.collect import poller as poller_mod
from console.sources.collect.exposition import ParseMemo, parse
from console.sources.collect.poller import PLOTTED, DeploymentPoller
from console.sources.collect.slot import FAMILIES, SlotProbe
from console.sources.collect.targets import SlotTarget
from tests.conftest import REPO

TEXT = (REPO / "tests/fixtures/vllm-0.32.0-cpu/plain/metrics-after-load.txt").read_text()
GW_TEXT = (REPO / "tests/fixtures/litellm_metrics.txt").read_text()
GW_GROWS = re.compile(r"^(litellm_\S*(?:_total|_bucket|_count|_sum)(?:\{[^}]*\})?) (\S+)$",
                      re.M)
GROWS = re.compile(r"^(vllm:\S*(?:_total|_bucket|_count|_sum)(?:\{[^}]*\})?) (\S+)$", re.M)
T0 = 1_796_000_000.0


def _scrape(k: int) -> str:
    """The capture with every counter and histogram grown by k %: a server at work."""
    return GROWS.sub(lambda m: f"{m[1]} {float(m[2]) * (1 + 0.01 * k)!r}", TEXT)


def _gateway_scrape(k: int) -> str:
    """The LiteLLM capture with its counters grown by k % (users, deployments, buckets)."""
    return GW_GROWS.sub(lambda m: f"{m[1]} {float(m[2]) * (1 + 0.01 * k)!r}", GW_TEXT)


async def _record(tmp: Path, monkeypatch: pytest.MonkeyPatch, polls: int = 80,
                  step: float = 2.0) -> tuple[Path, list[ConsoleState], History]:
    import datetime as dt

    from console.config.settings import GatewaySettings
    from console.sources.collect import gateway as gw_mod

    clock = [T0]
    gw = gw_mod.GatewayCollector("http://127.0.0.1:4000", GatewaySettings(), 60.0, 1.0,
                                 zone=dt.UTC)
    target = SlotTarget("MAIN", "tiny-main", 8000, "http://127.0.0.1:8000", (0,), 0.5)
    n = [0]

    async def probe(client, t, timeout, api_key=None, metrics=True, memo=None):  # type: ignore[no-untyped-def]
        n[0] += 1
        exp = parse(_scrape(n[0]), FAMILIES, t.served_model_name, memo or ParseMemo())
        return SlotProbe(t, clock[0], "up", "200", (t.served_model_name,), exp, None)

    monkeypatch.setattr(poller_mod, "probe_slot", probe)
    history = History(3600.0, 2.0)
    p = DeploymentPoller("p", (target,), window_s=60.0, history=history,
                         probe_interval_s=1e12, clock=lambda: clock[0])
    view = ConsoleView("p", (target,), False, False, 2.0, 30.0)
    rec = Recorder(tmp, {"profile": "p", "window_s": 60.0, "history_s": 3600.0},
                   clock=lambda: clock[0], chunk_polls=25)
    live = []
    for _ in range(polls):
        snap = await p.poll()
        reading = gw.read(parse(_gateway_scrape(len(live)), gw_mod.FAMILIES), clock[0])
        st = ConsoleState(view=view, ready=True, now=clock[0], snapshot=snap, pod=None,
                          alerts=(), stale=None, history=history, allowed=frozenset(),
                          polled_at=clock[0], gateway=reading, idle_source="both",
                          active_window_s=1800.0)
        assert rec.poll(PollItem(st, p.last_read))
        live.append(st)
        clock[0] += step
        if len(live) % 100 == 0:  # a loop this fast outruns the writer's queue (256)
            assert await asyncio.to_thread(rec.flush)
    assert await asyncio.to_thread(rec.flush)
    await asyncio.to_thread(rec.close)
    assert rec.path is not None
    return rec.path, live, history


async def test_every_figure_rebuilt_from_the_samples(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path, live, history = await _record(tmp_path, monkeypatch)
    tape = SqliteTape(path)
    for i, st in enumerate(live):
        got = tape.state_at(i)
        assert got.snapshot == st.snapshot
        # the gateway as the live state had it: figures, deployments, users
        assert got.gateway == st.gateway and got.gateway is not None
        assert (got.idle_source, got.active_window_s) == ("both", 1800.0)
        how = tape.record(i)[0]["fig"]["MAIN"]
        assert how == ["d"]  # from the samples: the figures are not in the file
    assert live[-1].snapshot is not None and live[-1].snapshot.slots[0].kv_p99 is not None
    # the plots of the last poll: the live history's points, each series
    last = tape.state_at(len(live) - 1).history
    for metric in PLOTTED:
        assert last.series("MAIN", metric).points == history.series("MAIN", metric).points


async def test_polls_faster_than_the_refresh_replay_their_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Polls 0.1 s apart (``refresh now`` pressed, a test's loop): a 60 s window's far end
    is ~600 polls back, more than the keyframe walk's bound. Replay seeks it (CI found
    "corrupt (a window's far end of poll 260 refers to 19)" on the demo's recording)."""
    from console.session.record.reader import MAX_BACK_POLLS

    polls = 700
    path, live, _ = await _record(tmp_path, monkeypatch, polls=polls, step=0.1)
    tape = SqliteTape(path)
    far = [i - tape.record(i)[0]["raw"]["MAIN"][5] for i in range(polls)
           if tape.record(i)[0]["raw"]["MAIN"][5] is not None]
    assert max(far) > MAX_BACK_POLLS  # the premise
    for i in (polls - 1, polls // 2, MAX_BACK_POLLS + 5):
        assert tape.state_at(i).snapshot == live[i].snapshot, i


async def test_a_figure_plotted_since_is_drawn_on_an_old_recording(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new = "ttft_p95_s"
    assert new in PLOTTED
    # the recording is made by a console whose catalog did not plot it yet
    monkeypatch.setattr(store, "PLOTTED", tuple(k for k in PLOTTED if k != new))
    real = store.plotted_values
    monkeypatch.setattr(store, "plotted_values",
                        lambda f: {k: v for k, v in real(f).items() if k != new})
    path, live, history = await _record(tmp_path, monkeypatch)
    monkeypatch.undo()
    tape = SqliteTape(path)
    assert new not in tape.meta["plotted"]
    old = tape.state_at(len(live) - 1).history
    want = history.series("MAIN", new).points
    assert want and old.series("MAIN", new).points == want


async def test_figures_from_prometheus_rebuilt_from_its_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Prometheus, what it answered is stored, and the figures are made from the
    answers again by ``figures_from_answers``."""
    from tests.unit.test_deployment import OLD, PODS, FakePrometheus

    prom = FakePrometheus()
    await prom.start()
    clock = [T0]
    model = PODS[OLD].model
    target = SlotTarget("MAIN", model, 8000, "http://127.0.0.1:8000", (0,), 0.5)

    async def probe(client, t, timeout, api_key=None, metrics=True, memo=None):  # type: ignore[no-untyped-def]
        return SlotProbe(t, clock[0], "up", "200", (t.served_model_name,), None, None)

    monkeypatch.setattr(poller_mod, "probe_slot", probe)
    p = DeploymentPoller("p", (target,), prometheus_url=prom.url, window_s=60.0,
                         prom_selector=f'{{pod="{OLD}"}}', probe_interval_s=1e12,
                         clock=lambda: clock[0])
    view = ConsoleView("p", (target,), False, False, 2.0, 30.0)
    rec = Recorder(tmp_path, {"profile": "p", "window_s": 60.0}, clock=lambda: clock[0])
    live = []
    try:
        for _ in range(5):
            snap = await p.poll()
            st = ConsoleState(view=view, ready=True, now=clock[0], snapshot=snap, pod=None,
                              alerts=(), stale=None, history=History(), allowed=frozenset(),
                              polled_at=clock[0])
            assert rec.poll(PollItem(st, p.last_read))
            live.append(st)
            clock[0] += 2.0
        assert await asyncio.to_thread(rec.flush)
    finally:
        await asyncio.to_thread(rec.close)
        await p.aclose()
        assert prom.server is not None
        prom.server.close()
    assert rec.path is not None
    tape = SqliteTape(rec.path)
    for i, st in enumerate(live):
        assert st.snapshot is not None and st.snapshot.slots[0].source == "prometheus"
        assert st.snapshot.slots[0].figures is not None
        assert tape.record(i)[0]["fig"]["MAIN"][0] == "p"
        assert tape.state_at(i).snapshot == st.snapshot
        # the poll's one evaluation instant is kept with it: the replay reads it again
        at = st.snapshot.slots[0].figures.at
        assert at is not None and tape.record(i)[0]["fig"]["MAIN"][2] == at
        replayed = tape.state_at(i).snapshot
        assert replayed is not None and replayed.slots[0].figures is not None
        assert replayed.slots[0].figures.at == at
