"""The real program in a real terminal (tmux): the live demo for a while, then the
terminal goes away and the program must exit instead of spinning."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.support.procs import alive, cmdline, descendants

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                                reason="tmux not installed")


def _tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30,
                          check=check).stdout


def _pane_pid(session: str) -> int:
    return int(_tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())




def _where(pid: int) -> str:
    """What a process that did not end is, and what it waits on (for the failure's text)."""
    from pathlib import Path

    out = []
    for name in ("stat", "wchan"):
        try:
            out.append(f"{name}: {Path(f'/proc/{pid}/{name}').read_text().strip()[:300]}")
        except OSError as exc:
            out.append(f"{name}: {exc}")
    kids = descendants(pid)
    out.append(f"children: {[(k, cmdline(k)[:120]) for k in kids]}")
    return "; ".join(out)


def _quit_with_q(session: str) -> None:
    _tmux("send-keys", "-t", session, "q")
    deadline = time.time() + 60
    while time.time() < deadline:
        time.sleep(0.5)
        if subprocess.run(["tmux", "has-session", "-t", session], capture_output=True,
                          timeout=10).returncode != 0:
            return
    raise AssertionError("q did not quit")


@pytest.mark.parametrize("term", ["xterm-256color", "screen-256color"])
def test_demo_in_tmux_then_hangup(term: str, tmp_path) -> None:
    session = f"podconsole-{os.getpid()}-{term.split('-')[0]}"
    env = (f"cd {REPO} && TERM={term} PYTHONPATH={REPO} "
           f"POD_CONSOLE_STATE_DIR={tmp_path / 'state'} exec {sys.executable} -m console.cli "
           f"demo --refresh 1 --seed 3")
    _tmux("new-session", "-d", "-s", session, "-x", "100", "-y", "30", env)
    pid = _pane_pid(session)
    try:
        # the live demo under each terminfo until it has drawn what its polls bring (the
        # UP rows, then both slots' live figures: TTFT in ms, KV %) and then a later poll
        # redrawn over that (a loaded machine may take a while: 240 s at the most); then
        # it hangs up. The palette stress test is the long-running one
        screen, up = _screen_until(session, lambda s: s.count("UP") >= 2, 240)
        assert up is not None, screen
        screen, live = _screen_until(session, _live_figures, 240)
        assert live is not None, screen
        before = _slot_rows(screen)
        screen, redrawn = _screen_until(session, lambda s: _live_figures(s)
                                        and _slot_rows(s) != before, 240)
        assert redrawn is not None, screen
        assert "DEMO" in screen and "FLASH" in screen and "Q27" in screen, screen
        assert "Traceback" not in screen
        assert "%" in screen  # live KV / acceptance figures on screen
        _tmux("kill-session", "-t", session)  # the terminal goes away: SIGHUP
        deadline = time.time() + 120  # it stops the demo's agent, slots and exporter first
        while time.time() < deadline and alive(pid):
            time.sleep(0.2)
        assert not alive(pid), ("the console kept running after its terminal went away: "
                                f"{_where(pid)}")
    finally:
        _tmux("kill-session", "-t", session, check=False)


def _slot_rows(screen: str) -> list[str]:
    """The slot table's rows (FLASH, Q27): what each poll redraws."""
    return [line for line in screen.splitlines() if line.split()[:1] in (["FLASH"], ["Q27"])]


def _live_figures(screen: str) -> bool:
    """Both slots' rows carry what only polls of live traffic bring: a TTFT in ms."""
    rows = _slot_rows(screen)
    return len(rows) >= 2 and all(re.search(r"\d+ms", r) and "%" in r for r in rows)


def test_no_color_and_16_colours(tmp_path) -> None:
    """NO_COLOR and a 16-colour terminal still show state by glyph and word."""
    session = f"podconsole-nc-{os.getpid()}"
    env = (f"cd {REPO} && TERM=xterm NO_COLOR=1 PYTHONPATH={REPO} "
           f"POD_CONSOLE_STATE_DIR={tmp_path / 'state'} exec {sys.executable} -m "
           f"console.cli demo --refresh 1 --seed 4")
    _tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "24", env)
    try:
        screen, _ = _screen_until(session, lambda s: s.count("UP") >= 2, 180)
        assert screen.count("UP") >= 2 and "DEMO" in screen, screen
        _quit_with_q(session)
    finally:
        _tmux("kill-session", "-t", session, check=False)


def test_watch_on_the_demo_numbers_first_then_everything(demo, tmp_path) -> None:
    """``pod-console watch`` (the staged start) in a real terminal: UP rows, then the pod
    state and the alerts once settings and profiles are validated; q quits. (The plots
    arriving is the pilot test's: tmux may size a detached window as it likes.)"""
    from console.demo.deployment import DEMO_KEY

    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {demo.profiles_dir}\nstate_dir: {tmp_path / 'state'}\n"
                   f"pod:\n  runpod_id: {demo.pod_id}\n  host: 127.0.0.1\n")
    session = f"podconsole-watch-{os.getpid()}"
    cmd = (f"cd {REPO} && TERM=xterm-256color PYTHONPATH={REPO} RUNPOD_API_KEY={DEMO_KEY} "
           f"RUNPOD_API_BASE={demo.emulator.base_url} exec {sys.executable} -m console.cli "
           f"watch --config {cfg} --refresh 1")
    _tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", cmd)
    try:
        deadline = time.time() + 180  # generous: it failed at 40 s on a loaded machine
        screen = ""
        while time.time() < deadline:
            time.sleep(1)
            screen = _tmux("capture-pane", "-p", "-t", session)
            if screen.count("UP") >= 2 and "RUNNING" in screen and "alerts (" in screen:
                break
        assert screen.count("UP") >= 2 and "RUNNING" in screen, screen
        assert "alerts (" in screen and "console started" in screen, screen
        assert "DEMO" not in screen and "Traceback" not in screen
        _quit_with_q(session)
    finally:
        _tmux("kill-session", "-t", session, check=False)


def test_a_terminal_closed_without_a_hangup_signal_ends_the_console(tmp_path) -> None:
    """The pty's other end is closed by a process that never made it our controlling
    terminal (a harness, a multiplexer that died): no SIGHUP comes, reads return end of
    file at once. The console must notice and exit, not spin at a full core."""
    import fcntl
    import select
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", PYTHONPATH=str(REPO),
               POD_CONSOLE_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "demo", "--refresh", "1",
                             "--seed", "5"], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=REPO, start_new_session=True, close_fds=True)
    os.close(slave)
    try:
        seen = b""
        deadline = time.time() + 240
        while time.time() < deadline and b"UP" not in seen:
            r, _, _ = select.select([master], [], [], 1.0)
            if r:
                try:
                    seen = (seen + os.read(master, 65536))[-8192:]
                except OSError:
                    break
        assert b"UP" in seen, seen[-2000:]
        os.close(master)
        master = -1
        proc.wait(timeout=120)  # a tick notices within a refresh; the demo then stops
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the demo stops what it started on the way out
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            raise AssertionError("the console kept running after its terminal was closed")


def _screen_until(session: str, cond, limit_s: float) -> tuple[str, float | None]:
    """Capture the pane every half second until ``cond(screen)``; (last screen, when)."""
    deadline = time.time() + limit_s
    screen = ""
    while time.time() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if cond(screen):
            return screen, time.time()
        time.sleep(0.5)
    return screen, None


LOG_LINE = re.compile(r"\d\d:\d\d:\d\d (ALERT|cleared:) ")
"""An action-log line about an alert (its time, then ALERT or cleared)."""


def test_clock_speed_keys_land_in_a_real_terminal(tmp_path) -> None:
    """``demo --clock-speed 60`` (docs/demo.md) typed by a person in a real terminal: the
    palette stops the traffic, the idle warning comes on screen, ``w 1 y`` (a second and
    a half per key) extends the pod through the real agent, the warning clears, and ``q``
    quits. The rest of the story — the extension running out, the watchdog's second
    warning kept ≥ 25 s before its stop at every phase of the console's reads, the one
    INFO of the stop and nothing loud, the resume's header — is told on a driven clock
    in tests/session/test_clock_speed_story.py, with the same agent, session and alert
    rules."""
    session = f"podconsole-speed-{os.getpid()}"
    state = tmp_path / "state"
    cmd = (f"cd {REPO} && TERM=xterm-256color PYTHONPATH={REPO} POD_CONSOLE_STATE_DIR={state} "
           f"exec {sys.executable} -m console.cli demo --refresh 1 --seed 5 --clock-speed 60")
    _tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", cmd)
    human = 1.5  # seconds between a person's keys

    def warned(s: str) -> bool:
        # the warning as the alerts panel shows it while it fires; the action log keeps
        # "ALERT pod stops in …" and "cleared: pod stops in …" lines on screen after it
        # cleared (a run once read its own "cleared" line as the warning still up)
        return any("pod stops in" in line and "w extends" in line
                   and not LOG_LINE.search(line) for line in s.splitlines())

    try:
        screen, up = _screen_until(session, lambda s: s.count("UP") >= 2, 240)
        assert up is not None, screen
        _tmux("send-keys", "-t", session, "C-p")
        time.sleep(human)
        _tmux("send-keys", "-t", session, "-l", "traffic stops")
        time.sleep(human)
        _tmux("send-keys", "-t", session, "Enter")
        screen, first = _screen_until(session, warned, 150)
        assert first is not None, screen
        assert "EXITED" not in screen, screen
        for key in ("w", "1", "y"):
            _tmux("send-keys", "-t", session, key)
            time.sleep(human)
        # extended in time: the agent said so, and the console wrote it down
        audit = state / "audit.jsonl"
        _, ok = _screen_until(session, lambda s: audit.exists() and any(
            '"cmd": "extend"' in line and '"result": "ok"' in line
            for line in audit.read_text().splitlines()), 60)
        assert ok is not None, audit.read_text() if audit.exists() else "no audit"
        _tmux("send-keys", "-t", session, "Escape")  # "✓ pod kept until …" read: closed
        # the extension answered the warning: the action log says it cleared (not a
        # dialog drawn over the alerts panel for a moment)
        screen, cleared = _screen_until(session, lambda s: not warned(s) and any(
            "cleared: pod stops in" in line for line in s.splitlines()), 60)
        assert cleared is not None, screen
        assert "EXITED" not in screen and "Traceback" not in screen, screen
        _quit_with_q(session)
    finally:
        _tmux("kill-session", "-t", session, check=False)
