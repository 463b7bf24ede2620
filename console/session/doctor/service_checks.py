"""The checks of what serves and watches the pod: the slots (health, models), Prometheus
(ready, targets up), the gateway (alive, its key), Alertmanager and the GPU exporter."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

from console.session.doctor.parts import Doctor
from console.session.doctor.report import Verdict, fail, ok, outside, skip, warn


# -- slots --------------------------------------------------------------------------
async def slots_health(d: Doctor, timeout_s: float) -> Verdict:
    probes = await d.slot_probes(timeout_s - 0.2)
    down = [p for p in probes if p.health != "up"]
    if down:
        what = "; ".join(f"{p.target.slot} at {p.target.base_url}: {outside(p.health_detail, 60)}"
                         for p in down)
        first = down[0].target.slot
        return fail(f"{len(down)} of {len(probes)} slot(s) down: {what}",
                    f"its log says why: `l` on the slot in the console, or `pod-agent logs "
                    f"{first}` on the pod; `r` in the console restarts it")
    return ok(f"{len(probes)} slot(s) answer /health: "
              f"{', '.join(p.target.slot for p in probes)}")


async def slots_models(d: Doctor, timeout_s: float) -> Verdict:
    probes = await d.slot_probes(timeout_s - 0.2)
    bad = [p for p in probes if p.health == "up"
           and p.target.served_model_name not in p.served_models]
    if bad:
        what = "; ".join(f"{p.target.slot} wants {p.target.served_model_name}, "
                         f"/v1/models lists {outside(', '.join(p.served_models) or 'none', 80)}"
                         + (f" ({outside(p.error, 60)})" if p.error else "") for p in bad)
        return fail(what, "the slot serves another model than its profile names: restart "
                          "it with today's profile (`r` in the console); a 401 means "
                          "VLLM_API_KEY is not the slots' key")
    up = [p for p in probes if p.health == "up"]
    if not up:
        return skip("no slot is up to list its models (see slots.health)")
    return ok(f"each slot serves its model: "
              f"{', '.join(f'{p.target.slot}={p.target.served_model_name}' for p in up)}")


# -- Prometheus, the gateway, Alertmanager, the exporter ---------------------------------
async def _ready(d: Doctor, url: str, timeout_s: float) -> tuple[bool, str]:
    from console.sources.collect.http import HttpError

    try:
        r = await d.client.get(url.rstrip("/") + "/-/ready", timeout=timeout_s)
    except HttpError as exc:
        return False, outside(exc.describe(), 120)
    return r.status_code == 200, f"HTTP {r.status_code}"


async def prometheus_reach(d: Doctor, timeout_s: float) -> Verdict:
    url = d.s.prometheus_url
    if not url:
        return skip("no prometheus_url: the console scrapes the slots itself")
    good, said = await _ready(d, url, timeout_s - 0.2)
    if not good:
        return fail(f"Prometheus at {url}: {said}",
                    "start Prometheus (`pod-console profile render` writes its "
                    "prometheus.yml) or fix prometheus_url")
    return ok(f"Prometheus at {url} is ready")


async def prometheus_targets_up(d: Doctor, timeout_s: float) -> Verdict:
    from console.operations.smoke import Smoke, SmokePlan

    if not d.s.prometheus_url:
        return skip("no prometheus_url")
    dep = d.deployment
    assert dep is not None
    plan = SmokePlan(served={}, slots={t.slot: t.served_model_name for t in dep.targets},
                     prometheus_url=d.s.prometheus_url, pod_id=d.s.pod.machine_id,
                     timeout_s=timeout_s - 0.2)
    good, said = await Smoke(plan, d.client).targets_up()
    if not good:
        return fail(f"Prometheus targets: {outside(said, 200)}",
                    "Prometheus must scrape each slot, labelled with its pod and slot: "
                    "load `pod-console profile render`'s prometheus.yml and check "
                    "Prometheus reaches the slots' ports")
    return ok(f"Prometheus targets {outside(said, 200)}")


async def gateway_reach(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.collect.http import HttpError

    url = d.s.gateway_url
    if not url:
        return skip("no gateway_url: users call the slots directly")
    try:
        r = await d.client.get(url.rstrip("/") + "/health/liveliness", timeout=timeout_s - 0.2)
    except HttpError as exc:
        return fail(f"the gateway at {url}: {outside(exc.describe(), 120)}",
                    "start the LiteLLM proxy on `pod-console profile render`'s litellm.yaml, "
                    "or fix gateway_url")
    if r.status_code != 200:
        return fail(f"the gateway at {url}: liveliness HTTP {r.status_code}",
                    "see the proxy's own log")
    return ok(f"the gateway at {url} is alive")


async def gateway_key(d: Doctor, timeout_s: float) -> Verdict:
    """The key users' requests and the console's smoke test send (``LITELLM_MASTER_KEY``)
    on ``/v1/models``, and the one the console's watcher sends on ``/metrics``
    (``gateway.key_env`` or ``gateway.key_file``), each as the console sends it."""
    from console.session.deployment import gateway_collector
    from console.sources.collect.http import HttpError

    s = d.s
    url = s.gateway_url
    if not url:
        return skip("no gateway_url")
    headers = ({"Authorization": f"Bearer {s.gateway_key.get_secret_value()}"}
               if s.gateway_key else None)
    try:
        r = await d.client.get(url.rstrip("/") + "/v1/models", timeout=timeout_s - 0.2,
                               headers=headers)
    except HttpError as exc:
        return skip(f"not checked: the gateway did not answer ({outside(exc.describe(), 80)})")
    # LiteLLM answers a key that is not its master key with 401, or, without a database
    # of virtual keys to look it up in, 400 "No connected db." (1.100)
    body = r.text[:2000].lower()
    refused = r.status_code in (401, 403) or (
        r.status_code == 400 and ("auth" in body or "no_db_connection" in body))
    if refused:
        if s.gateway_key is None:
            return fail(f"the gateway asks for a key (HTTP {r.status_code}) and "
                        "LITELLM_MASTER_KEY is not set",
                        "export LITELLM_MASTER_KEY with the proxy's master key (never in "
                        "the config file)")
        return fail(f"the gateway refused the key in LITELLM_MASTER_KEY (HTTP {r.status_code})",
                    "set LITELLM_MASTER_KEY to the proxy's master_key (its litellm.yaml's "
                    "general_settings)")
    if r.status_code != 200 and s.gateway_key is None:
        # LiteLLM 1.100 without a database answers a request with no key 500
        return fail(f"the gateway's /v1/models answered HTTP {r.status_code} without a key "
                    f"({outside(r.text, 100)}), and LITELLM_MASTER_KEY is not set",
                    "export LITELLM_MASTER_KEY with the proxy's master key (never in the "
                    "config file)")
    if r.status_code != 200:
        return warn(f"the gateway's /v1/models answered HTTP {r.status_code}: "
                    f"{outside(r.text, 120)}",
                    "see the proxy's own log")
    if s.gateway.watch and s.gateway.via == "direct":
        col = gateway_collector(s, d.client, timeout_s - 0.2)
        _, err = await col.scrape()
        if err is not None and ("key" in err or "401" in err or "403" in err):
            return fail(f"the gateway's metrics: {outside(err, 200)}",
                        f"set {s.gateway.key_env} (gateway.key_env) or gateway.key_file to a "
                        "key the proxy accepts on /metrics")
    how = "with LITELLM_MASTER_KEY" if s.gateway_key else "no key asked"
    return ok(f"the gateway lists its models ({how})")


async def alertmanager_reach(d: Doctor, timeout_s: float) -> Verdict:
    url = d.s.alertmanager_url
    if not url:
        return skip("no alertmanager_url: alerts stay in the console (and the webhook)")
    good, said = await _ready(d, url, timeout_s - 0.2)
    if not good:
        return fail(f"Alertmanager at {url}: {said}",
                    "start Alertmanager (`pod-console profile render` writes an "
                    "alertmanager.yml) or fix alertmanager_url: until then no alert is "
                    "delivered")
    return ok(f"Alertmanager at {url} is ready")


async def exporter_reach(d: Doctor, timeout_s: float) -> Verdict:
    from console.sources.collect.gpu_metrics import NO_GPU_READINGS, GpuMetrics

    s = d.s
    url = s.gpu_metrics_url
    if not url:
        return skip("no gpu_metrics_url: the GPUs are read from the agent")
    token = s.gpu_metrics_token.get_secret_value() if s.gpu_metrics_token else None
    rep = await GpuMetrics(d.client, timeout_s - 0.2, url=url, token=token).fetch()
    if rep.error == NO_GPU_READINGS:
        return warn(f"the GPU exporter at {url} answers but serves no GPU readings",
                    "see the exporter's log on the pod: it reads NVML (or the agent, "
                    "with --from-agent) and says why it has none")
    if rep.error:
        step = ("set GPU_METRICS_TOKEN to the exporter's token" if "401" in rep.error
                or "403" in rep.error else
                "start `pod-agent exporter` on the pod (`serve` runs it) or fix "
                "gpu_metrics_url")
        return fail(f"the GPU exporter at {url}: {outside(rep.error, 120)}", step)
    return ok(f"the GPU exporter at {url} serves {len(rep.gpus)} GPU(s)")


