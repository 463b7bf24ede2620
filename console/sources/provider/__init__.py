"""GPU clouds behind one protocol (``base.Provider``); ``make_provider`` picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.sources.provider.base import Provider

PROVIDERS = ("runpod",)


def make_provider(settings: Settings, base_url: str | None = None) -> Provider | None:
    """The configured provider with its credentials, or None when it has none (figures
    and the agent still work; provisioning and pod state need a provider)."""
    if settings.provider == "runpod":
        if settings.runpod_api_key is None:
            return None
        from console.sources.provider.runpod import RunPodClient

        return RunPodClient(settings.runpod_api_key, base_url)
    raise ValueError(f"unknown provider {settings.provider!r}; known: {', '.join(PROVIDERS)}")
