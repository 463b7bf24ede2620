"""The rules ``profile render`` writes are the console's (issue 43, item 4): ``promtool
check rules`` passes, the rendered ``alertmanager.yml`` passes ``amtool check-config``,
and a ``promtool test rules`` file generated from one recording — every evaluation the
console judged with its own ``evaluate`` and ``AlertBook`` — shows Prometheus firing and
resolving the slot-down and KV alerts at the same evaluations, with the labels the console
sends Alertmanager."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from console.config.settings import AlertTiming, GatewaySettings, Settings, SlotThresholds
from console.model.alerts import AlertBook, evaluate
from console.model.history import quantile_over_time
from console.model.model_figures import ModelFigures
from console.model.snapshot import DeploymentSnapshot, SlotSnapshot
from console.session.alertmanager import Where, labels_of
from console.sources import alert_rules
from pod_agent.profiles import load_profile
from tests.conftest import PROFILES

STEP = 10
"""Seconds between two recorded polls, and Prometheus's evaluation interval."""
POD, PROFILE = "p1", "rtx6000-2x"


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{tool} is not installed; .ci/run must install it")
        pytest.skip(f"{tool} not installed")


def _settings() -> Settings:
    # a window that is no multiple of the step: no sample on its edge, where the two
    # may count differently
    return Settings(profiles_dir=PROFILES, window_s=65,
                    alerts=AlertTiming(down_for_s=20, for_s=30, hold_s=20))


def _recording() -> dict[str, list[tuple[bool, float]]]:
    """Each slot's (up, KV usage) at every poll: Q27 goes down for a minute, comes back,
    then its KV fills past the threshold for two minutes and drains; FLASH stays fine."""
    q27: list[tuple[bool, float]] = [(True, 0.3)] * 4 + [(False, 0.0)] * 7 + [(True, 0.3)] * 8
    q27 += [(True, 0.85)] * 12 + [(True, 0.2)] * 16
    return {"Q27": q27, "FLASH": [(True, 0.1)] * len(q27)}


def _console(settings: Settings, rec: dict[str, list[tuple[bool, float]]]
             ) -> list[dict[str, Any]]:
    """What the console's own rules make of the recording: at every evaluation, the
    slot-down and KV alerts firing (their keys and the labels it sends)."""
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    book = AlertBook()
    out = []
    for i in range(len(rec["Q27"])):
        now = float(i * STEP)
        slots = []
        for name, series in rec.items():
            up, _ = series[i]
            # the KV p99 over the window, as quantile_over_time over [now - window, now]
            kv = [v for j, (u, v) in enumerate(series[: i + 1])
                  if u and now - settings.window_s <= j * STEP]
            slot = profile.slots[name]
            slots.append(SlotSnapshot(
                slot=name, served_model_name=slot.served_model_name, port=slot.port,
                url="", health="up" if up else "down", fetched_at=now,
                figures=ModelFigures(slot.served_model_name, None, {}) if up else None,
                kv_p99=quantile_over_time(0.99, kv) if up and kv else None))
        conds = [c for c in evaluate(DeploymentSnapshot(PROFILE, tuple(slots), now), None,
                                     profile, settings, now)
                 if c.key.split(":")[0] in ("down", "kv")]
        book.update(conds, now)
        out.append({a.key: labels_of(a, Where(PROFILE, POD)) for a in book.firing()})
    return out


def _series(rec: dict[str, list[tuple[bool, float]]]) -> list[dict[str, str]]:
    out = []
    for name, series in rec.items():
        target = f'slot="{name}",pod="{POD}",profile="{PROFILE}"'
        up = " ".join("1" if u else "0" for u, _ in series)
        kv = " ".join(f"{v:g}" if u else "_" for u, v in series)  # no scrape: no sample
        out.append({"series": f'up{{job="vllm",instance="{name}",{target}}}', "values": up})
        out.append({"series": f'vllm:kv_cache_usage_perc{{job="vllm",instance="{name}",'
                              f'model_name="m-{name}",{target}}}', "values": kv})
    return out


def _expected(rules: dict[str, Any], key: str, slot: str) -> dict[str, Any]:
    """The alert Prometheus must show for the console's ``key``: its labels (the
    series' and the rule's) and annotations."""
    name = "SlotDown" if key.startswith("down:") else "SlotKvCacheHigh"
    (rule,) = [r for g in rules["groups"] for r in g["rules"] if r["alert"] == name
               and r["labels"].get("slot", slot) == slot]
    labels = {"slot": slot, "pod": POD, "profile": PROFILE, **rule["labels"]}
    ann = {k: v.replace("{{ $labels.slot }}", slot) for k, v in rule["annotations"].items()}
    return {"exp_labels": labels, "exp_annotations": ann}


def test_prometheus_fires_and_resolves_at_the_consoles_evaluations(tmp_path: Path) -> None:
    _need("promtool")
    settings = _settings()
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    rules = alert_rules.render_rules(profile, settings, "default")
    (tmp_path / "rules.yml").write_text(alert_rules.dump(rules))
    r = subprocess.run(["promtool", "check", "rules", str(tmp_path / "rules.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = _recording()
    judged = _console(settings, rec)
    # the recording makes each alert fire and resolve (else the comparison says little)
    for key in ("down:Q27", "kv:Q27"):
        fired = [i for i, f in enumerate(judged) if key in f]
        assert fired and fired[-1] < len(judged) - 1, (key, fired)
    tests = []
    for i, firing in enumerate(judged):
        for name, prefix in (("SlotDown", "down:"), ("SlotKvCacheHigh", "kv:")):
            exp = []
            for key, labels in firing.items():
                if key.startswith(prefix):
                    want = _expected(rules, key, key.split(":", 1)[1])
                    # the console's labels are Prometheus's: one alert in Alertmanager
                    assert labels == {**want["exp_labels"], "alertname": name}, (
                        labels, want)
                    exp.append(want)
            tests.append({"eval_time": f"{i * STEP}s", "alertname": name, "exp_alerts": exp})
    doc = {"rule_files": ["rules.yml"], "evaluation_interval": f"{STEP}s",
           "tests": [{"interval": f"{STEP}s", "input_series": _series(rec),
                      "alert_rule_test": tests}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = subprocess.run(["promtool", "test", "rules", str(tmp_path / "test.yml")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]


def test_the_rendered_files_pass_the_real_checkers(tmp_path: Path) -> None:
    _need("promtool")
    out = tmp_path / "out"
    # a gateway (its URL with a password, which the rendered job must not carry)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"profiles_dir": str(PROFILES),
                                   "gateway_url": "https://ops:s3cret@gw.example:4000"}))
    r = subprocess.run(["python3", "-m", "console.cli", "profile", "render",
                        str(PROFILES / "10-rtx6000-2x.yaml"), "--config", str(cfg),
                        "--out", str(out),
                        "--pod-id", POD, "--slack-url-file", str(tmp_path / "slack_url")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for args in (["check", "rules", str(out / "prometheus/rules.yml")],
                 ["check", "config", str(out / "prometheus/prometheus.yml")]):
        r = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
    # the gateway's series labelled as the console labels its gateway alerts
    prom = yaml.safe_load((out / "prometheus/prometheus.yml").read_text())
    (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == alert_rules.GATEWAY_JOB]
    assert job["scheme"] == "https" and job["metrics_path"] == "/metrics/"
    assert job["static_configs"] == [{"targets": ["gw.example:4000"],
                                      "labels": {"pod": POD, "profile": PROFILE}}]
    assert "s3cret" not in (out / "prometheus/prometheus.yml").read_text()
    am = yaml.safe_load((out / "alertmanager.yml").read_text())
    (slack,) = [c for rcv in am["receivers"] for c in rcv.get("slack_configs", [])]
    assert slack["api_url_file"] == str(tmp_path / "slack_url")  # the URL is never in it
    assert any(rt["matchers"] == ['alertname="Watchdog"'] and rt["receiver"] == "heartbeat"
               for rt in am["route"]["routes"])
    assert [rcv for rcv in am["receivers"] if rcv["name"] == "heartbeat"] == [
        {"name": "heartbeat"}]  # a null receiver until a dead-man's switch is wired
    # the pod agent's heartbeat to a receiver of its own, each sender and pod its own
    # group (a switch hearing the console's would not notice an agent gone)
    (dog,) = [rt for rt in am["route"]["routes"] if rt["matchers"] == ['alertname="Watchdog"']]
    assert {"sender", "pod"} <= set(dog["group_by"])
    assert dog["routes"] == [{"matchers": ['sender="pod-agent"'],
                              "receiver": "heartbeat-pod-agent"}]
    assert {"name": "heartbeat-pod-agent"} in am["receivers"]
    # and the file says how a dead-man's switch is wired
    text = (out / "alertmanager.yml").read_text()
    assert text.startswith("# Rendered by `pod-console profile render`")
    assert "webhook_configs" in text.split("route:", 1)[0]
    if shutil.which("amtool"):
        (tmp_path / "slack_url").write_text("https://hooks.slack.invalid/x\n")
        r = subprocess.run(["amtool", "check-config", str(out / "alertmanager.yml")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr


# -- the GPUs: the exporter's DCGM_FI_DEV_* series against gpu_state and gpu_faults --------

GPU_NAMES = {"ecc": "GpuEccErrors", "remapfail": "GpuRowRemapFailed",
             "remap": "GpuRowRemapPending", "throttle": "GpuThrottled", "heat": "GpuHot",
             "xid": "GpuXid"}
"""The console's GPU rules this recording makes fire (key prefix → alertname)."""
GpuPoll = dict[str, float]


def _gpu_recording() -> tuple[list[float], dict[int, list[GpuPoll]]]:
    """The pod's start time and each GPU's exporter readings at every poll. GPU 0 runs
    hot (within 5 degrees of its slowdown), then throttles for heat, then is capped for
    power (benign: no alert), then falls off the bus (Xid 79) until the pod's next run;
    GPU 1 has double-bit ECC errors for a while, then a failed row remap, then a remap
    pending."""
    n = 48
    ok: GpuPoll = {"temp": 70, "slow": 90, "mask": 0, "dbe": 0, "pending": 0, "failed": 0,
                   "xid": 0}
    g0 = [dict(ok) for _ in range(n)]
    g1 = [dict(ok) for _ in range(n)]
    for i in range(3, 11):
        g0[i]["temp"] = 86
    for i in range(11, 17):  # sw thermal slowdown (and idle), then hw slowdown
        g0[i] |= {"temp": 88, "mask": 0x20 | 0x1 if i < 14 else 0x8 | 0x40}
    for i in range(17, 20):
        # power cap, sync boost, display clocks: the GPU working, not trouble (bits on
        # either side of the thermal ones: the rules' bit arithmetic is tried)
        g0[i]["mask"] = 0x4 | 0x10 | 0x100
    for i in range(22, 38):
        g0[i]["xid"] = 79
    for i in range(5, 13):
        g1[i]["dbe"] = 2
    for i in range(15, 19):
        g1[i]["failed"] = 1
    for i in range(24, 29):
        g1[i]["pending"] = 1
    started = [0.0 if i < 38 else 38.0 * STEP for i in range(n)]  # the pod's next run
    return started, {0: g0, 1: g1}


def _gpu(index: int, r: GpuPoll) -> Any:
    from console.model.gpu_state import Gpu
    from pod_agent.gpus import BENIGN_THROTTLE, THROTTLE_REASONS

    mask = int(r["mask"]) & ~BENIGN_THROTTLE
    return Gpu(index=index, temp_c=r["temp"], temp_slowdown_c=r["slow"],
               throttled=tuple(name for bit, name in THROTTLE_REASONS.items() if mask & bit),
               ecc_dbe_volatile=int(r["dbe"]), remap_pending=bool(r["pending"]),
               remap_failed=bool(r["failed"]), retired_pending=False)


def _gpu_console(settings: Settings, started: list[float],
                 rec: dict[int, list[GpuPoll]]) -> list[dict[str, Any]]:
    """What the console's own GPU rules make of the recording, as a session judges it:
    each reading told to its fault book first (``observe_pod``), then ``evaluate``."""
    from console.model.alerts import observe_pod
    from console.model.gpu_faults import FaultBook
    from console.model.gpu_state import GpuReport, XidRecord
    from console.model.snapshot import PodSnapshot

    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    book, faults = AlertBook(), FaultBook()
    xid_at: dict[int, float] = {}
    out = []
    for i in range(len(started)):
        now = float(i * STEP)
        xids = []
        for gpu, series in rec.items():
            code = int(series[i]["xid"])
            if code and gpu not in xid_at:
                xid_at[gpu] = now  # the agent's event, reported from then on
            if not code:
                xid_at.pop(gpu, None)  # a new agent (the pod's next run): no events
            elif gpu in xid_at:
                xids.append(XidRecord(xid_at[gpu], gpu, code, "critical", "off the bus", ""))
        report = GpuReport(tuple(_gpu(g, s[i]) for g, s in rec.items()), "nvml",
                           sampled_at=now, xids=tuple(xids))
        pod = PodSnapshot(pod_id=POD, status="RUNNING", started_at=started[i], gpus=report,
                          fetched_at=now)
        ended = observe_pod(faults, pod, profile, settings, now)
        conds = [c for c in evaluate(None, pod, profile, settings, now, faults=faults)
                 if c.key.split(":")[0] in GPU_NAMES]
        book.update(conds, now, ended)
        out.append({a.key: labels_of(a, Where(PROFILE, POD)) for a in book.firing()})
    return out


def _gpu_series(rec: dict[int, list[GpuPoll]]) -> list[dict[str, str]]:
    fields = {"temp": "DCGM_FI_DEV_GPU_TEMP", "slow": "DCGM_FI_DEV_SLOWDOWN_TEMP",
              "mask": "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
              "dbe": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "pending": "DCGM_FI_DEV_ROW_REMAP_PENDING",
              "failed": "DCGM_FI_DEV_ROW_REMAP_FAILURE", "xid": "DCGM_FI_DEV_XID_ERRORS"}
    out = []
    for gpu, series in rec.items():
        # the exporter's labels (dcgm-exporter's), and the GPU target's pod and profile
        target = (f'job="gpu",instance="pod:9400",gpu="{gpu}",UUID="GPU-{gpu}",'
                  f'device="nvidia{gpu}",modelName="NVIDIA H200",pod="{POD}",'
                  f'profile="{PROFILE}"')
        for key, name in fields.items():
            out.append({"series": f"{name}{{{target}}}",
                        "values": " ".join(f"{r[key]:g}" for r in series)})
        out.append({"series": f"DCGM_FI_DEV_RETIRED_PENDING{{{target}}}",
                    "values": " ".join("0" for _ in series)})
    return out


def test_prometheus_fires_and_resolves_the_gpu_alerts_at_the_consoles_evaluations(
        tmp_path: Path) -> None:
    _need("promtool")
    settings = _settings()
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    rules = alert_rules.render_rules(profile, settings, "default")
    (tmp_path / "rules.yml").write_text(alert_rules.dump(rules))
    started, rec = _gpu_recording()
    judged = _gpu_console(settings, started, rec)
    # every GPU rule fires and resolves in the recording (else the comparison says little)
    for prefix in GPU_NAMES:
        fired = [i for i, f in enumerate(judged) if any(k.startswith(prefix + ":")
                                                        for k in f)]
        assert fired and fired[-1] < len(judged) - 1, (prefix, fired)
    by_name = {r["alert"]: r for g in rules["groups"] for r in g["rules"]
               if r["alert"] != "GpuXid"}
    tests = []
    for i, firing in enumerate(judged):
        for prefix, name in GPU_NAMES.items():
            exp = []
            for key, labels in firing.items():
                if key.split(":")[0] != prefix:
                    continue
                rule = by_name.get(name) or next(
                    r for g in rules["groups"] for r in g["rules"]
                    if r["alert"] == name and r["labels"]["xid"] == labels.get("xid"))
                want = {"pod": POD, "profile": PROFILE, "gpu": labels["gpu"],
                        **rule["labels"]}
                # the console's labels are Prometheus's: one alert in Alertmanager
                assert labels == {**want, "alertname": name}, (labels, want)
                exp.append({"exp_labels": want, "exp_annotations": {
                    k: v.replace("{{ $labels.gpu }}", labels["gpu"])
                    for k, v in rule["annotations"].items()}})
            tests.append({"eval_time": f"{i * STEP}s", "alertname": name, "exp_alerts": exp})
    doc = {"rule_files": ["rules.yml"], "evaluation_interval": f"{STEP}s",
           "tests": [{"interval": f"{STEP}s", "input_series": _gpu_series(rec),
                      "alert_rule_test": tests}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = subprocess.run(["promtool", "test", "rules", str(tmp_path / "test.yml")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]


# -- the gateway: LiteLLM's series against gateway.conditions ----------------------------

GW_NAMES = {"gw-down": "GatewayDown", "gw-cooldown": "GatewayDeploymentCooldown",
            "gw-fallbacks": "GatewayFallbacksRising", "gw-5xx": "Gateway5xxHigh",
            "gw-overhead": "GatewayOverheadHigh"}
LES = ("0.1", "0.5", "1.0", "+Inf")
"""The overhead histogram's buckets here."""
SCOPED = {"Gateway5xxHigh", "GatewayOverheadHigh"}
"""Rendered twice: per model group, and for the whole gateway."""
DEPLOYMENTS = {"tiny-a": ("tiny", 33391), "tiny-b": ("tiny", 42737), "small-c": ("small", 42183)}
GwPoll = dict[str, float] | None
"""One scrape of the gateway: each counter's value (None: the gateway is down)."""


def _gw_recording() -> list[GwPoll]:
    """LiteLLM's counters at every poll: each deployment serves 10 calls a poll; tiny-b
    fails all of its calls and is cooled down twice (state 2) for eight polls, its
    calls falling back to another group, then recovers; later one in ten of small-c's
    calls fail (its group's 5xx over the limit, not the whole gateway's); then the
    gateway is down for a while; after it, small-c's calls spend 0.5 s to 1 s in the
    gateway itself (its group's overhead p95 over the limit), the others' under 0.1 s.
    The histogram's buckets start well above 0 (a bucket that starts at 0 in Prometheus's
    window is extrapolated less than the others: a p95 of its own)."""
    c = {f"req:{d}": 0.0 for d in DEPLOYMENTS} | {f"fail:{d}": 0.0 for d in DEPLOYMENTS}
    c |= {"cooled:tiny-b": 0.0, "fallback": 0.0, "state:tiny-b": 0.0}
    c |= {f"oh:{d}:{le}": 1000.0 for d in DEPLOYMENTS for le in LES}
    out: list[GwPoll] = []
    for i in range(72):
        if 40 <= i < 45:
            out.append(None)
            continue
        for d in DEPLOYMENTS:
            c[f"req:{d}"] += 10
        if 5 <= i < 13:
            c["fail:tiny-b"] += 10
            c["fallback"] += 10
            c["state:tiny-b"] = 2.0
            c["cooled:tiny-b"] += i in (5, 8)
        else:
            c["state:tiny-b"] = 0.0  # LiteLLM: back to 0 on its next success
        if 25 <= i < 31:
            c["fail:small-c"] += 1
        if 60 <= i < 64:
            # small-c's first cooldown (LiteLLM creates the counter at 1), and a second,
            # while some of its calls still succeed (a cooldown, not "failing")
            c["fail:small-c"] += 2
            c["cooled:small-c"] = 1.0 if i < 62 else 2.0
            c["state:small-c"] = 2.0
        else:
            c["state:small-c"] = 0.0
        for d in DEPLOYMENTS:
            slow = d == "small-c" and 50 <= i < 55
            for le in LES:
                c[f"oh:{d}:{le}"] += 10 if not slow or le in ("1.0", "+Inf") else 0
        out.append(dict(c))
    return out


def _gw_text(r: dict[str, float]) -> str:
    """The scrape as LiteLLM's exposition (its label sets, ``tests/fixtures``)."""
    lines = []
    for d, (group, port) in DEPLOYMENTS.items():
        base = (f'api_base="http://127.0.0.1:{port}/v1",api_provider="openai",'
                f'litellm_model_name="{group}",model_id="{d}"')
        call = base + f',requested_model="{group}"'
        status = "500" if d == "tiny-b" else "503"
        lines += [f"litellm_deployment_state{{{base}}} {r.get(f'state:{d}', 0.0)}",
                  f"litellm_deployment_total_requests_total{{{call}}} {r[f'req:{d}']}",
                  f'litellm_deployment_failure_responses_total{{{call},exception_status='
                  f'"{status}"}} {r[f"fail:{d}"]}']
        for le in LES:
            lines.append(f'litellm_overhead_latency_metric_bucket{{{base},le="{le}",'
                         f'model_group="{group}"}} {r[f"oh:{d}:{le}"]}')
        if f"cooled:{d}" in r:
            lines.append(f'litellm_deployment_cooled_down_total{{{base},exception_status='
                         f'"{status}"}} {r[f"cooled:{d}"]}')
    lines.append('litellm_deployment_successful_fallbacks_total{exception_status="500",'
                 'fallback_model="small",model_id="None",requested_model="tiny"} '
                 f'{r["fallback"]}')
    return "\n".join(lines) + "\n"


def _gw_console(settings: Settings, rec: list[GwPoll]) -> list[dict[str, Any]]:
    """What the console's own gateway rules make of the recording: each scrape read by
    its gateway collector (the figures over the window, the cooldown trap), judged by
    ``gateway.conditions``."""
    from console.model.gateway import GatewaySnapshot
    from console.model.gateway import conditions as gw_conditions
    from console.sources.collect.exposition import parse
    from console.sources.collect.gateway import FAMILIES, GatewayCollector

    col = GatewayCollector("http://gw", settings.gateway, settings.window_s, 5.0)
    book = AlertBook()
    out = []
    for i, r in enumerate(rec):
        now = float(i * STEP)
        snap = (GatewaySnapshot("http://gw", now, live=False, ready=None) if r is None
                else col.read(parse(_gw_text(r), FAMILIES), now))
        conds = [c for c in gw_conditions(snap, None, settings.gateway, settings.alerts)
                 if c.key.split(":")[0] in GW_NAMES]
        book.update(conds, now)
        out.append({a.key: labels_of(a, Where(PROFILE, POD)) for a in book.firing()})
    return out


def _gw_series(rec: list[GwPoll]) -> list[dict[str, str]]:
    """The same scrapes as Prometheus stores them (job litellm, the target's pod and
    profile labels; no sample while the gateway is down, and ``up`` 0)."""
    target = f'job="litellm",instance="gw:4000",pod="{POD}",profile="{PROFILE}"'
    up = {"series": f"up{{{target}}}", "values": " ".join("0" if r is None else "1"
                                                             for r in rec)}
    values: dict[str, list[str]] = {}
    for i, r in enumerate(rec):
        if r is None:
            continue
        for line in _gw_text(r).splitlines():
            series, value = line.rsplit(" ", 1)
            values.setdefault(series, ["_"] * len(rec))[i] = value
    out = [up]
    for series, vals in values.items():
        name, labels = series.split("{", 1)
        out.append({"series": f"{name}{{{target},{labels}", "values": " ".join(vals)})
    return out


def test_prometheus_fires_and_resolves_the_gateway_alerts_at_the_consoles_evaluations(
        tmp_path: Path) -> None:
    _need("promtool")
    settings = Settings(profiles_dir=PROFILES, window_s=65,
                        alerts=AlertTiming(down_for_s=20, for_s=30, hold_s=20),
                        gateway=GatewaySettings(cooldown_s=15, error_5xx_ratio=0.05))
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    rules = alert_rules.render_rules(profile, settings, "default", scrape_s=STEP)
    (tmp_path / "rules.yml").write_text(alert_rules.dump(rules))
    rec = _gw_recording()
    judged = _gw_console(settings, rec)
    for key in ("gw-down", "gw-cooldown:tiny-b", "gw-fallbacks", "gw-5xx:tiny",
                "gw-5xx:the gateway", "gw-5xx:small", "gw-overhead:small",
                "gw-cooldown:small-c"):
        fired = [i for i, f in enumerate(judged) if key in f]
        assert fired and fired[-1] < len(judged) - 1, (key, fired)
    assert not any("gw-5xx:the gateway" in f for f in judged[20:40])  # small's alone
    gw_rules = [r for g in rules["groups"] for r in g["rules"]
                if r["alert"] in GW_NAMES.values()]
    tests = []
    for i, firing in enumerate(judged):
        for prefix, name in GW_NAMES.items():
            exp = []
            for key, labels in firing.items():
                if key.split(":")[0] != prefix:
                    continue
                scope = labels.get("scope")
                (rule,) = [r for r in gw_rules if r["alert"] == name and (
                    name not in SCOPED
                    or (r["labels"].get("scope") == "the gateway") == (scope == "the gateway"))]
                want = {"pod": POD, "profile": PROFILE, **rule["labels"]}
                if scope is not None:
                    want["scope"] = scope
                # the console's labels are Prometheus's: one alert in Alertmanager
                assert labels == {**want, "alertname": name}, (labels, want)
                exp.append({"exp_labels": want, "exp_annotations": {
                    k: v.replace("{{ $labels.scope }}", scope or "")
                    for k, v in rule["annotations"].items()}})
            tests.append({"eval_time": f"{i * STEP}s", "alertname": name, "exp_alerts": exp})
    doc = {"rule_files": ["rules.yml"], "evaluation_interval": f"{STEP}s",
           "tests": [{"interval": f"{STEP}s", "input_series": _gw_series(rec),
                      "alert_rule_test": tests}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = subprocess.run(["promtool", "test", "rules", str(tmp_path / "test.yml")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]


def _slo_recording() -> list[tuple[int, int]]:
    """Q27's requests per step of 10 s: (all, those at or under 0.25 s). Fast for a
    while, then one in five slow for two minutes, fast again, then idle (no request: no
    share, no alert on either side)."""
    return [(20, 20)] * 8 + [(20, 16)] * 12 + [(20, 20)] * 14 + [(0, 0)] * 10


def _slo_console(settings: Settings, rec: list[tuple[int, int]], start: float
                 ) -> list[dict[str, dict[str, str]]]:
    """The console's SLO alert at every evaluation: its bucket increases as Prometheus's
    ``increase`` reads them (``extrapolated_increase`` over the window's samples)."""
    from console.model.numbers import extrapolated_increase

    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    book = AlertBook()
    under, every, total_u, total_n = [], [], start, start
    out = []
    for i, (n, u) in enumerate(rec):
        total_n += n
        total_u += u
        now = float(i * STEP)
        every.append((now, total_n))
        under.append((now, total_u))

        def inc(series: list[tuple[float, float]], now: float = now) -> float:
            kept = [(t, v) for t, v in series if now - settings.window_s <= t <= now]
            return extrapolated_increase(kept, now - settings.window_s, now)

        buckets = {} if i == 0 else {"ttft": ((0.25, inc(under)), (float("inf"), inc(every)))}
        slots = [SlotSnapshot(
            slot=name, served_model_name=s.served_model_name, port=s.port, url="",
            health="up", fetched_at=now,
            figures=ModelFigures(s.served_model_name, settings.window_s, {},
                                 latency_buckets=buckets if name == "Q27" else {}))
            for name, s in profile.slots.items()]
        conds = [c for c in evaluate(DeploymentSnapshot(PROFILE, tuple(slots), now), None,
                                     profile, settings, now) if c.key.startswith("slo:")]
        book.update(conds, now)
        out.append({a.key: labels_of(a, Where(PROFILE, POD)) for a in book.firing()})
    return out


def test_prometheus_fires_the_slo_alert_at_the_consoles_evaluations(tmp_path: Path) -> None:
    """SLO attainment below the objective: the rendered rule (the same bucket edge, the
    same least count of requests) fires and resolves at the evaluations the console's
    own rule does, with the labels it sends Alertmanager."""
    _need("promtool")
    settings = _settings().model_copy(update={"thresholds": {"Q27": SlotThresholds(
        ttft_target_s=0.25, slo_objective=0.99)}})
    profile = load_profile(PROFILES / "10-rtx6000-2x.yaml")
    rules = alert_rules.render_rules(profile, settings, "default")
    (rule,) = [r for g in rules["groups"] for r in g["rules"]
               if r["alert"] == "SlotSloAttainmentLow"]
    assert 'le=~"0\\\\.250*"' in rule["expr"] and rule["labels"]["slot"] == "Q27"
    (tmp_path / "rules.yml").write_text(alert_rules.dump(rules))
    r = subprocess.run(["promtool", "check", "rules", str(tmp_path / "rules.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    rec = _slo_recording()
    start = 100000.0  # the counters' value before the recording: no zero clamp
    judged = _slo_console(settings, rec, start)
    fired = [i for i, f in enumerate(judged) if "slo:Q27" in f]
    assert fired and fired[0] > 8 and fired[-1] < len(judged) - 1, fired
    labels = {"slot": "Q27", "pod": POD, "profile": PROFILE, **rule["labels"]}
    ann = dict(rule["annotations"])
    tests = []
    for i, firing in enumerate(judged):
        exp = []
        if "slo:Q27" in firing:
            assert firing["slo:Q27"].items() <= {**labels, "alertname":
                                                 "SlotSloAttainmentLow"}.items()
            exp.append({"exp_labels": labels, "exp_annotations": ann})
        tests.append({"eval_time": f"{i * STEP}s", "alertname": "SlotSloAttainmentLow",
                      "exp_alerts": exp})
    target = f'slot="Q27",pod="{POD}",profile="{PROFILE}",model_name="m-Q27"'
    cum_n, cum_u, n_vals, u_vals = start, start, [], []
    for n, u in rec:
        cum_n += n
        cum_u += u
        n_vals.append(f"{cum_n:g}")
        u_vals.append(f"{cum_u:g}")
    series = [
        {"series": f'vllm:time_to_first_token_seconds_bucket{{job="vllm",le="0.25",'
                   f'{target}}}', "values": " ".join(u_vals)},
        {"series": f'vllm:time_to_first_token_seconds_bucket{{job="vllm",le="+Inf",'
                   f'{target}}}', "values": " ".join(n_vals)}]
    doc = {"rule_files": ["rules.yml"], "evaluation_interval": f"{STEP}s",
           "tests": [{"interval": f"{STEP}s", "input_series": series,
                      "alert_rule_test": tests}]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump(doc, sort_keys=False))
    r = subprocess.run(["promtool", "test", "rules", str(tmp_path / "test.yml")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
