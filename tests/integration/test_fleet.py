"""Several pods in one config: three contexts, each brought up by ``pod-console
--context NAME up`` on the emulated provider (each pod a real SSH host running the real
agent and its simulated slot), seen together by ``pod-console fleet``; an operation on
one pod leaves the others running, and its audit names its context and pod."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.support.emulated_pods import KEY, World, free_ports, write_profiles

CONTEXTS = ("east", "west", "staging")


def _config(world: World, tmp_path: Path) -> tuple[Path, dict]:
    lines = [f"state_dir: {tmp_path / 'state'}", "pod:",
             f"  ssh_key: {world.hosts.client_key()}", "contexts:"]
    for name, port in zip(CONTEXTS, free_ports(len(CONTEXTS)), strict=True):
        # each pod its own profiles (its slot on a port of its own: the three "pods"
        # share this machine's loopback) and its own agent directory
        prof = write_profiles(tmp_path / f"profiles-{name}", [port])
        lines += [f"  {name}:", f"    profiles_dir: {prof}", "    pod:",
                  f"      agent_dir: {world.root / ('agent-' + name)}"]
    cfg = tmp_path / "config.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    env = dict(os.environ, RUNPOD_API_KEY=KEY, RUNPOD_API_BASE=world.server.base_url,
               PYTHONPATH=str(REPO))
    env.pop("POD_CONSOLE_STATE_DIR", None)
    env.pop("POD_CONSOLE_CONTEXT", None)
    return cfg, env


def _cli(cfg: Path, env: dict, *args: str, timeout: float = 300
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console.cli", *args, "--config", str(cfg)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def _fleet(cfg: Path, env: dict) -> dict:
    r = _cli(cfg, env, "fleet", "--json", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_three_pods_one_fleet_and_an_operation_on_one(world: World, tmp_path: Path) -> None:
    world.state.stock["GPU B1"] = 6  # two GPUs a pod
    cfg, env = _config(world, tmp_path)
    pods = {}
    for i, name in enumerate(CONTEXTS):
        # the context before the subcommand and after it: both are k9s's spelling
        args = (["--context", name, "up"] if i % 2 == 0 else ["up", "--context", name])
        r = _cli(cfg, env, *args, "--round-wait", "0", "--rounds", "1")
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        cur = json.loads((tmp_path / "state" / "contexts" / name / "current_pod.json")
                         .read_text())
        pods[name] = cur["pod_id"]
    assert len(set(pods.values())) == 3 and world.running() == sorted(pods.values())

    doc = _fleet(cfg, env)
    rows = {r["context"]: r for r in doc["pods"]}
    assert list(rows) == list(CONTEXTS)
    for name in CONTEXTS:
        r = rows[name]
        assert r["pod_id"] == pods[name] and r["status"] == "RUNNING", r
        assert r["gpu_name"] == "GPU B1" and r["cost_per_hr"] > 0
        assert (r["slots_up"], r["slots"]) == (1, 1) and r["worst_health"] == "up", r
        assert r["spend_today"] >= 0 and r["spend_month"] >= r["spend_today"] - 1e-9
        assert r["error"] is None, r
    assert doc["total"]["cost_per_hr_running"] == sum(r["cost_per_hr"] for r in rows.values())
    text = _cli(cfg, env, "fleet").stdout
    assert all(pods[n] in text for n in CONTEXTS) and "fleet: $" in text

    # the console on one context: F shows the fleet, enter reopens it on another pod,
    # and the wall rotates through the pods by itself
    import asyncio

    asyncio.run(_console(cfg, env, pods))

    # an operation on one pod: the others keep running, and its record names it
    r = _cli(cfg, env, "--context", "west", "down", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert world.running() == sorted([pods["east"], pods["staging"]])
    rows = {r["context"]: r for r in _fleet(cfg, env)["pods"]}
    assert rows["west"]["status"] == "EXITED"
    assert rows["east"]["status"] == rows["staging"]["status"] == "RUNNING"
    assert rows["east"]["slots_up"] == rows["staging"]["slots_up"] == 1
    audit = [json.loads(x) for x in (tmp_path / "state" / "contexts" / "west" /
                                     "audit.jsonl").read_text().splitlines()]
    assert {a["context"] for a in audit} == {"west"}
    assert [(a["action"], a["result"]) for a in audit][-1] == ("down", "ok")
    assert not (tmp_path / "state" / "contexts" / "east" / "audit.jsonl").read_text() \
        .count('"down"')

    # an unknown context is refused with the file and line that list them
    r = _cli(cfg, env, "--context", "north", "status")
    assert r.returncode != 0 and "context 'north' is not in the config (have: east, " \
        "staging, west)" in r.stderr
    for name in ("east", "staging"):
        assert _cli(cfg, env, "--context", name, "down", timeout=120).returncode == 0
    assert world.running() == []


async def _console(cfg: Path, env: dict, pods: dict[str, str]) -> None:
    from console.commands.tui_cmd import full_context
    from console.session.view import SwitchRequest
    from console.ui.app import make_app
    from console.ui.screens.fleet import FleetScreen
    from tests.support.waits import wait_for
    from tests.tui.conftest import live

    saved = dict(os.environ)
    os.environ.update({k: env[k] for k in ("RUNPOD_API_KEY", "RUNPOD_API_BASE")})
    os.environ["POD_CONSOLE_CONTEXT"] = "east"  # as `pod-console --context east` sets it
    os.environ.pop("POD_CONSOLE_STATE_DIR", None)
    try:
        ctx = full_context(cfg, 2.0, wall=False)
        assert ctx is not None and ctx.settings.context == "east"
        assert ctx.settings.pod.machine_id == pods["east"]
        app = make_app(ctx)
        async with app.run_test(size=(200, 50)) as pilot:
            assert await wait_for(pilot, lambda: live(app), 60)
            assert "east · kind-b" in str(app.screen.query_one("PodHeader").render())
            await pilot.press("F")
            assert await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen))
            screen = app.screen
            assert await wait_for(pilot, lambda: screen.state.fleet is not None and all(
                r.status == "RUNNING" and r.slots_up == 1 for r in screen.state.fleet.rows),
                90)
            fleet = screen.state.fleet
            assert [(r.context, r.pod_id) for r in fleet.rows] == [(n, pods[n])
                                                                   for n in CONTEXTS]
            assert fleet.current == "east"
            shown = app.export_screenshot().replace("&#160;", " ")
            assert all(pods[n] in shown for n in CONTEXTS) and "● east" in shown
            await pilot.press("down")
            await pilot.press("enter")
            assert await wait_for(pilot, lambda: app.return_value is not None, 10)
        assert app.return_value == SwitchRequest("west")
        # the wall: after its time on east, on to the next pod
        wall = full_context(cfg, 2.0, wall=True)
        assert wall is not None
        wall.pod_rotate_s = 1.0
        app = make_app(wall, wall=True)
        async with app.run_test(size=(160, 48)) as pilot:
            assert await wait_for(pilot, lambda: app.return_value is not None, 30)
        assert app.return_value == SwitchRequest("west")
    finally:
        os.environ.clear()
        os.environ.update(saved)
