"""One Xid, one alert (issue 47: the action log said one Xid twice).

Where the console reads GPUs from the pod's exporter or Prometheus (the wall, a console
without the agent), an Xid is ``DCGM_FI_DEV_XID_ERRORS``: a gauge of the GPU's last Xid
that holds its code for as long as the exporter runs. Each read dated it anew, so each
pod poll made another alert key (``xid:0:79:<t>``) and another ``ALERT GPU 0 Xid 79``
line. Read here over real HTTP, at reads ten seconds apart on the source's clock."""

from __future__ import annotations

import asyncio

from console.model.alerts import AlertBook
from console.model.gpu_state import XID_RECENT_S, conditions
from console.sources.collect.gpu_metrics import GpuMetrics
from console.sources.collect.http import HttpClient
from tests.support.exposition_server import ExpositionServer


def _exposition(xid0: int, uuid0: str = "GPU-aaaa") -> str:
    out = ["# TYPE DCGM_FI_DEV_XID_ERRORS gauge", "# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
    for gpu, uuid, xid in ((0, uuid0, xid0), (1, "GPU-bbbb", 0)):
        labels = f'gpu="{gpu}",UUID="{uuid}",modelName="NVIDIA H200"'
        out += [f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {xid}",
                f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 41"]
    return "\n".join(out) + "\n"


def test_the_last_xid_gauge_is_one_alert_however_often_it_is_read() -> None:
    server = ExpositionServer(_exposition(79)).start()
    clock = [1_000_000.0]

    async def main() -> list[str]:
        client = HttpClient()
        gm = GpuMetrics(client, 5.0, url=f"http://127.0.0.1:{server.port}/metrics",
                        clock=lambda: clock[0])
        book = AlertBook()
        said: list[str] = []

        async def poll(advance: float = 10.0) -> None:
            clock[0] += advance
            rep, _, _ = await gm.fetch_pod()
            assert rep.error is None and len(rep.gpus) == 2
            raised, _ = book.update(conditions(rep, set(), clock[0], 0.0, 0.0), clock[0])
            said.extend(a.title for a in raised)

        try:
            for _ in range(4):  # the same gauge at four pod polls: one event
                await poll()
            assert said == ["GPU 0 Xid 79: GPU has fallen off the bus"], said
            server.set(_exposition(48))  # another code: another Xid
            await poll()
            assert len(said) == 2 and said[1].startswith("GPU 0 Xid 48"), said
            server.set(_exposition(0))  # the exporter restarted: none now
            await poll()
            server.set(_exposition(79))  # and 79 again after it: a new one
            await poll()
            assert len(said) == 3 and said[2].startswith("GPU 0 Xid 79"), said
            # another pod's GPU (another UUID) with the same code is its own Xid
            server.set(_exposition(79, "GPU-cccc"))
            await poll()
            assert len(said) == 4 and said[3].startswith("GPU 0 Xid 79"), said
            # it ages out as an agent-reported Xid does, not re-raised at each read
            await poll(XID_RECENT_S + 1)
            await poll()
            assert len(said) == 4, said
            return said
        finally:
            await client.aclose()

    try:
        asyncio.run(main())
    finally:
        server.stop()
