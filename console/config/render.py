"""Laptop-side configs rendered from one profile: slots, LiteLLM, Prometheus targets, Gatus.

Every output is deterministic (sorted keys, no timestamps) so a re-render after
nothing changed is byte-identical and a diff shows exactly what a new pod
address changed. Files are written atomically (temp file + rename) because
Prometheus watches ``targets.json`` and ignores, but may log, half-written files.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import yaml
from msgspec import Struct, field

from pod_agent.launch import slot_command
from pod_agent.profile import Profile

PROBE_PROMPT = "Reply with the single word OK."


class PodAddress(Struct, frozen=True):
    """Where the pod's slots are reached from the laptop."""

    host: str = "127.0.0.1"
    pod_id: str = "local"
    scheme: str = "http"
    port_map: dict[int, int] = field(default_factory=dict)
    """Pod port → public port (RunPod direct TCP); unmapped ports are used as they are."""

    def hostport(self, port: int) -> str:
        return f"{self.host}:{self.port_map.get(port, port)}"

    def base_url(self, port: int) -> str:
        return f"{self.scheme}://{self.hostport(port)}"


def render_slots(profile: Profile, p2p_disabled: bool = False) -> dict[str, str]:
    out = {}
    for name in sorted(profile.slots):
        cmd = slot_command(profile, name, p2p_disabled=p2p_disabled)
        out[f"slots/{name}.json"] = _json(cmd.to_json_dict())
    return out


def render_litellm(profile: Profile, addr: PodAddress) -> str:
    models = []
    for name in sorted(profile.slots):
        slot = profile.slots[name]
        models.append({
            "model_name": slot.served_model_name,
            "litellm_params": {
                # vLLM has its LiteLLM provider; another engine (SGLang) is reached as
                # what it serves, an OpenAI-compatible API
                "model": (f"hosted_vllm/{slot.served_model_name}" if slot.engine == "vllm"
                          else f"openai/{slot.served_model_name}"),
                "api_base": f"{addr.base_url(slot.port)}/v1",
                # LiteLLM resolves this at start-up; the key itself never lands in a file.
                "api_key": "os.environ/VLLM_API_KEY",
                "timeout": 600,
                "stream_timeout": 120,
            },
            "model_info": {"id": f"{addr.pod_id}-{name}"},
        })
    doc = {
        "model_list": models,
        "router_settings": {
            "model_group_alias": dict(profile.alias_targets()),
            "num_retries": 1,
        },
        "litellm_settings": {"drop_params": True},
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
    }
    return _yaml(doc)


def render_targets(profile: Profile, profile_name: str, addr: PodAddress) -> str:
    groups = []
    for name in sorted(profile.slots):
        slot = profile.slots[name]
        groups.append({
            "targets": [addr.hostport(slot.port)],
            "labels": {
                "slot": name,
                "served_model": slot.served_model_name,
                "profile": profile_name,
                "pod": addr.pod_id,
            },
        })
    return _json(groups)


def render_gpu_targets(profile: Profile, profile_name: str, addr: PodAddress) -> str:
    """The pod's ``pod-agent exporter`` (GPU metrics), labelled by pod as the slots are:
    the wall reads its pod's ``DCGM_FI_DEV_*`` series with that label."""
    assert profile.gpu_metrics_port is not None
    return _json([{"targets": [addr.hostport(profile.gpu_metrics_port)],
                   "labels": {"profile": profile_name, "pod": addr.pod_id}}])


def render_gateway_job(url: str, metrics_path: str, profile_name: str, pod_id: str
                       ) -> dict[str, object]:
    """The gateway's (LiteLLM's) scrape job, its series labelled with the pod and
    profile as the slots' are: the rendered gateway rules judge them, and the console
    labels its gateway alerts the same. A proxy that asks a key for ``/metrics`` needs
    the job's ``authorization`` added by hand (a key is never rendered)."""
    from urllib.parse import urlsplit

    u = urlsplit(url)
    return {"job_name": "litellm", "scheme": u.scheme or "http",
            "metrics_path": metrics_path,
            "static_configs": [{"targets": [u.netloc.rpartition("@")[2]],  # no credentials
                                "labels": {"pod": pod_id, "profile": profile_name}}]}


def render_prometheus_config(scrape_interval: str = "15s", gpu_metrics: bool = False,
                             alertmanager: str | None = None,
                             gateway: dict[str, object] | None = None) -> str:
    """A minimal ``prometheus.yml`` that reads the targets files next to it (the GPU job
    when the profile has an exporter port; an exporter with a token needs the job's
    ``authorization`` added by hand: a token is never rendered). ``alertmanager``
    (``host:port``): the console's rules (``rules.yml``, rendered beside it) are run and
    sent there."""
    jobs: list[dict[str, object]] = [{
        "job_name": "vllm",
        "metrics_path": "/metrics",
        "file_sd_configs": [{"files": ["targets.json"], "refresh_interval": "30s"}],
    }]
    if gpu_metrics:
        jobs.append({
            "job_name": "gpu",
            "metrics_path": "/metrics",
            "file_sd_configs": [{"files": ["gpu-targets.json"], "refresh_interval": "30s"}],
        })
    if gateway is not None:
        jobs.append(gateway)
    doc = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": jobs,
    }
    if alertmanager is not None:
        doc["rule_files"] = ["rules.yml"]
        doc["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return _yaml(doc)


def render_gatus(profile: Profile, addr: PodAddress) -> str:
    endpoints = []
    for name in sorted(profile.slots):
        slot = profile.slots[name]
        body = json.dumps({
            "model": slot.served_model_name,
            "messages": [{"role": "user", "content": PROBE_PROMPT}],
            "max_tokens": 8,
            "temperature": 0,
        }, sort_keys=True, separators=(",", ":"))
        endpoints.append({
            "name": f"{name} chat",
            "group": f"vllm-{addr.pod_id}",
            "url": f"{addr.base_url(slot.port)}/v1/chat/completions",
            "method": "POST",
            "interval": "5m",
            "client": {"timeout": "60s"},
            "headers": {"Content-Type": "application/json",
                        "Authorization": "Bearer ${VLLM_API_KEY}"},
            "body": body,
            # "process up, inference broken" shows as a 200 on /health but fails these.
            "conditions": [
                "[STATUS] == 200",
                "[BODY].object == chat.completion",
                "len([BODY].choices) > 0",
                "has([BODY].choices[0].message.content) == true",
            ],
        })
        endpoints.append({
            "name": f"{name} health",
            "group": f"vllm-{addr.pod_id}",
            "url": f"{addr.base_url(slot.port)}/health",
            "interval": "30s",
            "conditions": ["[STATUS] == 200"],
        })
    return _yaml({"endpoints": endpoints})


def render_all(profile: Profile, profile_name: str, addr: PodAddress,
               p2p_disabled: bool = False, alertmanager: str | None = None,
               gateway: tuple[str, str] | None = None) -> dict[str, str]:
    """Relative path → file content, for everything the laptop and the pod need.
    ``gateway``: the gateway's URL and metrics path, scraped by the rendered
    Prometheus."""
    files = render_slots(profile, p2p_disabled)
    files["litellm.yaml"] = render_litellm(profile, addr)
    files["prometheus/targets.json"] = render_targets(profile, profile_name, addr)
    has_gpu = profile.gpu_metrics_port is not None
    files["prometheus/prometheus.yml"] = render_prometheus_config(
        gpu_metrics=has_gpu, alertmanager=alertmanager,
        gateway=None if gateway is None else render_gateway_job(*gateway, profile_name,
                                                                addr.pod_id))
    if has_gpu:
        files["prometheus/gpu-targets.json"] = render_gpu_targets(profile, profile_name, addr)
    files["gatus.yaml"] = render_gatus(profile, addr)
    return dict(sorted(files.items()))


def write_atomic(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_all(files: dict[str, str], out: Path) -> list[Path]:
    written = []
    for rel, content in files.items():
        p = out / rel
        write_atomic(p, content)
        written.append(p)
    return written


def _json(obj: object) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _yaml(obj: object) -> str:
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True,
                          width=1000)
