"""GPU clouds behind one protocol (``base.Provider``); ``make_provider`` picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.sources.provider.base import Provider

PROVIDERS = ("runpod",)


SharedProviders = dict[tuple[object, ...], "Provider | None"]
"""Clients already made, by provider, key and base URL (``make_provider``'s ``shared``)."""


def make_provider(settings: Settings, base_url: str | None = None,
                  shared: SharedProviders | None = None) -> Provider | None:
    """The configured provider with its credentials, or None when it has none (figures
    and the agent still work; provisioning and pod state need a provider).

    ``shared``: contexts with the same provider, key and API share one client (its
    connection pool): the fleet's N contexts make one, not N (each a TLS context)."""
    if settings.provider == "runpod":
        if settings.runpod_api_key is None:
            return None
        import os

        from console.sources.provider.runpod import RunPodClient

        key = ("runpod", settings.runpod_api_key.get_secret_value(),
               base_url or os.environ.get("RUNPOD_API_BASE"))
        if shared is not None and key in shared:
            return shared[key]
        client = RunPodClient(settings.runpod_api_key, base_url)
        if shared is not None:
            shared[key] = client
        return client
    raise ValueError(f"unknown provider {settings.provider!r}; known: {', '.join(PROVIDERS)}")
