"""The gateway source against the real LiteLLM proxy (``callbacks: ["prometheus"]``, a
master key) in front of small OpenAI-compatible backends on loopback, with a real
Prometheus scraping the proxy.

Two users drive traffic (told apart by the request's ``user`` field: LiteLLM's virtual
keys need its Postgres/prisma layer, whose engines cannot be downloaded here). One
backend is made to fail until LiteLLM puts it in cooldown. The console's figures equal
those read independently from the proxy's exposition and Prometheus's own on the same
data; per-user usage equals LiteLLM's own accounting of the same requests (each
answer's ``usage`` and ``x-litellm-response-cost``); the cooldown shows and alerts.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from console.config.settings import AlertTiming, GatewaySettings
from console.model.alerts import AlertBook
from console.model.gateway import GatewaySnapshot, conditions
from console.sources.collect.gateway import GatewayCollector
from console.sources.collect.http import HttpClient
from console.sources.collect.promql import PromClient
from tests.support import litellm_proxy, prometheus_server
from tests.support.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.litellm, pytest.mark.prometheus, pytest.mark.realtime]
COOLDOWN_S = 30


def _config(a: FakeOpenAI, b: FakeOpenAI, c: FakeOpenAI) -> str:
    def dep(group: str, mid: str, backend: FakeOpenAI) -> str:
        return (f"  - model_name: {group}\n"
                f"    litellm_params: {{model: openai/{group}, api_base: \"{backend.api_base}\","
                f" api_key: unused, input_cost_per_token: 0.000001,"
                f" output_cost_per_token: 0.000002}}\n"
                f"    model_info: {{id: {mid}}}\n")
    return ("model_list:\n" + dep("tiny", "tiny-a", a) + dep("tiny", "tiny-b", b)
            + dep("small", "small-c", c) + f"""
litellm_settings:
  callbacks: ["prometheus"]
  enable_end_user_cost_tracking_prometheus_only: true
  num_retries: 0
router_settings:
  allowed_fails: 1
  cooldown_time: {COOLDOWN_S}
  fallbacks: [{{tiny: [small]}}]
general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
""")


@pytest.fixture(scope="module")
def gw(tmp_path_factory) -> Iterator[SimpleNamespace]:  # type: ignore[no-untyped-def]
    for ok, what in ((litellm_proxy.available(), "the LiteLLM venv (tests/support/"
                      "litellm_venv.sh)"), (prometheus_server.available(), "prometheus")):
        if not ok:
            if os.environ.get("CI"):
                pytest.fail(f"{what} is missing")
            pytest.skip(f"{what} is missing")
    root = tmp_path_factory.mktemp("gateway")
    backends = [FakeOpenAI(n) for n in ("a", "b", "c")]
    for x in backends:
        x.start()
    proxy = litellm_proxy.LiteLLMProxy(root / "litellm", _config(*backends))
    proxy.start()
    key = root / "gw.key"
    key.write_text(litellm_proxy.MASTER_KEY + "\n")
    prom = prometheus_server.PrometheusServer(
        root / "prom", [f"127.0.0.1:{proxy.port}"], scrape_interval_s=1.0,
        bearer_file=key, metrics_path="/metrics/")
    prom.start()
    try:
        yield SimpleNamespace(proxy=proxy, prom=prom, key=key, a=backends[0],
                              b=backends[1], c=backends[2])
    finally:
        prom.stop()
        proxy.stop()
        for x in backends:
            x.stop()


def _chat(proxy: litellm_proxy.LiteLLMProxy, user: str, n: int) -> list[httpx.Response]:
    out = []
    with httpx.Client(timeout=60) as cl:
        for i in range(n):
            r = cl.post(proxy.url + "/v1/chat/completions",
                        headers={"Authorization": f"Bearer {litellm_proxy.MASTER_KEY}"},
                        json={"model": "tiny", "user": user, "max_tokens": 3 + i % 4,
                              "messages": [{"role": "user", "content": "hello " * (1 + i)}]})
            out.append(r)
    return out


def _poll(col: GatewayCollector) -> GatewaySnapshot:
    async def run() -> GatewaySnapshot:
        try:
            return await col.poll(time.time())
        finally:
            await col.aclose()
    return asyncio.run(run())


async def _poll_keep(col: GatewayCollector) -> GatewaySnapshot:
    """One poll on this loop; the collector keeps its scrapes for the next."""
    try:
        return await col.poll(time.time())
    finally:
        await col.aclose()


def _collector(gw: SimpleNamespace, **kw: object) -> GatewayCollector:
    settings = GatewaySettings(key_file=gw.key, cooldown_s=COOLDOWN_S, **kw)  # type: ignore[arg-type]
    return GatewayCollector(gw.proxy.url, settings, window_s=300.0, timeout_s=5.0)


def _prom_value(prom: prometheus_server.PrometheusServer, expr: str,
                by: str) -> dict[str, float]:
    return {r["metric"].get(by, ""): float(r["value"][1]) for r in prom.query(expr)}


def test_gateway_figures_users_and_cooldown(gw: SimpleNamespace, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # a console without the key: a clear message naming the setting (the real proxy's 401)
    monkeypatch.delenv("LITELLM_MASTER_KEY", raising=False)
    keyless = _poll(GatewayCollector(gw.proxy.url, GatewaySettings(), 300.0, 5.0))
    assert keyless.live and keyless.ready
    assert keyless.metrics_error and "LITELLM_MASTER_KEY" in keyless.metrics_error
    assert "gateway.key_env" in keyless.metrics_error

    live = _collector(gw)

    asyncio.run(_poll_keep(live))  # the window's earlier end
    time.sleep(1.1)

    answers = {"alice": _chat(gw.proxy, "alice", 6), "bob": _chat(gw.proxy, "bob", 4)}
    gw.b.failing = True  # tiny-b fails until LiteLLM cools it down
    # allowed_fails is 1: its second failure in the minute cools it down. Which deployment
    # a request goes to is the router's draw (a run saw one failure in nine requests, and
    # no cooldown), so bob asks until two have failed
    deadline = time.time() + 60
    while gw.b.failed < 2 and time.time() < deadline:
        answers["bob"] += _chat(gw.proxy, "bob", 1)
    assert gw.b.failed >= 2
    answers["bob"] += _chat(gw.proxy, "bob", 4)  # routed around it (or fallen back)
    assert all(r.status_code == 200 for rs in answers.values() for r in rs), [
        r.text[:200] for rs in answers.values() for r in rs if r.status_code != 200]

    # the router's failure callback records the cooldown beside the answer, not before
    # it: the console sees it within a few scrapes, well inside the 30 s cooldown
    deadline = time.time() + 20
    while True:
        snap = asyncio.run(_poll_keep(live))
        assert snap.metrics_error is None, snap.metrics_error
        dep = {d.model_id: d for d in snap.deployments}
        if dep["tiny-b"].status == "cooldown" or time.time() > deadline:
            break
        time.sleep(0.5)
    assert dep["tiny-b"].status == "cooldown", dep["tiny-b"]
    assert dep["tiny-b"].figure("failures") == gw.b.failed
    assert dep["tiny-b"].figure("errors_5xx") == gw.b.failed
    assert (dep["tiny-b"].figure("cooldowns") or 0) >= 1
    assert dep["tiny-a"].status == "healthy"
    assert snap.window_s is not None and snap.window_s > 1
    sent = sum(len(v) for v in answers.values())
    assert snap.total["requests_per_s"] == pytest.approx(
        (snap.total["requests"] or 0) / snap.window_s)
    assert (snap.total["requests"] or 0) >= sent

    # per-user usage equals LiteLLM's own accounting of the same requests
    users = {u.name: u for u in snap.users}
    for who, rs in answers.items():
        u = users[who]
        assert u.requests == len(rs)
        assert u.tokens == sum(r.json()["usage"]["total_tokens"] for r in rs)
        assert u.spend == pytest.approx(
            sum(float(r.headers["x-litellm-response-cost"]) for r in rs), rel=1e-9)
        assert u.last_seen is not None and time.time() - u.last_seen < 120
    assert {u.name for u in snap.active_users(time.time(), 3600)} == {"alice", "bob"}

    # the cooldown alerts within one refresh + for:
    timing = AlertTiming(down_for_s=2.0, for_s=2.0, hold_s=5.0)
    conds = conditions(snap, None, live.settings, timing)
    assert any(c.key == "gw-cooldown:tiny-b" for c in conds), conds
    book = AlertBook()
    book.update(conds, 0.0)
    fired, _ = book.update(conds, 2.0)
    assert any(a.key == "gw-cooldown:tiny-b" for a in fired)

    # lifetime figures (one scrape) against Prometheus's on the same samples: wait until
    # its latest scrape holds every request
    fresh = _poll(_collector(gw))
    total = fresh.total["requests"]
    deadline = time.time() + 60
    while time.time() < deadline:
        got = _prom_value(gw.prom, "sum(litellm_deployment_total_requests_total)", "")
        if got.get("") == total:
            break
        time.sleep(0.5)
    fresh = _poll(_collector(gw))  # nothing moved since (no traffic)
    assert fresh.total["requests"] == total
    prom_req = _prom_value(gw.prom, "sum by (model_id) "
                           "(litellm_deployment_total_requests_total)", "model_id")
    prom_fail = _prom_value(gw.prom, 'sum by (model_id) (litellm_deployment_failure_'
                            'responses_total{exception_status=~"5.."})', "model_id")
    fdep = {d.model_id: d for d in fresh.deployments}
    for mid, v in prom_req.items():
        assert fdep[mid].figure("requests") == v
    assert fdep["tiny-b"].figure("errors_5xx") == prom_fail["tiny-b"]
    for fam, key in (("litellm_overhead_latency_metric", "overhead_p95_s"),
                     ("litellm_llm_api_latency_metric", "latency_p95_s"),
                     ("litellm_request_total_latency_metric", "total_latency_p95_s")):
        prom_q = _prom_value(gw.prom, f"histogram_quantile(0.95, sum by (model_id, le) "
                             f"({fam}_bucket))", "model_id")
        for mid, v in prom_q.items():
            if not math.isnan(v):
                assert fdep[mid].figure(key) == pytest.approx(v, rel=1e-9), (fam, mid)
    prom_state = _prom_value(gw.prom, "max by (model_id) (litellm_deployment_state)",
                             "model_id")
    assert prom_state["tiny-b"] == fdep["tiny-b"].figure("state") == 2.0

    # the same through Prometheus: the figures as the direct scrape reads them
    async def via_prom() -> GatewaySnapshot:
        client = HttpClient()
        col = _collector(gw, via="prometheus")
        col.prom = PromClient(gw.prom.url, client, timeout=5.0)
        col.prom_selector = ',job="vllm"'  # the job tests/support/prometheus_server names
        try:
            return await col.poll(time.time())
        finally:
            await client.aclose()
            await col.aclose()
    ps = asyncio.run(via_prom())
    assert ps.metrics_error is None and ps.via == "prometheus"
    pdep = {d.model_id: d for d in ps.deployments}
    for mid, d in fdep.items():
        assert pdep[mid].figure("requests") is not None
        for key in ("overhead_p95_s", "latency_p95_s", "state"):
            assert pdep[mid].figure(key) == d.figure(key), (mid, key)
    # over the window (Prometheus's samples a window ago: before any traffic), the
    # increases are the lifetime counts
    assert ps.total["requests"] == fresh.total["requests"]
    assert {u.name: u.requests for u in ps.users if u.name in answers} == {
        who: len(rs) for who, rs in answers.items()}
    print(f"gateway: {fresh.total['requests']:g} calls, tiny-b {gw.b.failed} failures, "
          f"overhead p95 {fdep['tiny-a'].figure('overhead_p95_s')}")


def test_prometheus_path_says_when_it_holds_nothing(tmp_path: Path) -> None:
    async def run() -> GatewaySnapshot:
        col = GatewayCollector("http://127.0.0.1:9", GatewaySettings(via="prometheus"),
                               300.0, 1.0)
        try:
            return await col.poll(time.time())
        finally:
            await col.aclose()
    snap = asyncio.run(run())
    assert snap.live is False and "prometheus_url" in (snap.metrics_error or "")


def test_status_json_and_metrics_gateway(gw: SimpleNamespace, tmp_path: Path) -> None:
    """``status --json`` carries the gateway block; ``metrics URL --gateway`` prints the
    gateway's figures (the key from the environment, never argv)."""
    import json
    import subprocess
    import sys

    import yaml

    from tests.conftest import REPO

    _chat(gw.proxy, "carol", 2)
    prof = tmp_path / "profiles"
    prof.mkdir()
    doc = {"gpu_type_ids": ["GPU A1"], "gpu_count": 1, "image": "sim/vllm:latest",
           "slots": {"TINY": {"served_model_name": "tiny", "hf_repo_id": "sim/a",
                              "port": gw.a.port, "gpus": [0], "gpu_util": 0.4,
                              "max_model_len": 4096}}}
    (prof / "10-test.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"profiles_dir: {prof}\nstate_dir: {tmp_path / 'state'}\n"
                   f"pod:\n  host: 127.0.0.1\ngateway_url: {gw.proxy.url}\n"
                   f"gateway:\n  key_file: {gw.key}\n  cooldown_s: {COOLDOWN_S}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM")}
    env["PYTHONPATH"] = str(REPO)
    r = subprocess.run([sys.executable, "-m", "console.cli", "status", "--json", "--config",
                        str(cfg), "--sample", "1"], capture_output=True, text=True,
                       timeout=120, env=env, cwd=REPO)
    assert r.returncode == 0, r.stderr
    block = json.loads(r.stdout)["gateway"]
    assert block["live"] and block["ready"] and block["metrics_error"] is None
    assert block["window_s"] is not None and block["window_s"] >= 1
    assert {"tiny-a", "tiny-b", "small-c"} <= {d["model_id"] for d in block["deployments"]}
    assert {"alice", "bob", "carol"} <= {u["name"] for u in block["users"]}
    assert litellm_proxy.MASTER_KEY not in r.stdout + r.stderr

    direct = _poll(_collector(gw))
    env["LITELLM_MASTER_KEY"] = litellm_proxy.MASTER_KEY
    m = subprocess.run([sys.executable, "-m", "console.cli", "metrics",
                        gw.proxy.url + "/metrics", "--gateway", "--json"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert m.returncode == 0, m.stderr
    figs = json.loads(m.stdout)
    assert figs["total"]["requests"] == direct.total["requests"]
    assert {d["model_id"]: d["requests"] for d in figs["deployments"]} == {
        d.model_id: d.figure("requests") for d in direct.deployments}
    table = subprocess.run([sys.executable, "-m", "console.cli", "metrics",
                            gw.proxy.url + "/metrics/", "--gateway"], capture_output=True,
                           text=True, timeout=120, env=env, cwd=REPO)
    assert table.returncode == 0 and "overhead p95" in table.stdout and "carol" in table.stdout
    del env["LITELLM_MASTER_KEY"]
    keyless = subprocess.run([sys.executable, "-m", "console.cli", "metrics",
                              gw.proxy.url + "/metrics/", "--gateway"], capture_output=True,
                             text=True, timeout=120, env=env, cwd=REPO)
    assert keyless.returncode == 1 and "LITELLM_MASTER_KEY" in keyless.stderr


WINDOWED = ("requests_per_s", "error_5xx_ratio", "latency_p95_s", "total_latency_p95_s",
            "overhead_p95_s")
REL = 1e-9


def _exposition(gw: SimpleNamespace):  # type: ignore[no-untyped-def]
    from console.sources.collect.exposition import parse
    from console.sources.collect.gateway import FAMILIES

    r = httpx.get(gw.proxy.url + "/metrics/", timeout=10,
                  headers={"Authorization": f"Bearer {litellm_proxy.MASTER_KEY}"})
    r.raise_for_status()
    return parse(r.text, FAMILIES)


def _settled(gw: SimpleNamespace):  # type: ignore[no-untyped-def]
    """The proxy's exposition once its counters stop moving (LiteLLM counts a call in its
    logging callback, after the answer is sent)."""
    names = ("litellm_deployment_total_requests_total",
             "litellm_deployment_failure_responses_total",
             "litellm_overhead_latency_metric_bucket")
    last = None
    deadline = time.time() + 60
    while time.time() < deadline:
        exp = _exposition(gw)
        now = {n: exp.series(n) for n in names}
        if now == last:
            return exp
        last = now
        time.sleep(1.0)
    raise AssertionError("the proxy's counters never settled")


def _same_series(a, b, family: str, mid: str) -> bool:  # type: ignore[no-untyped-def]
    """Every series of ``family`` for deployment ``mid`` in the later scrape was already
    in the earlier one: Prometheus's increase() of a series born inside the window starts
    at its first sample, the console's counts it from zero (both right, not comparable)."""
    def of(exp):  # type: ignore[no-untyped-def]
        return {k for k in exp.series(family) if dict(k).get("model_id") == mid}
    return of(b) <= of(a)


def test_windowed_figures_equal_prometheus_on_aligned_windows(gw: SimpleNamespace) -> None:
    """The gateway's figures over the window between two scrapes (requests/s, the 5xx
    share, the p95s) equal Prometheus's ``increase()``/``rate()`` and
    ``histogram_quantile`` on the same samples. Exact as in
    ``test_prometheus_agreement.py``: PromQL is evaluated at the timestamp of a scrape
    taken after the traffic, over a window that starts exactly on a scrape before it, so
    both edges sit on samples and Prometheus's extrapolation factor is 1; the console's
    two scrapes are taken while the proxy is idle, reading the same counters as those
    samples."""
    from console.sources.collect.gateway import deployment_key

    gw.b.failing = True  # calls routed to tiny-b fail: a 5xx share to compare

    def traffic() -> None:
        _chat(gw.proxy, "alice", 5)
        _chat(gw.proxy, "bob", 3)
        before = gw.b.failed
        deadline = time.time() + 60
        while gw.b.failed == before and time.time() < deadline:
            _chat(gw.proxy, "bob", 1)

    traffic()  # every series the window's traffic touches exists before it starts
    s0 = _settled(gw)
    gw.prom.wait_scrapes(2)
    t_load = time.time()
    traffic()
    s1 = _settled(gw)
    gw.prom.wait_scrapes(2)
    assert _exposition(gw).series("litellm_deployment_total_requests_total") == \
        s1.series("litellm_deployment_total_requests_total")  # still idle
    stamps = sorted(float(v[0]) for v in gw.prom.query("up[5m]")[0]["values"])
    t1 = max(t for t in stamps if t < t_load)
    t2 = stamps[-1]
    w_ms = round((t2 - t1) * 1000)
    w = f"{w_ms}ms"

    col = _collector(gw)
    # the two reads' instants: w apart, given on a small base because at an epoch instant
    # (~1.8e9 s) a float resolves only ~2.4e-7 s, which would put the window (and every
    # rate) ~1e-8 off PromQL's exact one
    base = 1000.0
    col.read(s0, base)
    snap = col.read(s1, base + w_ms / 1000)
    assert snap.window_s == pytest.approx(w_ms / 1000, rel=1e-12)

    def prom(expr: str, by: str = "model_id") -> dict[str, float]:
        return {r["metric"].get(by, ""): float(r["value"][1])
                for r in gw.prom.query(expr, at=t2)}

    req = "litellm_deployment_total_requests_total"
    fail5 = 'litellm_deployment_failure_responses_total{exception_status=~"5.."}'
    queries = {
        "requests_per_s": f"sum by (model_id) (rate({req}[{w}]))",
        "error_5xx_ratio": (f"sum by (model_id) (increase({fail5}[{w}])) / "
                            f"sum by (model_id) (increase({req}[{w}]))"),
        "latency_p95_s": ("histogram_quantile(0.95, sum by (model_id, le) "
                          f"(rate(litellm_llm_api_latency_metric_bucket[{w}])))"),
        "total_latency_p95_s": ("histogram_quantile(0.95, sum by (model_id, le) "
                                f"(rate(litellm_request_total_latency_metric_bucket[{w}])))"),
        "overhead_p95_s": ("histogram_quantile(0.95, sum by (model_id, le) "
                           f"(rate(litellm_overhead_latency_metric_bucket[{w}])))"),
    }
    families = {"requests_per_s": (req,),
                "error_5xx_ratio": (req, "litellm_deployment_failure_responses_total"),
                "latency_p95_s": ("litellm_llm_api_latency_metric_bucket",),
                "total_latency_p95_s": ("litellm_request_total_latency_metric_bucket",),
                "overhead_p95_s": ("litellm_overhead_latency_metric_bucket",)}
    dep = {d.model_id: d for d in snap.deployments}
    compared: dict[str, int] = dict.fromkeys(WINDOWED, 0)
    for key in WINDOWED:
        for mid, v in prom(queries[key]).items():
            if math.isnan(v) or not all(_same_series(s0, s1, f, mid) for f in families[key]):
                continue
            ours = dep[mid].figure(key)
            assert ours is not None and math.isclose(ours, v, rel_tol=REL, abs_tol=1e-12), (
                key, mid, ours, v)
            compared[key] += 1
    # the whole gateway, over the same window
    born = any(not _same_series(s0, s1, req, deployment_key(k) or "")
               for k in s1.series(req))
    if not born:
        total = prom(f"sum(rate({req}[{w}]))", by="")[""]
        assert math.isclose(snap.total["requests_per_s"] or 0.0, total, rel_tol=REL)
        share = prom(f"sum(increase({fail5}[{w}])) / sum(increase({req}[{w}]))", by="")
        if share and not math.isnan(share[""]):
            assert math.isclose(snap.total["error_5xx_ratio"] or 0.0, share[""],
                                rel_tol=REL, abs_tol=1e-12)
    # tiny-a serves in every window: its rate and its latencies are always compared
    assert min(compared["requests_per_s"], compared["overhead_p95_s"],
               compared["latency_p95_s"]) >= 1, compared
    assert (dep["tiny-a"].figure("requests_per_s") or 0) > 0
    print(f"gateway window {w_ms} ms: compared {compared}; 5xx share "
          f"{snap.total.get('error_5xx_ratio')}, tiny-b "
          f"{dep['tiny-b'].figure('error_5xx_ratio')}")
