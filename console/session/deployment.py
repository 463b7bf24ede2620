"""From settings to the parts of one deployment: today's profile, its targets, a poller."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from console.config import defaults
from console.config.settings import Settings
from console.model.history import History
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import SlotTarget, targets_for
from pod_agent.profiles import LoadedProfile, load_profiles


class DeploymentError(Exception):
    pass


@dataclass(frozen=True)
class Deployment:
    settings: Settings
    profiles: tuple[LoadedProfile, ...]
    today: LoadedProfile
    targets: tuple[SlotTarget, ...]

    def poller(self, history: History | None = None) -> DeploymentPoller:
        s = self.settings
        key = s.vllm_api_key.get_secret_value() if s.vllm_api_key else None
        sel = defaults.prom_selector(s.pod.runpod_id)
        return DeploymentPoller(
            self.today.name, self.targets, prometheus_url=s.prometheus_url,
            window_s=s.window_s, timeout_s=s.request_timeout_s, api_key=key,
            history=history or History(s.history_s, s.refresh_s), prom_selector=sel)


def no_profiles_hint(profiles_dir: Path) -> str:
    """What a newcomer with no configuration reads: where the console looked, where the
    setting comes from, and how to see the console without a pod."""
    from console.config.config_file import config_path

    cfg, _ = config_path(None)
    return (f"no profiles: {profiles_dir.absolute()} is not a directory.\n"
            f"  profiles_dir is set in the config file ({cfg}, or --config PATH) or in\n"
            f"  POD_CONSOLE_PROFILES_DIR; it holds one YAML file per pod profile\n"
            f"  (README, \"Configuration for a real deployment\").\n"
            f"  To see the console first, on simulated pods: pod-console demo")


def apply_current_pod(settings: Settings) -> None:
    """The pod ``up`` last brought up wins over the config file's pod id."""
    from console.config.config_file import read_current_pod

    cur = read_current_pod(settings.state_dir)
    if not cur:
        return
    settings.pod.runpod_id = cur["runpod_id"]
    if "host" in cur:
        settings.pod.host = cur["host"]
    if "port_map" in cur:
        settings.pod.port_map = cur["port_map"]
    if "profile" in cur:
        settings.profile = cur["profile"]


def open_deployment(settings: Settings) -> Deployment:
    from pod_agent.profiles import ProfileError

    if not settings.profiles_dir.is_dir():
        raise DeploymentError(no_profiles_hint(settings.profiles_dir))
    try:
        profiles = tuple(load_profiles(settings.profiles_dir))
    except ProfileError as exc:
        raise DeploymentError(str(exc)) from None
    if not profiles:
        raise DeploymentError(f"no profiles in {settings.profiles_dir}")
    today = profiles[0]
    if settings.profile:
        match = [p for p in profiles if p.name == settings.profile]
        if not match:
            names = ", ".join(p.name for p in profiles)
            raise DeploymentError(f"profile {settings.profile!r} not found (have: {names})")
        today = match[0]
    targets = targets_for(today.profile, settings.pod.host, settings.pod.port_map)
    return Deployment(settings, profiles, today, targets)
