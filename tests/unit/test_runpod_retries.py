"""RunPod's retries are configurable (``RUNPOD_API_RETRIES``): the default waits out a
flaky API; 0 surfaces the first transient failure at once (a test that does not test
retries must not spend 30 s on them); a bad value is refused with what is accepted."""

from __future__ import annotations

import pytest

from console.sources.provider.base import TransientError
from console.sources.provider.runpod import RETRIES, RunPodClient, retries_from_env
from tests.support.procs import free_port


async def _get_from_a_closed_port(monkeypatch: pytest.MonkeyPatch, env: str | None
                                  ) -> list[float]:
    if env is None:
        monkeypatch.delenv("RUNPOD_API_RETRIES", raising=False)
    else:
        monkeypatch.setenv("RUNPOD_API_RETRIES", env)
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    client = RunPodClient("k", f"http://127.0.0.1:{free_port()}/v2", sleep=sleep)
    try:
        with pytest.raises(TransientError):
            await client.get_pod("nopod")
    finally:
        await client.aclose()
    return waits


async def test_retries_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(await _get_from_a_closed_port(monkeypatch, None)) == RETRIES == 4
    assert await _get_from_a_closed_port(monkeypatch, "0") == []
    waits = await _get_from_a_closed_port(monkeypatch, "2")
    assert len(waits) == 2 and 1.5 <= waits[0] <= 2.5  # the backoff, unchanged


def test_an_explicit_count_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOD_API_RETRIES", "0")
    assert RunPodClient("k", "http://127.0.0.1:9/v2", retries=3).retries == 3


@pytest.mark.parametrize("bad", ["-1", "two", "1.5", "11", "4 retries"])
def test_a_bad_value_says_what_is_accepted(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("RUNPOD_API_RETRIES", bad)
    with pytest.raises(ValueError, match="RUNPOD_API_RETRIES must be a whole number from 0 "
                                         "to 10"):
        retries_from_env()
