"""The demo's ports under ``POD_CONSOLE_DEMO_PORTS=LOW-HIGH`` (each test worker's own range,
below the kernel's ephemeral ports: tests/conftest.py): every pick is in the range, none
is one this process handed out before it went round the range, and a bound port is
skipped."""

from __future__ import annotations

import os
import socket

import pytest

from console.demo import deployment
from tests.conftest import DEMO_PORTS_EACH, DEMO_PORTS_FROM


def test_this_worker_has_a_range_of_its_own_below_the_ephemeral_ports() -> None:
    span = deployment._port_range()
    assert span is not None and len(span) == DEMO_PORTS_EACH
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    assert span.start == DEMO_PORTS_FROM + DEMO_PORTS_EACH * int(worker or 0)
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_from = int(f.read().split()[0])
    assert ephemeral_from >= DEMO_PORTS_FROM + 8 * DEMO_PORTS_EACH


def test_picks_stay_in_the_range_go_round_it_and_skip_a_bound_port(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a range of its own, not this worker's: nothing else here binds in it
    low = DEMO_PORTS_FROM + 8 * DEMO_PORTS_EACH
    monkeypatch.setenv("POD_CONSOLE_DEMO_PORTS", f"{low}-{low + 5}")
    monkeypatch.setattr(deployment, "_port_cursor", {})
    monkeypatch.setattr(deployment.random, "randrange", lambda n: 2)  # start at low + 2
    with socket.socket() as held:
        held.bind(("127.0.0.1", low + 3))  # a server already there
        held.listen()
        picks = [deployment._free_port() for _ in range(5)]
    assert picks == [low + 2, low + 4, low + 5, low, low + 1]
    assert not deployment._port_free(low)  # the profile's own ports are never taken here


def test_no_range_is_any_free_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_CONSOLE_DEMO_PORTS", "free")
    assert deployment._port_range() is None
    assert 0 < deployment._free_port() < 65536
