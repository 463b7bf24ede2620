"""Waits on a condition, never on a fixed pause: the three shapes the screen and session
tests use, written once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

LIMIT_S = 30.0
"""Generous: a condition that holds at all holds within a second even on a loaded CI
machine; the limit only bounds a failure."""


async def until(pilot: Any, cond: Callable[[], bool], what: str,
                limit_s: float = LIMIT_S) -> None:
    """Let the app run until ``cond`` holds; fail naming ``what`` after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {limit_s} s: {what}")
        await pilot.pause(0.02)


PATIENCE = 3.0
"""For waits written with what a quiet machine needs: ``wait_for`` allows this many times
that (CI has 2 cores, sometimes shared)."""


async def wait_for(pilot: Any, cond: Callable[[], bool], timeout: float = 30.0) -> bool:
    """``pilot_until`` with ``timeout`` stretched by ``PATIENCE``."""
    return await pilot_until(pilot, cond, timeout * PATIENCE)


async def pilot_until(pilot: Any, cond: Callable[[], bool], timeout: float = LIMIT_S) -> bool:
    """As ``until``, saying whether it held (the caller's assert says what it wanted)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        await pilot.pause(0.02)
    return True


async def steps_until(cond: Callable[[], bool], limit: int = 1000) -> bool:
    """Let the loop run until ``cond`` holds, at most ``limit`` scheduling steps (no
    seconds: what is awaited is already done, only its callbacks are pending)."""
    for _ in range(limit):
        if cond():
            return True
        await asyncio.sleep(0)
    return cond()


async def until_true(cond: Callable[[], bool], what: str, limit_s: float = LIMIT_S) -> None:
    """As ``until``, without an app: the loop (and threads it waits on) run until
    ``cond`` holds; fail naming ``what`` after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {limit_s} s: {what}")
        await asyncio.sleep(0.02)


async def held_within(cond: Callable[[], bool], timeout_s: float = LIMIT_S) -> bool:
    """As ``until_true``, saying whether it held (the caller's assert says what it
    wanted)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.02)
    return cond()


def holds_within(cond: Callable[[], bool], timeout_s: float = LIMIT_S) -> bool:
    """As ``held_within``, for a test without a loop: the threads and processes it waits
    on run while this one sleeps between looks."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


async def polled_until(probe: Callable[[], Awaitable[T]], cond: Callable[[T], bool],
                       what: str, limit_s: float = LIMIT_S, every_s: float = 0.5,
                       say: Callable[[T], str] = repr) -> T:
    """Read ``probe`` (a poll, a status request) until what it returns meets ``cond``,
    ``every_s`` apart; that value, or a failure naming ``what`` and the last value (as
    ``say`` puts it) after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while True:
        value = await probe()
        if cond(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {limit_s} s: {what}; last: {say(value)}")
        await asyncio.sleep(every_s)


def held_by(cond: Callable[[], bool], what: str, limit_s: float = LIMIT_S,
            alive: Any = None) -> float:
    """As ``holds_within``, failing naming ``what`` after ``limit_s``, and at once when
    ``alive`` (a ``subprocess.Popen`` the condition waits on) has ended; the monotonic
    time at which ``cond`` was seen to hold (a test that measures how long it took)."""
    deadline = time.monotonic() + limit_s
    while not cond():
        if alive is not None:
            assert alive.poll() is None, f"{what}: the process ended: {alive.communicate()}"
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {limit_s} s: {what}")
        time.sleep(0.05)
    return time.monotonic()
