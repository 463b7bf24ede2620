"""The seam between provisioning and a GPU cloud: one protocol, one neutral machine record.

Provisioning (``console/operations/provision.py``) and pod state
(``console/sources/collect/pod.py``)
know only what is here. A provider module (``runpod.py``) speaks its cloud's API,
maps its answers to :class:`Machine` and its failures to the error taxonomy below,
which is what provisioning decides on:

* :class:`CapacityError` — sold out / no free GPUs: try the next candidate;
* :class:`TransientError` — 5xx, 429, timeouts, unreadable replies (``sent`` says
  whether the request may have reached the cloud);
* :class:`FatalError` — bad key, bad request: stop at once;
* :class:`ConflictError` — the action does not fit the machine's state;
* :class:`NotFoundError` — no such machine;
* :class:`UnknownOutcomeError` — a create may have happened and cannot be checked:
  never create another before it is found.

Adding a provider: see docs/architecture.md ("Adding a provider").
"""

from __future__ import annotations

import builtins
import math
from typing import Any, Protocol

from msgspec import Struct, field
from msgspec.structs import force_setattr

BILLING = ("RUNNING", "STARTING", "PROVISIONING")
"""Statuses in which a machine costs money."""

MAX_COST_PER_HR = 1000.0
"""No machine this console rents costs more an hour (eight of the dearest GPUs are well
under $100/h): a larger figure is a broken answer, not a price."""


def sane_cost(value: Any) -> float | None:
    """A $/h as a provider said it, or None (unknown) when it is not a price: NaN,
    infinite, negative, absurdly large, or not a number at all. A cost goes into the
    spend book, ``status --json`` and every $ on screen; a NaN there breaks all three."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        cost = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(cost) or cost < 0 or cost > MAX_COST_PER_HR:
        return None
    return cost


class ProviderError(Exception):
    kind = "error"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class CapacityError(ProviderError):
    kind = "capacity"


class TransientError(ProviderError):
    kind = "transient"

    def __init__(self, message: str, status: int | None = None, sent: bool = True) -> None:
        super().__init__(message, status)
        self.sent = sent
        """False only when the request certainly never reached the cloud (connect failed)."""


class FatalError(ProviderError):
    kind = "fatal"


class ConflictError(ProviderError):
    kind = "conflict"


class NotFoundError(ProviderError):
    kind = "not_found"


class UnknownOutcomeError(ProviderError):
    """A create may have succeeded and the machine could not be looked up: never create
    again before this one is found (the ledger keeps its name for the next sweep)."""

    kind = "unknown"

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


class MachineSpec(Struct, frozen=True):
    """What to create, in words every GPU cloud has."""

    name: str
    image: str
    gpu_type_id: str
    gpu_count: int
    cloud: str = "SECURE"
    disk_gb: int = 50
    volume_gb: int = 200
    ports: tuple[str, ...] = ("22/tcp",)
    env: tuple[tuple[str, str], ...] = ()


class Machine(Struct, frozen=True):
    """One rented GPU machine as provisioning and the header see it."""

    id: str
    name: str = ""
    status: str = "UNKNOWN"
    """RUNNING | STARTING | PROVISIONING | EXITED | TERMINATED | ERROR | UNKNOWN"""
    gpu_type: str | None = None
    gpu_count: int = 0
    cost_per_hr: float | None = None
    """What it bills now ($/h); 0 or None when stopped."""
    cuda: str | None = None
    """The host driver's CUDA version, when the cloud says."""
    started_at: str | None = None
    """ISO 8601, when the cloud says."""
    ssh_endpoint: tuple[str, int] | None = None
    ports: dict[int, int] = field(default_factory=dict)
    """Private port → public port (direct TCP mappings)."""

    def __post_init__(self) -> None:
        # the one record every provider builds: no cost gets past it that is not a price
        force_setattr(self, "cost_per_hr", sane_cost(self.cost_per_hr))

    @property
    def cost(self) -> float | None:
        return self.cost_per_hr

    @property
    def billing(self) -> bool:
        return self.status in BILLING


class Provider(Protocol):
    """What provisioning needs of a GPU cloud. Every call raises only ProviderError kinds."""

    name: str

    async def get(self, machine_id: str) -> Machine: ...

    async def list(self) -> list[Machine]: ...

    # builtins.list: inside this class, ``list`` names the method above
    async def find_by_name(self, name: str) -> builtins.list[Machine]: ...

    async def create(self, spec: MachineSpec) -> Machine:
        """Create once, never twice (see :class:`UnknownOutcomeError`)."""
        ...

    async def start(self, machine_id: str) -> Machine | None:
        """Sent once: a start that failed may have started it (the caller stops it)."""
        ...

    async def stop(self, machine_id: str) -> Machine | None: ...

    async def terminate(self, machine_id: str) -> None:
        """Gone already counts as done."""
        ...

    async def availability(self) -> dict[str, str]: ...

    async def aclose(self) -> None: ...
