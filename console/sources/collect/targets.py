"""Which endpoints to poll: slots of a profile at the pod's address."""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct

if TYPE_CHECKING:
    from pod_agent.profile import Profile


class SlotTarget(Struct, frozen=True):
    slot: str
    served_model_name: str
    port: int
    base_url: str
    gpus: tuple[int, ...] = ()
    gpu_util: float = 0.0
    engine: str = "vllm"
    """The slot's serving engine (the profile's ``engine:``)."""


def targets_for(profile: Profile, host: str, port_map: dict[int, int] | None = None,
                scheme: str = "http") -> tuple[SlotTarget, ...]:
    pm = port_map or {}
    return tuple(
        SlotTarget(slot=name, served_model_name=s.served_model_name, port=s.port,
                   base_url=f"{scheme}://{host}:{pm.get(s.port, s.port)}",
                   gpus=tuple(s.gpus), gpu_util=s.gpu_util, engine=s.engine)
        for name, s in profile.slots.items())
