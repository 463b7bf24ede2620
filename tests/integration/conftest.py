"""Session-wide real servers: one vLLM (CPU) and one Prometheus scraping it.

Locally a missing part skips its tests; under CI (``CI`` set) it is an error,
so a green CI always means the real parts ran.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import prometheus_server, sshd, vllm_server
from tests.support.emulated_pods import World


def _need(ok: bool, what: str) -> None:
    if ok:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed; .ci/run must install it")
    pytest.skip(f"{what} not installed")


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[vllm_server.VllmServer]:
    _need(vllm_server.available(), "the vLLM CPU venv (tests/support/vllm_venv.sh)")
    srv = vllm_server.VllmServer(tmp_path_factory.mktemp("vllm"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def real_prometheus(tmp_path_factory: pytest.TempPathFactory,
                    real_vllm: vllm_server.VllmServer
                    ) -> Iterator[prometheus_server.PrometheusServer]:
    _need(prometheus_server.available(), "prometheus (Debian package)")
    srv = prometheus_server.PrometheusServer(tmp_path_factory.mktemp("prom"),
                                             [f"127.0.0.1:{real_vllm.port}"])
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def real_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sshd.SshServer]:
    _need(sshd.available(), "openssh-server (Debian package)")
    srv = sshd.SshServer(tmp_path_factory.mktemp("sshd"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _world(tmp_path: Path, **kw) -> Iterator[World]:
    w = World(tmp_path, **kw)
    w.server.start()
    try:
        yield w
    finally:
        w.server.stop()
        w.hosts.stop_all()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """The RunPod emulator whose pods are real SSH hosts running the real agent."""
    yield from _world(tmp_path)


@pytest.fixture
def slow_world(tmp_path: Path) -> Iterator[World]:
    """The same, with a slot that takes 60 s to come up: bring-up is still running when
    a test interrupts it."""
    yield from _world(tmp_path, startup_s=60)
