"""The GPU exporter is on the pod's public port (issue 31, finding 14): idle and slow
connections are cut off after the header timeout, the threads they hold stay bounded,
and a real scrape is still answered, in bounded time, while hundreds of them are open."""

from __future__ import annotations

import http.client
import importlib.util
import socket
import threading
import time

import pytest

from pod_agent.exporter import Exporter
from tests.conftest import FIXTURES, REPO
from tests.support.waits import holds_within

IDLE = 400


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NVML_CAPTURE", str(FIXTURES / "nvml-h200x2" / "nvml-load.json"))
    monkeypatch.setenv("FAKE_NVML_STEADY", "1")
    monkeypatch.setenv("FAKE_NVML_FAULTS", str(tmp_path))
    monkeypatch.delenv("FAKE_NVIDIA_SMI_GPUS", raising=False)
    spec = importlib.util.spec_from_file_location(
        "fake_pynvml_conn", REPO / "console" / "demo" / "fakenvml" / "pynvml.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.nvmlInit()
    yield mod
    mod.nvmlShutdown()


@pytest.fixture
def serving(fake):
    """An exporter serving (the serving loop polls every 0.1 s), with a short header
    timeout so the test sees it act."""
    ex = Exporter("127.0.0.1", 0, 0.5, None, nvml=fake, max_connections=16,
                  header_timeout_s=2.0)
    t = threading.Thread(target=ex.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True)
    ex.start()
    t.start()
    yield ex
    ex.httpd.shutdown()
    t.join(10)
    ex.close()


def scrape(port: int, timeout_s: float = 10.0) -> tuple[int, float]:
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read()
        assert b"DCGM_FI_DEV_GPU_UTIL{" in body
        return r.status, time.monotonic() - t0
    finally:
        c.close()


def threads_serving() -> int:
    """Threads of the server's connections (named ``Thread-N (process_request_thread)``)."""
    return sum(1 for t in threading.enumerate() if "process_request_thread" in t.name)


def test_idle_connections_hold_no_unbounded_threads_and_a_scrape_gets_through(
        serving) -> None:
    port = serving.httpd.server_address[1]
    idle: list[socket.socket] = []
    try:
        for i in range(IDLE):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:  # half of them start a request and never finish its headers
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            idle.append(s)
            if i % 50 == 49:  # the serving loop accepts as they come
                assert serving.httpd.active <= 2 * serving.httpd.max_connections
        assert holds_within(lambda: serving.httpd.evicted + serving.httpd.refused
                            >= IDLE - 2 * serving.httpd.max_connections)
        # threads held: bounded by the cap (2x while evicted ones finish), not 400
        assert serving.httpd.active <= 2 * serving.httpd.max_connections
        assert threads_serving() <= 2 * serving.httpd.max_connections + 1
        # a real scrape is answered, promptly, with every idle connection still open
        for _ in range(3):
            status, took = scrape(port)
            assert status == 200 and took < 5.0, took
    finally:
        for s in idle:
            s.close()


def test_a_slow_sender_is_cut_off_at_the_header_timeout(serving) -> None:
    port = serving.httpd.server_address[1]
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        t0 = time.monotonic()
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
        closed_at = None
        # one header byte every 0.3 s: never idle long enough for a per-read timeout
        for byte in b"X-Slow: " + b"a" * 200:
            try:
                s.sendall(bytes([byte]))
            except OSError:
                closed_at = time.monotonic() - t0
                break
            s.settimeout(0.3)
            try:
                if s.recv(1) == b"":
                    closed_at = time.monotonic() - t0
                    break
            except TimeoutError:
                pass
        assert closed_at is not None, "the slow sender was never cut off"
        # header_timeout_s is 2 s; the serving loop checks every 0.1 s
        assert 1.5 <= closed_at < 6.0, closed_at
    finally:
        s.close()
    assert holds_within(lambda: serving.httpd.active == 0)
    assert scrape(port)[0] == 200


def test_an_idle_connection_is_closed_and_its_thread_ends(serving) -> None:
    port = serving.httpd.server_address[1]
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        assert holds_within(lambda: serving.httpd.active == 1)
        t0 = time.monotonic()
        assert s.recv(1) == b""  # the server closed it
        assert time.monotonic() - t0 < 6.0
    finally:
        s.close()
    assert holds_within(lambda: serving.httpd.active == 0)
