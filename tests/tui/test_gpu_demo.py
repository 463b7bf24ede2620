"""GPU health in the demo, end to end: the simulated pod's agent samples its GPUs
through the NVML stand-in (a real H200 capture), knows which slot owns each engine,
and the palette's GPU faults reach the header, the alerts, the GPU screen and the
audit log."""

from __future__ import annotations

import json
import time

from console.commands.tui_cmd import demo_context
from console.ui.app import make_app
from console.ui.screens.gpus import GpuScreen
from console.ui.widgets.gpu_strip import GpuStrip
from tests.support.waits import wait_for
from tests.tui.conftest import PATIENCE, live


def _text(renderable) -> str:
    """What a widget's rich content reads as, in plain text."""
    from rich.console import Console

    console = Console(width=160, color_system=None)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


def _fault(app, demo, title: str) -> None:
    fn = next(f for t, _, f in demo.faults() if t == title)
    app.palette_commands.demo_fault(fn, title)  # the palette's path: audited as a demo fault


async def test_gpu_faults_reach_every_screen(demo) -> None:
    app = make_app(demo_context(demo, 1.0, stop_demo_on_exit=False))
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: live(app), 40)

        def gpus():
            return app.pod.gpus if app.pod is not None else None

        def owners() -> set[str]:
            r = gpus()
            return {p.slot for g in r.gpus for p in g.processes} if r else set()

        await pilot.press("ctrl+r")
        # each engine found on its GPUs and matched to its slot by process group
        assert await wait_for(pilot, lambda: owners() == {"FLASH", "Q27"}, 30), gpus()
        r = gpus()
        assert [g.index for g in r.gpus] == [0, 1] and r.source == "nvml"
        assert r.gpus[0].name.endswith("RTX PRO 6000 Blackwell Server Edition")
        assert not [k for k in app.alerts.active if k.split(":")[0] in (
            "xid", "ecc", "throttle", "stray", "heat", "remap", "remapfail")]
        strip = app.screen.query_one(GpuStrip)
        assert strip.display and "GPU0" in strip.text and "GPU1" in strip.text
        # GPM as the H200 answered it (a matmul loop on GPU 0, a copy loop on GPU 1), and
        # the captured pair's NV18 wiring, from the agent's own NVML reading
        assert await wait_for(pilot, lambda: all(g.tensor_active_pct is not None
                                                 for g in gpus().gpus), 30), gpus()
        g0, g1 = gpus().gpus
        assert g0.activity == "tensor-bound" and g1.activity == "memory-bound"
        assert gpus().topology is not None
        assert gpus().topology.matrix == (("X", "NV18"), ("NV18", "X"))

        _fault(app, demo, "GPU 0 Xid 79")
        _fault(app, demo, "GPU 1 double-bit ECC error")
        _fault(app, demo, "GPU 0 overheats")

        def firing(prefix: str):
            return [a for a in app.alerts.firing() if a.key.startswith(prefix)]

        async def poll_until(cond, timeout: float) -> bool:
            """Ask for the pod state again each second until ``cond`` (pod state is
            otherwise polled every 10 s)."""
            deadline = time.monotonic() + timeout * PATIENCE
            while time.monotonic() < deadline:
                if cond():
                    return True
                app.action_refresh_now()
                await pilot.pause(1.0)
            return bool(cond())

        assert await poll_until(lambda: firing("xid:0:79") and firing("ecc:1"), 40)
        xid = firing("xid:0:79")[0]
        assert xid.severity == "crit" and "fallen off the bus" in xid.title
        assert "fallback pod (f)" in xid.detail
        assert firing("ecc:1")[0].severity == "crit"
        assert await poll_until(lambda: firing("throttle:0"), 60)  # after its for: 10 s
        assert await wait_for(pilot, lambda: "Xid79" in strip.text and "ECC" in strip.text
                              and "HOT" in strip.text, 20), strip.text

        await pilot.press("g")
        assert await wait_for(pilot, lambda: isinstance(app.screen, GpuScreen), 10)

        def gpu_text() -> str:
            return str(app.screen.query_one("#gprocs").render()) + \
                str(app.screen.query_one("#gtable").render())

        # the fault's line and the engines' processes in one reading: a sample taken as
        # the fault lands may show the Xid before the processes are listed again, so the
        # wait is for all of it, asking for the pod state again meanwhile
        assert await poll_until(lambda: all(w in gpu_text() for w in (
            "Xid 79", "FLASH", "Q27")), 30), gpu_text()
        activity = _text(app.screen.query_one("#gactivity").content)
        assert "tensor-bound" in activity and "memory-bound" in activity, activity
        assert "NV18" in _text(app.screen.query_one("#gtopo").content)
        await pilot.press("escape")

        _fault(app, demo, "GPUs healthy again")
        assert await poll_until(lambda: not firing("ecc:1") and not firing("throttle:0"), 60)
        assert firing("xid:0:79")  # an Xid stays on screen for its 15 minutes

    audit = [json.loads(x) for x in
             (demo.workdir / "state" / "audit.jsonl").read_text().splitlines()]
    observed = {r["arguments"]["alert"].split(":")[0] for r in audit
                if r["action"] == "gpu_fault"}
    assert {"xid", "ecc"} <= observed
    agent_log = (demo.pod_home(demo.pod_id) / "agent").rglob("*audit*")
    xids = [json.loads(x) for f in agent_log for x in f.read_text().splitlines()
            if '"xid"' in x]
    assert any(r.get("op") == "xid" and r.get("xid") == 79 for r in xids)
