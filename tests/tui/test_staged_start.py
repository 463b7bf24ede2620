"""``watch``/``wall`` start staged: live numbers first, the validated context after.

Against the demo deployment (real agents, simulated slots) and through the same
``staged_start`` the CLI uses: the first frame shows the slots from the boot plan's
poll before settings and profiles are validated; then the context arrives in a
worker thread, reuses the poller and history, mounts the plots and starts pod state
and alerts. A profile that does not validate stops the console with file, line and
field on screen and exit status 1.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pyte
import pytest

from console.commands.tui_cmd import staged_start
from console.demo.deployment import DEMO_KEY
from console.session.boot import plan
from console.ui.widgets.plots import PlotGrid
from tests.conftest import PROFILES, REPO
from tests.support.waits import wait_for


@pytest.fixture
def demo_env(demo, tmp_path, monkeypatch) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {demo.profiles_dir}\nstate_dir: {tmp_path / 'state'}\n"
                   f"pod:\n  runpod_id: {demo.pod_id}\n  host: 127.0.0.1\n")
    monkeypatch.setenv("RUNPOD_API_KEY", DEMO_KEY)
    monkeypatch.setenv("RUNPOD_API_BASE", demo.emulator.base_url)
    for k in [k for k in os.environ if k.startswith("POD_CONSOLE_")]:
        monkeypatch.delenv(k)
    return cfg


def _slow(start, gate: threading.Event):
    """The same finish, held until the test has looked at the first frame."""
    real = start.finish

    def finish(poller, history):
        gate.wait(30)
        return real(poller, history)

    start.finish = finish
    return start


async def test_first_frame_before_the_context_then_the_context(demo, demo_env) -> None:
    from console.ui.app import make_app

    boot = plan(demo_env, 1.0)
    assert boot is not None and [t.slot for t in boot.targets] == ["FLASH", "Q27"]
    gate = threading.Event()
    start = _slow(staged_start(boot, demo_env, 1.0, False, 15.0), gate)
    app = make_app(start)
    async with app.run_test(size=(160, 48)) as pilot:
        try:
            assert await wait_for(pilot, lambda: app.snapshot is not None and all(
                s.health == "up" and s.figures for s in app.snapshot.slots), 30)
            # live numbers, and nothing validated yet: no pod state, no alerts, no plots
            assert not app.ready and app.pod is None and not app.alerts.sorted()
            table = app.screen.query_one("#slots")
            assert len(table.slots) == 2
            assert app.screen.query_one(PlotGrid).query(".plots-loading")
            assert app.allowed("host_checks")  # accepted; it waits for the registry
        finally:
            gate.set()
        assert await wait_for(pilot, lambda: app.ready, 30)
        assert app.ctx is not None and app.ctx.poller is start.poller  # data carried over
        assert app.ctx.history is start.history
        assert await wait_for(pilot, lambda: not app.screen.query_one(PlotGrid).query(
            ".plots-loading"), 10)
        assert await wait_for(pilot, lambda: app.pod is not None
                              and app.pod.status == "RUNNING", 20)
        assert app.ready_after_s is not None


async def test_a_key_pressed_while_loading_runs_once_loaded(demo, demo_env) -> None:
    from console.ui.app import make_app

    boot = plan(demo_env, 1.0)
    gate = threading.Event()
    app = make_app(_slow(staged_start(boot, demo_env, 1.0, False, 15.0), gate))
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: app.snapshot is not None, 30)
        await pilot.press("f")  # fallback: asks first, once the registry exists
        assert await wait_for(pilot, lambda: any("still loading" in text
                                                 for _, text, _ in app.log_lines), 10)
        assert type(app.screen).__name__ == "MainScreen"
        gate.set()
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", 30)
        await pilot.press("n")


async def test_wall_staged_is_read_only_before_and_after(demo, demo_env) -> None:
    from console.ui.app import make_app

    boot = plan(demo_env, 1.0)
    app = make_app(staged_start(boot, demo_env, 1.0, True, 0), wall=True)
    async with app.run_test(size=(160, 48)) as pilot:
        assert not app.allowed("host_checks") and not app.allowed("watchdog")
        assert await wait_for(pilot, lambda: app.ready, 30)
        assert app.ctx is not None and app.ctx.registry.read_only
        assert app.ctx.transport is None


def _broken_profiles(tmp_path: Path) -> tuple[Path, int]:
    prof = tmp_path / "profiles"
    prof.mkdir()
    lines = (PROFILES / "10-rtx6000-2x.yaml").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("port: 8881"))
    lines.insert(at + 1, "    colour: red")
    (prof / "10-rtx6000-2x.yaml").write_text("\n".join(lines) + "\n")
    return prof, at + 2


async def test_a_profile_that_does_not_validate_stops_with_file_line_field(tmp_path,
                                                                          monkeypatch) -> None:
    from console.ui.app import make_app

    prof, line = _broken_profiles(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"profiles_dir: {prof}\nstate_dir: {tmp_path / 's'}\n"
                   "pod:\n  host: 127.0.0.1\n  port_map: {8881: 1, 8882: 2}\n")
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    boot = plan(cfg, 1.0)
    assert boot is not None  # the fast reading does not validate: the thread does
    app = make_app(staged_start(boot, cfg, 1.0, False, 15.0))
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.fatal is not None, 30)
        assert f"10-rtx6000-2x.yaml:{line}: slots.FLASH.colour" in app.fatal
        assert type(app.screen).__name__ == "FatalScreen"
        await pilot.press("q")
        assert await wait_for(pilot, lambda: app.return_code is not None, 10)
    assert app.return_code == 1


def test_watch_through_the_cli_exits_1_with_the_problem(tmp_path) -> None:
    """The real program in a pty: the problem on screen, then on stderr, exit status 1."""
    prof, line = _broken_profiles(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"profiles_dir: {prof}\nstate_dir: {tmp_path / 's'}\n")
    master, slave = os.openpty()
    env = dict(os.environ, TERM="xterm-256color", PYTHONPATH=str(REPO))
    env.pop("RUNPOD_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "watch", "--config",
                             str(cfg)], stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    seen = b""
    sent = False
    try:
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
            if not sent and b"cannot start" in seen:
                os.write(master, b"q")
                sent = True
        assert proc.wait(60) == 1
        assert sent, seen[-2000:]
        # after the screen closes the problem stays on the terminal (wrapped at 80 columns)
        text = seen.decode("utf-8", "replace").replace("\r\n", "")
        assert f"10-rtx6000-2x.yaml:{line}: slots.FLASH.colour: unknown key" in text
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_the_first_frame_written_holds_the_table_with_the_rest(demo, demo_env) -> None:
    """Issue 47: the first frame the console writes is whole. Frames rendered while
    Textual's start-up batch is open are dropped, with the repaints they consumed: a main
    screen pushed then once had its next frame hold only what changed after (header,
    alerts, log, key bar) and the slot table a frame (~13 ms) later. Read as a terminal
    would: once the key bar is on screen, the table's header is too."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    # Textual takes COLUMNS and LINES over the terminal's size (a pytest worker has 80×24)
    env = dict(os.environ, TERM="xterm-256color", PYTHONPATH=str(REPO), COLUMNS="160",
               LINES="48")
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "watch", "--config",
                             str(demo_env), "--refresh", "2"], stdin=slave, stdout=slave,
                            stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    screen = pyte.Screen(160, 48)
    stream = pyte.ByteStream(screen)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if not select.select([master], [], [], 0.2)[0]:
                continue
            try:
                stream.feed(os.read(master, 65536))
            except OSError:
                break
            if "? help" in screen.display[-1]:
                shown = "\n".join(screen.display)
                assert any(line.split()[:2] == ["SLOT", "MODEL"]
                           for line in screen.display[1:6]), shown
                return
        raise AssertionError(f"the key bar never came (exit status {proc.poll()}):\n"
                             + "\n".join(screen.display))
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        os.close(master)
