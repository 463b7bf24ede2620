"""The real agent, driven by the console's SSH transport, supervising a real vLLM server.

One supervisor runs for the whole module (vLLM takes ~50 s to start on these
CPUs); the tests run in file order and each leaves the slot ready for the next.
On CPU, vLLM sizes its KV cache from ``--gpu-memory-utilization`` × host memory
(when ``VLLM_CPU_KVCACHE_SPACE`` is unset), so gpu_util is a real knob here:
0.02 leaves less than the model itself uses and the server refuses to start,
exactly like the field's 27B slot at 0.15.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from console.sources.agent_client import AgentClient
from console.sources.remote import AgentEndpoint, AgentError, AgentTransport
from tests.conftest import REPO
from tests.support import vllm_server
from tests.support.procs import free_port
from tests.support.tiny_model import build
from tests.support.waits import polled_until

pytestmark = [pytest.mark.vllm]

BIN = REPO / "console" / "demo" / "bin"
TEST_BIN = REPO / "tests" / "support" / "bin"
GOOD_UTIL = 0.12
BAD_UTIL = 0.02


@pytest.fixture(scope="module")
def pod(tmp_path_factory, real_sshd):
    if not vllm_server.available():
        if os.environ.get("CI"):
            pytest.fail("vLLM venv missing")
        pytest.skip("vLLM venv missing")
    root = tmp_path_factory.mktemp("pod")
    home = root / "agent-home"
    models = root / "models"
    build(models / "local" / "tiny")
    port = free_port()
    profile = root / "10-cpu.yaml"
    profile.write_text(f"""
name: cpu-test
gpu_type_ids: [cpu]
image: local
schedule: {{timezone: UTC, stop: "23:59", days: [mon]}}
slots:
  TINY:
    served_model_name: tiny-agent
    hf_repo_id: local/tiny
    port: {port}
    gpus: [0]
    gpu_util: {GOOD_UTIL}
    max_model_len: 2048
    startup_timeout_s: 240
    speculative: {{method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 4,
                  prompt_lookup_min: 2}}
    extra_args: [--load-format, dummy, --enforce-eager]
""")
    rpc_log = root / "runpodctl.log"
    # the slot's vLLM runs its model in the engine core (vllm_server.MODEL_IN_ENGINE):
    # this module starts it five times
    in_engine = " ".join(f"{k}={v}" for k, v in vllm_server.MODEL_IN_ENGINE.items())
    env = (f"PATH={BIN}:{TEST_BIN}:/usr/local/bin:/usr/bin:/bin PYTHONPATH={REPO} "
           f"{in_engine} "
           f"POD_AGENT_HOME={home} "
           f"HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 RUNPOD_POD_ID=pod-test-1 "
           f"FAKE_RUNPODCTL_LOG={rpc_log}")
    ep = AgentEndpoint("127.0.0.1", real_sshd.port, "root", real_sshd.client_key, "pod-test-1",
                       f"env -u VLLM_CPU_KVCACHE_SPACE {env} {sys.executable} -m pod_agent")
    state = root / "console-state"
    info = {"root": root, "home": home, "profile": profile, "port": port, "ep": ep,
            "state": state, "rpc_log": rpc_log}
    t = AgentTransport(ep, state)
    import asyncio

    async def boot() -> None:
        cmd = (f"setsid nohup {ep.agent_cmd} serve --profile {profile} "
               f"--vllm {vllm_server.VENV / 'bin' / 'vllm'} --models-root {models} "
               f"--backoff 1,2 --watchdog-interval 1 > {root / 'serve.log'} 2>&1 < /dev/null &")
        await t.run_raw(cmd, timeout_s=30)
        assert t.notice and "recorded new host key for pod pod-test-1" in t.notice
        t.close()

    asyncio.run(boot())
    try:
        yield info
    finally:
        async def down() -> None:
            t2 = AgentTransport(ep, state)
            with contextlib.suppress(AgentError):
                await t2.run(["shutdown"], timeout_s=60)
            t2.close()
        asyncio.run(down())


async def _status(t: AgentTransport) -> dict:
    r = await t.run(["status", "--json"], timeout_s=30)
    assert r.ok, r.events
    return r.final  # type: ignore[return-value]


async def _wait_ready(t: AgentTransport, timeout_s: float = 300) -> dict:
    seen_steps: set[str] = set()

    async def status() -> dict:
        r = await t.run(["status", "--json"], timeout_s=30)
        if not r.ok and "supervisor is not running" in r.message:
            return {}  # `serve` was started in the background and is not up yet
        assert r.ok, r.events
        st: dict = r.final  # type: ignore[assignment]
        seen_steps.add(st["slots"]["TINY"]["step"])
        return st

    def ready(st: dict) -> bool:
        return bool(st) and st["slots"]["TINY"]["state"] == "ready"

    st = await polled_until(status, ready, "slot ready", timeout_s,
                            say=lambda _: f"steps seen {seen_steps}")
    st["_steps"] = seen_steps
    return st


def _pgid_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


async def test_supervisor_starts_slot_with_progress_and_logs(pod) -> None:
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        st = await _wait_ready(t)
        slot = st["slots"]["TINY"]
        assert slot["gpu_util"] == GOOD_UTIL and slot["last_startup_s"] > 0
        assert len(st["_steps"] - {"", "ready"}) >= 1  # progress was reported while starting
        assert (pod["state"] / "known_hosts" / "pod-test-1").exists()  # recorded at boot
        r = await t.run(["logs", "TINY", "-n", "400"])
        assert r.ok
        text = "\n".join(r.final["lines"])  # type: ignore[index]
        assert "Application startup complete" in text
        assert "--gpu-memory-utilization 0.12" in text
        import httpx
        assert httpx.get(f"http://127.0.0.1:{pod['port']}/health").status_code == 200
    finally:
        t.close()


def _process_tree(root: int) -> set[int]:
    """``root`` and every process below it (by the parent pid each names in /proc)."""
    children: dict[int, set[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:  # gone since the listing
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])  # after the command, which may hold ")"
        children.setdefault(ppid, set()).add(int(d.name))
    tree: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


def _network_listeners() -> dict[int, str]:
    """Socket inode -> ``tcp:PORT``/``udp:PORT`` for every TCP socket listening and every
    UDP socket bound to a port (a bound UDP socket hears whoever sends to it)."""
    out: dict[int, str] = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except OSError:  # no IPv6 here
            continue
        for line in lines:
            f = line.split()
            port = int(f[1].rpartition(":")[2], 16)
            listening = f[3] == "0A" if proto.startswith("tcp") else port != 0
            if listening:
                out[int(f[9])] = f"{proto.rstrip('6')}:{port}"
    return out


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    with contextlib.suppress(OSError):  # the process ended while read
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(int(target[len("socket:["):-1]))
    return inodes


async def test_agent_opens_no_network_port(pod) -> None:
    """No process of the agent's own tree (the supervisor and what it starts) listens on
    a network port; only the slot's server does, on its profile's port (what the engine
    opens inside its own tree is the engine's). Unix sockets only, for the agent."""
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        st = await _wait_ready(t)
    finally:
        t.close()
    slot_pid = st["slots"]["TINY"]["pid"]
    tree = _process_tree(st["pid"])
    served = _process_tree(slot_pid)
    assert slot_pid in tree  # the slot's server is the supervisor's child
    listeners = _network_listeners()

    def ports(pids: set[int]) -> dict[int, list[str]]:
        found = {p: sorted(listeners[i] for i in _socket_inodes(p) if i in listeners)
                 for p in pids}
        return {p: v for p, v in found.items() if v}

    # the scan sees what listens: the slot's server on its port (else it proves nothing)
    assert any(f"tcp:{pod['port']}" in v for v in ports(served).values()), ports(served)
    agents_own = ports(tree - served)
    assert not agents_own, f"the agent's own processes listen: {agents_own}"


async def test_crashed_slot_is_restarted_with_backoff(pod) -> None:
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        before = (await _status(t))["slots"]["TINY"]
        os.killpg(before["pid"], signal.SIGKILL)
        deadline = time.time() + 30
        while time.time() < deadline:
            slot = (await _status(t))["slots"]["TINY"]
            if slot["restarts"] > before["restarts"]:
                break
            time.sleep(0.5)
        assert slot["restarts"] == before["restarts"] + 1
        after = (await _wait_ready(t))["slots"]["TINY"]
        assert after["pid"] != before["pid"]
        assert not _pgid_alive(before["pid"])  # the old EngineCore/Worker are gone too
    finally:
        t.close()


def _kv_point(port: int) -> tuple[float, int]:
    import httpx

    from console.sources.collect.exposition import parse
    from console.sources.collect.figures import compute
    figs = compute(parse(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text))
    cache = figs["tiny-agent"].cache
    assert cache is not None and cache.kv_tokens
    return float(cache.gpu_memory_utilization), int(cache.kv_tokens)


async def test_console_rebalance_rolls_back_and_keeps_the_profile(pod, tmp_path) -> None:
    """The console's registry → agent primitive → real vLLM refusing to start → rollback."""
    from console.config.profile_file import write_split
    from console.operations.audit import AuditLog
    from console.operations.ops import build_registry

    laptop_profile = tmp_path / "10-cpu.yaml"
    laptop_profile.write_text(pod["profile"].read_text())
    before = laptop_profile.read_text()
    pod["kv_points"] = [_kv_point(pod["port"])]
    t = AgentTransport(pod["ep"], pod["state"])

    async def on_ok(values):
        return write_split(laptop_profile, values, tmp_path / "backups")

    reg = build_registry(AuditLog(tmp_path / "audit.jsonl"), False,
                         agent=AgentClient(t, str(pod["profile"])), refresh=lambda: None,
                         on_rebalanced=on_ok)
    steps: list[str] = []
    try:
        out = await reg.invoke("rebalance", {"set": {"TINY": BAD_UTIL}},
                               lambda step, frac, msg: steps.append(step))
        assert out.state == "rolled_back", out
        assert "TINY failed to start" in out.message and str(GOOD_UTIL) in out.message
        assert "stop TINY" in steps and "rollback TINY" in steps
        assert laptop_profile.read_text() == before  # unchanged after a failed apply
        st = await _wait_ready(t)
        assert st["slots"]["TINY"]["gpu_util"] == GOOD_UTIL
        r = await t.run(["rebalance", "--set", "TINY=0.99"])
        assert not r.ok and "outside" in r.message  # refused before anything is touched
        audit = [json.loads(x)["result"] for x in (tmp_path / "audit.jsonl").read_text()
                 .splitlines()]
        assert audit == ["started", "rolled_back"]
    finally:
        t.close()


async def test_rebalance_survives_a_dropped_connection_and_is_idempotent(pod) -> None:
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        got_first = False

        async def drop_after_first(ev: dict) -> None:
            nonlocal got_first
            if ev["kind"] == "progress" and not got_first:
                got_first = True
                t.close()  # the laptop's Wi-Fi goes away mid-action

        with pytest.raises(AgentError):
            await t.run(["rebalance", "--set", "TINY=0.15", "--action-id", "rb-drop"],
                        on_event=drop_after_first, timeout_s=600)
        assert got_first
        t2 = AgentTransport(pod["ep"], pod["state"])
        r = await t2.run(["attach", "rb-drop"], timeout_s=600)
        assert r.ok and r.final["state"] == "ok", r.final  # type: ignore[index]
        # the same id again replays the outcome instead of restarting the slot
        again = await t2.run(["rebalance", "--set", "TINY=0.15", "--action-id", "rb-drop"])
        assert again.ok and again.final["state"] == "ok"  # type: ignore[index]
        st = await _status(t2)
        assert st["slots"]["TINY"]["gpu_util"] == 0.15
        await _wait_ready(t2)
        pod["kv_points"].append(_kv_point(pod["port"]))
        assert [a["id"] for a in st["actions"]].count("rb-drop") == 1
        same = await t2.run(["rebalance", "--set", "TINY=0.15"])
        assert same.ok and "nothing to do" in str(same.final)
        t2.close()
    finally:
        t.close()


def test_capacity_model_from_two_real_points_predicts_the_failed_start(pod) -> None:
    """KV tokens at two gpu_util settings of the real server fix the line; the model then
    says 0.02 cannot hold one max_model_len request — which is what the real server did."""
    from console.operations.capacity import model_for, need_for_one_request
    from pod_agent.profiles import load_profile

    (u1, t1), (u2, t2) = sorted(pod["kv_points"])
    assert (u1, u2) == (GOOD_UTIL, 0.15) and t2 > t1
    slot = load_profile(pod["profile"]).slots["TINY"]
    m = model_for("TINY", slot, [(u1, t1), (u2, t2)])
    assert m.slope is not None and m.slope > 0
    assert m.tokens_at(BAD_UTIL) < need_for_one_request(slot)
    least = m.util_for(need_for_one_request(slot))
    assert least is not None and BAD_UTIL < least < GOOD_UTIL


async def test_watchdog_memory_guard_and_stop_now(pod) -> None:
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        r = await t.run(["watchdog", "disarm"])
        assert r.ok and r.final["armed"] is False  # type: ignore[index]
        assert (await _status(t))["watchdog"]["armed"] is False
        await t.run(["watchdog", "arm"])
        pid = (await _status(t))["slots"]["TINY"]["pid"]
        # the host's whole memory: MemAvailable is always below it
        from pod_agent.hostcheck import mem_total_gib

        whole = f"{mem_total_gib():.2f}"
        r = await t.run(["watchdog", "mem-floor", "1e308"])
        assert not r.ok and "from 0 to" in r.message  # refused, nothing stopped
        r = await t.run(["watchdog", "mem-floor", "4000"])
        assert not r.ok and "this host's memory" in r.message  # above the whole host
        from pod_agent.hostcheck import mem_available_gib

        # under the host's memory, but above what the running slot leaves free: it would
        # be stopped at once (issue 31)
        between = ((mem_available_gib() or 0) + float(whole)) / 2
        r = await t.run(["watchdog", "mem-floor", f"{between:.2f}"])
        assert not r.ok and "leave free" in r.message, r.message
        assert (await _status(t))["slots"]["TINY"]["pid"] == pid  # nothing stopped
        r = await t.run(["watchdog", "mem-floor", f"{(mem_available_gib() or 2) - 1:.2f}"])
        assert r.ok
        hog = b"\x01" * (3 << 30)  # 3 GiB the host no longer has: below the floor
        deadline = time.time() + 60
        while time.time() < deadline:
            st = await _status(t)
            if st["watchdog"]["last_mem_action"]:
                break
            time.sleep(0.5)
        del hog
        assert "stopped TINY" in st["watchdog"]["last_mem_action"]
        assert st["slots"]["TINY"]["state"] == "stopped"
        assert not _pgid_alive(pid)
        await t.run(["watchdog", "mem-floor", "0"])
        # the floor allows it now: the guard starts what it stopped
        deadline = time.time() + 60
        while time.time() < deadline:
            st = await _status(t)
            if "restarted TINY" in (st["watchdog"]["last_mem_action"] or ""):
                break
            time.sleep(0.5)
        assert "restarted TINY" in st["watchdog"]["last_mem_action"]
        assert st["slots"]["TINY"]["state"] in ("starting", "ready")
        r = await t.run(["watchdog", "stop-now", "--action-id", "stop-1"], timeout_s=120)
        assert r.ok, r.final
        assert pod["rpc_log"].read_text().strip() == "stop pod pod-test-1"
        audit = [json.loads(x) for x in (pod["home"] / "audit.jsonl").read_text().splitlines()]
        ops = [a["op"] for a in audit]
        assert {"serve", "rebalance", "memory-guard", "memory-guard-restart", "stop-now",
                "watchdog"} <= set(ops)
    finally:
        t.close()


async def test_shutdown_leaves_nothing_running(pod) -> None:
    t = AgentTransport(pod["ep"], pod["state"])
    try:
        st = await _status(t)
        sup_pid = st["pid"]
        r = await t.run(["shutdown"])
        assert r.ok
        deadline = time.time() + 30
        while time.time() < deadline and Path(f"/proc/{sup_pid}").exists():
            time.sleep(0.2)
        assert not Path(f"/proc/{sup_pid}").exists()
        from pod_agent.paths import socket_path_for

        assert not Path(socket_path_for(str(pod["home"]))).exists()
        r = await t.run(["status", "--json"])
        assert not r.ok and r.final["supervisor"] == "not running"  # type: ignore[index]
    finally:
        t.close()
