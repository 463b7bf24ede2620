"""A fallback says what became of the old pod and what the new one costs (issue 42, item
5): the result never said whether the old pod was stopped with its volume, terminated or
still billing, nor the new pod's $/h. The console's ``f`` (the provisioner's registry
handler) against the RunPod emulator, each created pod a real SSH host running the real
agent; the prices are the emulator's."""

from __future__ import annotations

import os

import pytest

from console.model import fmt
from tests.support import sshd
from tests.support.emulated_pods import World

pytestmark = pytest.mark.skipif(not sshd.available() and not os.environ.get("CI"),
                                reason="openssh-server not installed")


async def test_the_result_names_the_old_pods_fate_and_the_new_pods_price(world: World
                                                                        ) -> None:
    old = world.state.add_stopped_pod("pod-console-kind-a", "GPU A1")
    world.state.stock["GPU A2"] = 2
    prov = world.provisioner()
    prov.pod_id = old  # the pod the console followed: stopped, its resume refused
    out = await prov.fallback_action(lambda *a: None)
    assert out.ok, out.message
    new = out.data["pod"]
    price = world.state.pods[new]["cost"]
    assert price > 0
    assert out.message.startswith(
        f"old pod {old}: stopped, volume kept, $0.00/h; new pod {new} on kind-a "
        f"(2× GPU A2), {fmt.money(price)}/h"), out.message
    assert out.data["cost_per_hr"] == price
    await prov.client.aclose()


async def test_an_old_pod_still_running_is_said_to_bill(world: World) -> None:
    old = world.state.add_stopped_pod("pod-console-kind-a", "GPU A1")
    with world.state.lock:  # its GPU fell off the bus: the reason for the fallback
        world.state.set_status(world.state.pods[old], "RUNNING")
    bills = world.state.pods[old]["cost"]
    world.state.stock["GPU A2"] = 2
    prov = world.provisioner()
    prov.pod_id = old
    out = await prov.fallback_action(lambda *a: None)
    assert out.ok, out.message
    assert out.message.startswith(
        f"old pod {old}: still RUNNING, {fmt.money(bills)}/h — it bills until it is "
        f"stopped"), out.message
    await prov.client.aclose()
