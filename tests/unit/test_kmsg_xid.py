"""The kernel-log Xid reader against hostile lines (issue 31, finding 17): a line with a
5,000-digit Xid code is skipped and counted, the reader goes on, and if the reader
ever dies the agent's status says so."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pod_agent import gpus
from pod_agent.gpu_monitor import GpuMonitor
from tests.support.waits import holds_within

VALID = b"4,1202,88124,-;NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', GPU has fallen off\n"


@pytest.fixture
def fake_nvml(monkeypatch):
    """The NVML stand-in on the two-H200 capture (GPU 0 is PCI 00:06)."""
    import importlib.util

    from tests.conftest import FIXTURES, REPO

    monkeypatch.setenv("FAKE_NVML_CAPTURE", str(FIXTURES / "nvml-h200x2" / "nvml-load.json"))
    monkeypatch.setenv("FAKE_NVML_STEADY", "1")
    monkeypatch.delenv("FAKE_NVML_FAULTS", raising=False)
    monkeypatch.delenv("FAKE_NVIDIA_SMI_GPUS", raising=False)
    spec = importlib.util.spec_from_file_location(
        "fake_pynvml_kmsg", REPO / "console" / "demo" / "fakenvml" / "pynvml.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.nvmlInit()
    yield mod
    mod.nvmlShutdown()


@pytest.fixture
def kmsg(tmp_path) -> Path:
    path = tmp_path / "kmsg"
    os.mkfifo(path)
    return path


def test_a_five_thousand_digit_xid_is_skipped_and_the_reader_goes_on(kmsg) -> None:
    seen: list[tuple[str, int]] = []
    reader = gpus.KmsgXids(lambda pci, code: seen.append((pci, code)), str(kmsg))
    reader.start()
    try:
        with open(kmsg, "wb") as w:
            w.write(b"4,1201,88123,-;NVRM: Xid (PCI:0000:00:07): " + b"9" * 5000
                    + b", pid=1, forged\n")
            w.write(b"4,1202,88123,-;NVRM: Xid (PCI:0000:00:07): 4294967296, forged\n")
            w.flush()
            w.write(VALID)
            w.flush()
            assert holds_within(lambda: seen), "the reader stopped at the long line"
        assert seen == [("00:06", 79)]
        assert reader.skipped == 2 and "out of range" in (reader.last_skipped or "")
        assert reader.error is None and reader.status_error is None
        assert reader._thread is not None and reader._thread.is_alive()
    finally:
        reader.stop()
    assert reader.status_error is None  # a stop asked for is no death


def test_a_report_that_fails_is_skipped_too(kmsg) -> None:
    calls: list[int] = []

    def flaky(pci: str, code: int) -> None:
        calls.append(code)
        if len(calls) == 1:
            raise OSError("disk full")

    reader = gpus.KmsgXids(flaky, str(kmsg))
    reader.start()
    try:
        with open(kmsg, "wb") as w:
            w.write(VALID)
            w.write(VALID.replace(b": 79,", b": 13,"))
            w.flush()
            assert holds_within(lambda: len(calls) == 2)
        assert reader.skipped == 1 and "disk full" in (reader.last_skipped or "")
        assert reader.status_error is None
    finally:
        reader.stop()


def test_status_says_when_the_reader_died(fake_nvml, kmsg, monkeypatch) -> None:
    """Whatever ends the thread, ``kmsg_error`` says so (it stayed None before)."""
    mon = GpuMonitor(lambda rec: None, sample_every_s=5, nvml=fake_nvml,
                     kmsg_path=str(kmsg))

    def boom() -> None:
        raise RuntimeError("a bug in the reader")

    monkeypatch.setattr(mon.kmsg, "_read", boom)
    mon.kmsg.start()
    try:
        assert holds_within(lambda: not mon.kmsg._thread.is_alive())
        doc = mon.status({})
        assert "kernel log reader stopped: RuntimeError: a bug in the reader" in \
            doc["kmsg_error"]
    finally:
        mon.stop()


def test_status_says_when_the_thread_ended_any_other_way(fake_nvml, kmsg) -> None:
    mon = GpuMonitor(lambda rec: None, sample_every_s=5, nvml=fake_nvml,
                     kmsg_path=str(kmsg))
    gone = threading.Thread(target=lambda: None)
    gone.start()
    gone.join()
    mon.kmsg._thread = gone  # a thread that ended without saying why
    try:
        assert mon.status({})["kmsg_error"] == "kernel log reader stopped unexpectedly"
    finally:
        mon.kmsg._thread = None
        mon.stop()


def test_status_counts_skipped_lines(fake_nvml, kmsg) -> None:
    mon = GpuMonitor(lambda rec: None, sample_every_s=5, nvml=fake_nvml,
                     kmsg_path=str(kmsg))
    mon.kmsg.start()
    try:
        with open(kmsg, "wb") as w:
            w.write(b"4,1,1,-;NVRM: Xid (PCI:0000:00:06): " + b"7" * 5000 + b"\n")
            w.write(VALID)
            w.flush()
            assert holds_within(lambda: mon.events)
        doc = mon.status({})
        assert doc["kmsg_error"] is None
        assert doc["kmsg_skipped"]["count"] == 1
        assert [e["xid"] for e in doc["xid_events"]] == [79]
    finally:
        mon.stop()


def test_an_xid_event_whose_report_fails_leaves_the_nvml_watch_running(
        fake_nvml, tmp_path, monkeypatch) -> None:
    """The same for NVML's event thread: one failed report is skipped, not fatal."""
    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv("FAKE_NVML_FAULTS", str(faults))
    seen: list[int] = []

    def report(ev: gpus.XidEvent) -> None:
        seen.append(ev.xid)
        if len(seen) == 1:
            raise OSError("audit log: disk full")

    uuids = [fake_nvml.nvmlDeviceGetUUID(fake_nvml.nvmlDeviceGetHandleByIndex(i))
             for i in range(fake_nvml.nvmlDeviceGetCount())]
    w = gpus.XidWatcher(fake_nvml, uuids, on_event=report)
    w.start()
    try:
        (faults / "xid-0-13").touch()
        assert holds_within(lambda: len(seen) == 1)
        (faults / "xid-1-79").touch()
        assert holds_within(lambda: len(seen) == 2), "the watch ended at the failed report"
        assert w.skipped == 1 and "disk full" in (w.last_skipped or "")
        assert w.error is None
    finally:
        w.stop()
