"""A failed ``pod-console up`` is told through the webhook's outbox (issue 43, item 6):
a receiver that answers 500 keeps the raise in the state dir's outbox for the next
session with a webhook, which delivers it; one that answers 2xx gets it at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import SecretStr

from console.commands.pod_cmd import _tell_up_failed
from console.config.settings import Settings
from console.session.outbox import Outbox, drain
from tests.conftest import PROFILES
from tests.support.hook_receiver import HookReceiver


def _settings(tmp_path: Path, url: str) -> Settings:
    return Settings(profiles_dir=PROFILES, state_dir=tmp_path / "state",
                    webhook_url=SecretStr(url))


async def test_a_failed_up_reaches_the_webhook_once_it_answers(tmp_path: Path) -> None:
    rx = HookReceiver()
    try:
        rx.answers = [500]
        s = _settings(tmp_path, rx.url)
        await _tell_up_failed(s, "no GPU of any kind in 3 rounds")
        assert rx.posts == [] and len(rx.tries) == 1
        outbox = Outbox(s.state_dir, mono=lambda: 1e12)  # its backoff long past
        assert outbox.depth().depth == 1
        # the next session with a webhook drains it (the receiver answers now)
        assert await drain(outbox, rx.url, 5.0, asyncio.to_thread) == 1
        assert outbox.depth().depth == 0
        (text,) = rx.texts()
        assert "pod-console up failed" in text and "no GPU of any kind" in text
    finally:
        rx.close()


async def test_a_failed_up_is_posted_at_once_when_the_receiver_answers(
        tmp_path: Path) -> None:
    rx = HookReceiver()
    try:
        s = _settings(tmp_path, rx.url)
        await _tell_up_failed(s, "the agent never came up")
        assert [t for t in rx.texts() if "the agent never came up" in t]
        assert Outbox(s.state_dir).depth().depth == 0
    finally:
        rx.close()
