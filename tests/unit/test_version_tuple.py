"""``gpuinfo.version_tuple`` reads what drivers and profiles write without raising: a CUDA
version of ``N/A`` (nvidia-smi on a broken driver) or ``13.0-rc1`` crashed the host check
and every alert evaluation of a pod that reported it."""

from __future__ import annotations

import pytest

from console.config.settings import Settings
from console.model.alerts import evaluate
from console.model.snapshot import PodSnapshot
from pod_agent import gpuinfo
from pod_agent.hostcheck import check_cuda
from pod_agent.profiles import load_profiles
from tests.conftest import PROFILES


@pytest.mark.parametrize(("text", "parsed"), [
    ("12.4.1", (12, 4, 1)), ("13.0", (13, 0)), ("13.0-rc1", (13, 0)), (" 12.4 ", (12, 4)),
    ("12.x", (12,)), ("N/A", ()), ("", ()), (None, ()), ("v12", ()),
])
def test_version_tuple_is_tolerant(text: str | None, parsed: tuple[int, ...]) -> None:
    assert gpuinfo.version_tuple(text) == parsed


def test_an_unreadable_cuda_is_not_judged_and_never_raises() -> None:
    lp = next(p for p in load_profiles(PROFILES) if p.profile.min_cuda)
    settings = Settings(profiles_dir=PROFILES)
    for cuda, alert in (("N/A", False), ("12.0-beta", True), ("99.1", False)):
        pod = PodSnapshot(status="RUNNING", host_cuda=cuda)
        keys = {c.key for c in evaluate(None, pod, lp.profile, settings, 0)}
        assert ("cuda" in keys) is alert, (cuda, keys)
    # the host check says it cannot compare, rather than crash the whole check-host
    info = gpuinfo.GpuInfo(cuda="N/A")
    check = check_cuda(info, lp.profile)
    assert check.ok is False and "cannot compare" in check.detail
    assert check_cuda(gpuinfo.GpuInfo(cuda="99.0"), lp.profile).ok is True
