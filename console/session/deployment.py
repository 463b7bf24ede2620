"""One deployment's composition root: from settings to every part that reads or drives it.

Where the deployment runs — the machine's id, its address, today's profile — has one
owner, the settings (``pod.machine_id``, ``pod.host``, ``pod.port_map``, ``profile``),
and one writer, :meth:`Deployment.switch_pod` (after ``f`` or ``r``, or when ``up``
moved it from another process). Every part reads it when it is used, never from a copy
taken at start: the PromQL selector of the poller and of the GPU source, the pod
collector's machine id, the slots' targets, the agent's profile path. A switch is one
call, and whoever holds a part follows.

The console (``context.make_context``), the fleet, ``status`` and ``bench`` wire their
deployment here (:meth:`Deployment.wire`), so each gets the same parts: provider, SSH
transport, agent client with the remote profile path, GPU source, pod collector, poller,
spend book.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct

from console.config import config_file, defaults
from console.config.settings import Settings
from console.model.history import History
from console.sources.agent_client import AgentClient, Transport
from console.sources.collect.gpu_metrics import GpuMetrics
from console.sources.collect.gpu_metrics import from_settings as gpu_metrics_from_settings
from console.sources.collect.http import HttpClient
from console.sources.collect.pod import PodCollector
from console.sources.collect.poller import DeploymentPoller
from console.sources.collect.targets import SlotTarget, targets_for
from console.sources.remote import AgentEndpoint, AgentTransport, agent_command
from pod_agent.profiles import LoadedProfile, load_profiles

if TYPE_CHECKING:
    from console.model.snapshot import PodSnapshot
    from console.operations.provision import ProvisionConfig, Provisioner
    from console.session.spend import SpendBook
    from console.sources.collect.gateway import GatewayCollector
    from console.sources.provider import SharedProviders
    from console.sources.provider.base import Machine, Provider
    from pod_agent.profile import Profile


class DeploymentError(Exception):
    pass


def ssh_transport(settings: Settings) -> AgentTransport | None:
    """The agent over SSH as the settings describe it; None without ``pod.ssh_host``."""
    p = settings.pod
    if not p.ssh_host:
        return None
    ep = AgentEndpoint(host=p.ssh_host, port=p.ssh_port, user=p.ssh_user,
                       key_path=p.ssh_key, pod_id=p.machine_id or p.ssh_host,
                       agent_cmd=agent_command(p.agent_dir))
    return AgentTransport(ep, settings.state_dir)


class Parts(Struct):
    """What :meth:`Deployment.wire` builds: every part that talks to the deployment."""

    poller: DeploymentPoller
    provider: Provider | None
    """The GPU cloud's API (None without its key: figures and the agent still work)."""
    agent: AgentClient
    """The pod agent (unconfigured without a transport: a wall, no ``ssh_host``)."""
    gpu: GpuMetrics | None
    """Where GPUs are read when the agent does not say (exporter URL or Prometheus)."""
    pods: PodCollector

    @property
    def transport(self) -> Transport | None:
        return self.agent.transport

    @property
    def reads_the_pod(self) -> bool:
        """Whether the pod collector has a source at all (provider, agent or GPU)."""
        return (self.provider is not None or self.agent.configured
                or (self.gpu is not None and self.gpu.configured))

    async def aclose(self) -> None:
        await self.poller.aclose()
        if self.provider is not None:
            await self.provider.aclose()


class Deployment:
    """One deployment: its settings, its profiles, and (once wired) its parts."""

    def __init__(self, settings: Settings, profiles: tuple[LoadedProfile, ...],
                 today: LoadedProfile, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        """The time the pollers stamp their readings with (a test's, injected)."""
        self.profiles = profiles
        settings.profile = today.name  # the owner of which profile runs today
        self.parts: Parts | None = None
        self.remote_profile_of: Callable[[LoadedProfile], str] | None = None
        """Where a profile lies on the pod when the agent is not under ``agent_dir``
        (the demo's pods)."""
        self._spend: SpendBook | None = None
        self.on_switch: list[Callable[[], None]] = []
        """Called after each :meth:`switch_pod`: holders of words about the deployment
        (a console context's profile name) that are not its parts."""
        self.pod_seen: Callable[[], PodSnapshot | None] = lambda: None
        """The last reading of the pod in which its agent answered, as the console that
        shows this deployment holds it (its session sets this; a headless command has
        none): what an operation falls back on when its own read gets no answer."""

    # -- derived, every time they are read ----------------------------------------
    @property
    def today(self) -> LoadedProfile:
        """The profile the deployment runs now (``settings.profile``)."""
        for lp in self.profiles:
            if lp.name == self.settings.profile:
                return lp
        return self.profiles[0]

    @property
    def machine_id(self) -> str | None:
        return self.settings.pod.machine_id

    @property
    def targets(self) -> tuple[SlotTarget, ...]:
        p = self.settings.pod
        return targets_for(self.today.profile, p.host, p.port_map)

    @property
    def prom_selector(self) -> str:
        """The PromQL selector of this machine's series (targets are labelled by pod)."""
        return defaults.prom_selector(self.machine_id)

    @property
    def remote_profile(self) -> str:
        """Today's profile as the agent on the pod reads it (``check-host --profile``)."""
        if self.remote_profile_of is not None:
            return self.remote_profile_of(self.today)
        return f"{self.settings.pod.agent_dir}/pkg/profiles/{self.today.path.name}"

    @property
    def spend_path(self) -> Path | None:
        return self.settings.spend_path

    @property
    def backfill_step_s(self) -> float:
        """The plots' backfill step: a poll's, or finer than 240 points per plot never."""
        return max(self.settings.refresh_s, self.settings.history_s / 240)

    # -- building the parts ---------------------------------------------------------
    def new_poller(self, history: History | None = None,
                   client: HttpClient | None = None) -> DeploymentPoller:
        """A poller of today's slots, reading the selector from this deployment.
        ``client``: an HTTP client shared with other pollers (the fleet's)."""
        s = self.settings
        key = s.vllm_api_key.get_secret_value() if s.vllm_api_key else None
        return DeploymentPoller(
            self.today.name, self.targets, prometheus_url=s.prometheus_url,
            window_s=s.window_s, timeout_s=s.request_timeout_s, api_key=key,
            history=history or History(s.history_s, s.refresh_s),
            prom_selector=lambda: self.prom_selector, clock=self.clock, client=client)

    def wire(self, *, read_only: bool = False, transport: Transport | None = None,
             provider_base: str | None = None, history: History | None = None,
             poller: DeploymentPoller | None = None, client: HttpClient | None = None,
             providers: SharedProviders | None = None) -> Parts:
        """Build every part once. ``poller``: one already polling (a staged start's) that
        polls exactly as a new one would, handed over to this deployment; ``transport``:
        the agent's, when not SSH from the settings (the demo's local process). Read-only
        (a wall) holds no agent connection and needs no SSH key. ``client`` and
        ``providers``: HTTP and provider clients shared between deployments (the fleet's
        contexts), which their owner closes."""
        from console.sources.provider import make_provider

        if poller is None:
            poller = self.new_poller(history, client)
        else:
            poller.derive_selector(lambda: self.prom_selector)
        if read_only:
            transport = None
        elif transport is None:
            transport = ssh_transport(self.settings)
        agent = AgentClient(transport, self.remote_profile)
        gpu = gpu_metrics_from_settings(self.settings, poller.client,
                                        selector=lambda: self.prom_selector)
        provider = make_provider(self.settings, provider_base, providers)
        pods = PodCollector(lambda: self.machine_id, provider, agent,
                            timeout_s=max(2.0, self.settings.request_timeout_s * 2),
                            gpu_metrics=gpu)
        self.parts = Parts(poller, provider, agent, gpu, pods)
        return self.parts

    def pod_transport(self, pod: Machine, agent_cmd: str) -> AgentTransport:
        """The agent on a pod that provisioning made or started (``up``, ``f``, ``r``):
        :func:`pod_transport`."""
        return pod_transport(self.settings, pod, agent_cmd)

    def provision_config(self, **given: Any) -> ProvisionConfig:
        """How this deployment provisions (:func:`provision_config`)."""
        return provision_config(self.settings, **given)

    def provisioner(self, client: Provider, *, cfg: ProvisionConfig | None = None,
                    transport_factory: Callable[[Machine, str], Any] | None = None,
                    **kw: Any) -> Provisioner:
        """The deployment's provisioner (``up``, the console's ``f`` and ``r``): its
        profiles, its pod, and :meth:`pod_transport` for a new pod's agent unless
        ``transport_factory`` says otherwise (the demo's, a test's)."""
        return provisioner(self.settings, client, self.profiles,
                           cfg=cfg or self.provision_config(),
                           transport_factory=transport_factory or self.pod_transport, **kw)

    def gateway_collector(self, client: HttpClient, timeout_s: float) -> GatewayCollector:
        """This deployment's gateway collector (:func:`gateway_collector`), its day in
        today's profile's zone."""
        return gateway_collector(self.settings, client, timeout_s, self.today.profile)

    async def spend_book(self) -> SpendBook:
        """Every run of this deployment's machines the console saw (read once, off the
        event loop)."""
        from console.session.spend import SpendBook

        if self._spend is None:
            self._spend = await asyncio.to_thread(SpendBook, self.spend_path)
        return self._spend

    # -- the one way the deployment moves -----------------------------------------
    def switch_pod(self, machine_id: str, host: str, port_map: dict[int, int],
                   profile: LoadedProfile | None = None,
                   transport: Transport | None = None) -> None:
        """The deployment runs on ``machine_id`` at ``host``/``port_map`` now, with
        ``profile`` (default: the same). Every part follows: the poller is aimed at the
        new slots in place (its history kept), the selector, the pod collector and the
        GPU source read the new id, the agent is given ``transport`` (when one is: a
        read-only console has none) and the new profile path."""
        s = self.settings
        if profile is not None and all(lp.name != profile.name for lp in self.profiles):
            self.profiles = (*self.profiles, profile)
        s.pod.machine_id = machine_id
        s.pod.host = host
        s.pod.port_map = dict(port_map)
        if profile is not None:
            s.profile = profile.name
        parts = self.parts
        if parts is not None:
            parts.poller.retarget(self.today.name, self.targets)
            if transport is not None and parts.agent.configured:
                parts.agent.retarget(transport, self.remote_profile)
            elif parts.agent.configured:
                parts.agent.remote_profile = self.remote_profile
        for fn in self.on_switch:
            fn()

    def follow_current_pod(self, cur: dict[str, Any]) -> bool:
        """Follow the current pod as the state directory names it (``cur``:
        ``config_file.read_current_pod``'s answer, read off the event loop; ``up``, and
        ``f``/``r`` in a console, write it when they adopt a pod). True when it moved."""
        if not cur:
            return False
        p = self.settings.pod
        host = cur.get("host", p.host)
        port_map = cur.get("port_map", p.port_map)
        profile = next((lp for lp in self.profiles if lp.name == cur.get("profile")), None)
        if (cur["machine_id"], host, port_map) == (p.machine_id, p.host, p.port_map) and (
                profile is None or profile.name == self.today.name):
            return False
        self.switch_pod(cur["machine_id"], host, port_map, profile)
        return True


def pod_transport(settings: Settings, pod: Machine, agent_cmd: str) -> AgentTransport:
    """The agent on a pod that provisioning made or started: the one place such a
    transport is built, with the configured SSH user and key (``f`` once said ``root``
    whatever ``pod.ssh_user`` was)."""
    p = settings.pod
    if pod.ssh_endpoint is None:
        raise DeploymentError(f"pod {pod.id} has no SSH address yet")
    host, port = pod.ssh_endpoint
    return AgentTransport(AgentEndpoint(host=host, port=port, user=p.ssh_user,
                                        key_path=p.ssh_key, pod_id=pod.id,
                                        agent_cmd=agent_cmd), settings.state_dir)


def provisioner(settings: Settings, client: Provider,
                profiles: Sequence[LoadedProfile] = (), *,
                cfg: ProvisionConfig | None = None,
                transport_factory: Callable[[Machine, str], Any] | None = None,
                **kw: Any) -> Provisioner:
    """The one place a provisioner is built. ``profiles``: none for ``down``, which only
    terminates (a missing or broken profiles directory must never keep a pod billing);
    ``transport_factory``: :func:`pod_transport` with these settings unless given."""
    from console.operations.provision import Provisioner

    def transport(pod: Machine, agent_cmd: str) -> AgentTransport:
        return pod_transport(settings, pod, agent_cmd)

    return Provisioner(client, list(profiles), transport_factory or transport,
                       cfg or provision_config(settings), pod_id=settings.pod.machine_id,
                       **kw)


def provision_config(settings: Settings, **given: Any) -> ProvisionConfig:
    """How these settings provision: where it renders, its agent's directory, its
    ledger, and every context's pod kept out of a sweep; ``given`` (``up``'s rounds and
    waits) on top."""
    from console.config.settings import pods_in_use
    from console.operations.provision import ProvisionConfig

    s = settings
    return ProvisionConfig(**{
        "render_dir": s.state_dir / "rendered", "prometheus_url": s.prometheus_url,
        "agent_dir": s.pod.agent_dir, "ledger": config_file.ledger_path(s.state_dir),
        "in_use": lambda: pods_in_use(s), **given})


def gateway_collector(settings: Settings, client: HttpClient, timeout_s: float,
                      profile: Profile | None = None) -> GatewayCollector:
    """The configured gateway's collector (``gateway_url``; read through Prometheus when
    ``gateway.via`` says so): the one place one is built, for the console's poll,
    ``status`` and ``doctor``. ``timeout_s``: the request timeout of the refresh in force
    now; a collector kept across polls is given the new one at each
    (``gateway_polling``). ``profile``: whose zone the gateway's day is counted in."""
    from console.session.judging import day_zone
    from console.sources.collect.gateway import GatewayCollector
    from console.sources.collect.promql import PromClient

    gw = settings.gateway
    prom = (PromClient(settings.prometheus_url, client, timeout_s)
            if settings.prometheus_url and gw.via == "prometheus" else None)
    return GatewayCollector(settings.gateway_url or "", gw, settings.window_s, timeout_s,
                            client=client, zone=day_zone(profile), prom=prom,
                            prom_selector=f",{gw.prometheus_match}" if gw.prometheus_match
                            else "")


def capture_reader(url: str, timeout_s: float) -> GatewayCollector:
    """A collector that reads captured expositions of the gateway at ``url``
    (``pod-console metrics``): the default gateway settings, a day's window."""
    from console.config.settings import GatewaySettings
    from console.sources.collect.gateway import GatewayCollector

    return GatewayCollector(url, GatewaySettings(), window_s=86400.0, timeout_s=timeout_s)


def no_profiles_hint(profiles_dir: Path) -> str:
    """What a newcomer with no configuration reads: where the console looked, where the
    setting comes from, and how to see the console without a pod."""
    from console.config.config_file import config_path

    cfg, _ = config_path(None)
    return (f"no profiles: {profiles_dir.absolute()} is not a directory.\n"
            f"  profiles_dir is set in the config file ({cfg}, or --config PATH) or in\n"
            f"  POD_CONSOLE_PROFILES_DIR; it holds one YAML file per pod profile\n"
            f"  (docs/configuration.md, \"Profiles\").\n"
            f"  To see the console first, on simulated pods: pod-console demo")


def apply_current_pod(settings: Settings) -> None:
    """The pod ``up`` (or the console's ``f``/``r``) last brought up wins over the config
    file's machine id."""
    from console.config.config_file import read_current_pod

    cur = read_current_pod(settings.state_dir)
    if not cur:
        return
    settings.pod.machine_id = cur["machine_id"]
    if "host" in cur:
        settings.pod.host = cur["host"]
    if "port_map" in cur:
        settings.pod.port_map = cur["port_map"]
    if "profile" in cur:
        settings.profile = cur["profile"]


def open_deployment(settings: Settings, clock: Callable[[], float] = time.time,
                    loaded: dict[Path, tuple[LoadedProfile, ...]] | None = None
                    ) -> Deployment:
    """``loaded``: profiles directories already read (the fleet's contexts that share
    one read it once)."""
    from pod_agent.profiles import ProfileError

    if loaded is not None and settings.profiles_dir in loaded:
        profiles = loaded[settings.profiles_dir]
    else:
        if not settings.profiles_dir.is_dir():
            raise DeploymentError(no_profiles_hint(settings.profiles_dir))
        try:
            profiles = tuple(load_profiles(settings.profiles_dir))
        except ProfileError as exc:
            raise DeploymentError(str(exc)) from None
        if loaded is not None:
            loaded[settings.profiles_dir] = profiles
    if not profiles:
        raise DeploymentError(f"no profiles in {settings.profiles_dir}")
    today = profiles[0]
    if settings.profile:
        match = [p for p in profiles if p.name == settings.profile]
        if not match:
            names = ", ".join(p.name for p in profiles)
            raise DeploymentError(f"profile {settings.profile!r} not found (have: {names})")
        today = match[0]
    return Deployment(settings, profiles, today, clock)


def connect(settings: Settings, **wire: Any) -> tuple[Deployment, Parts]:
    """Open the settings' deployment and wire it (``wire``: :meth:`Deployment.wire`'s)."""
    dep = open_deployment(settings)
    return dep, dep.wire(**wire)
