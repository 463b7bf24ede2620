"""``pod-console doctor --bundle FILE.tar.gz``: what a teammate needs to see why it does
not work, in one file, with no secret in it.

It holds the doctor's JSON, the config file and the profiles (redacted), the versions,
the last lines of the audit log (the console's action log) and of ``errors.log``, the
agent's ``status --json``, one exposition of each slot, and a ``record export`` of the
last 15 minutes. Every text goes through ``record export``'s redaction (URL credentials
and every secret the settings and the environment hold, plus the profiles' secret-named
environment values); the finished file is then read back, decompressed, and searched for
each of those secrets: one found, and the file is deleted, never kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import platform
import re
import sys
import tarfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msgspec import Struct, field

from console.session.doctor.report import DoctorReport
from console.session.record.export import SECRET_ENV, scrub, secrets_of

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.session.deployment import Deployment
    from console.sources.agent_client import Transport
    from console.sources.collect.http import HttpClient

TAIL_LINES = 200
RECORD_SPAN_S = 15 * 60.0
STEP_TIMEOUT_S = 3.0
"""Each thing fetched from the pod (the agent's status, a slot's exposition) gives up
after this long: a bundle is written for a set-up that may be broken."""
TOP = "pod-console-bundle"


class BundleError(Exception):
    """The bundle could not be written safely (it is not kept)."""


class Bundle(Struct):
    """The files of the bundle (name → bytes) and what could not be had (name → why)."""

    files: dict[str, bytes] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def text(self, name: str, text: str, secrets: list[str]) -> None:
        self.files[name] = scrub(text, secrets).encode()

    def json(self, name: str, obj: Any, secrets: list[str]) -> None:
        self.files[name] = json.dumps(scrub(obj, secrets), indent=1, sort_keys=True,
                                      default=str).encode()


SECRET_LINE = re.compile(
    r"^(\s*-?\s*[\"']?[A-Za-z0-9_.-]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|WEBHOOK)"
    r"[A-Za-z0-9_.-]*[\"']?\s*[:=]\s*)(\S.*?)\s*$", re.I | re.M)
"""A YAML line whose key names a secret (``HF_TOKEN: hf_…``, ``webhook_url: https://…``):
its value is one, whatever the settings know (a profile is refused for holding one, and a
refused profile is just what a bundle is for)."""


NOT_A_SECRET = re.compile(r"(_env|_file|_path|_dir)[\"']?\s*[:=]\s*$", re.I)
"""Keys that name where a secret is, not the secret (``key_env: LITELLM_MASTER_KEY``)."""


def _secret_lines(text: str) -> list[re.Match[str]]:
    return [m for m in SECRET_LINE.finditer(text) if not NOT_A_SECRET.search(m.group(1))]


def secrets_in_text(text: str) -> set[str]:
    """The values of the secret-named keys of a YAML text (quotes taken off)."""
    out = set()
    for m in _secret_lines(text):
        value = m.group(2).split(" #")[0].strip().strip("\"'")
        if value and value not in ("null", "~", "''", '""') and not value.startswith(
                ("os.environ/", "${", "[redacted]", "*")):
            out.add(value)
    return out


def bundle_secrets(settings: Settings | None, deployment: Deployment | None,
                   texts: Iterable[str] = ()) -> list[str]:
    """Every secret the bundle must not hold: ``record export``'s (the settings' and the
    environment's), the gateway's key file, the profiles' secret-named environment values
    (``HF_TOKEN: ...`` in a slot's ``env``), and those of ``texts`` (the config file and
    the profile files as written, loaded or not)."""
    out = set(secrets_of(settings))
    for text in texts:
        out |= secrets_in_text(text)
    if settings is not None and settings.gateway.key_file is not None:
        with contextlib.suppress(OSError):
            text = Path(settings.gateway.key_file).expanduser().read_text(errors="replace")
            out.update(ln.strip() for ln in text.splitlines() if ln.strip())
    if deployment is not None:
        for lp in deployment.profiles:
            for slot in lp.profile.slots.values():
                for k, v in (getattr(slot, "env", None) or {}).items():
                    if SECRET_ENV.search(str(k)):
                        out.add(str(v))
    return sorted((s for s in out if len(s) >= 6), key=len, reverse=True)


def _tail(path: Path, n: int) -> str | None:
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 2 * 1024 * 1024))  # the tail of a big log, not all of it
            data = f.read()
    except OSError:
        return None
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:]) + "\n"


def _versions(report: DoctorReport) -> dict[str, Any]:
    from importlib import metadata

    from console import __version__ as console_version
    from pod_agent import __version__ as agent_version

    libs: dict[str, str | None] = {}
    for name in ("textual", "pydantic", "pydantic-settings", "asyncssh", "h11",
                 "zstandard", "PyYAML"):
        try:
            libs[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            libs[name] = None
    pod = report.by_id().get("agent.version")
    return {"pod-console": console_version, "pod-agent (shipped)": agent_version,
            "pod-agent (on the pod)": pod.sentence if pod is not None else None,
            "python": sys.version, "platform": platform.platform(), "libraries": libs}


def _settings_json(settings: Settings) -> dict[str, Any]:
    # SecretStr dumps as '**********' in JSON mode: the values never reach the bundle
    return settings.model_dump(mode="json")


def _read_texts(settings: Settings | None, config: Path) -> tuple[dict[str, str],
                                                                 dict[str, str]]:
    """The config file and the profile files as written (name in the bundle → text), and
    what could not be read (name → why)."""
    texts: dict[str, str] = {}
    missing: dict[str, str] = {}
    paths = [(f"config/{config.name}", config)]
    if settings is not None and settings.profiles_dir.is_dir():
        paths += [(f"profiles/{p.name}", p) for p in sorted(settings.profiles_dir.glob("*.yaml"))]
    for name, p in paths:
        try:
            texts[name] = p.read_text(errors="replace")
        except OSError as exc:
            missing[name] = exc.strerror or str(exc)
    return texts, missing


def redact_text(text: str, secrets: list[str]) -> str:
    """A YAML text with each secret-named key's value, and every known secret, out."""
    for m in reversed(_secret_lines(text)):
        text = text[:m.start(2)] + "[redacted]" + text[m.end(2):]
    return scrub(text, secrets)


def _best_recording(settings: Settings, t_from: float, t_to: float) -> Path | None:
    """The recording with the most of the range (as ``record export`` picks it)."""
    from console.session.record.reader import list_recordings
    from console.session.record.store import recordings_dir

    best: tuple[float, Path] | None = None
    for info in list_recordings(recordings_dir(settings.state_dir)):
        if info.error or info.started is None or info.ended is None:
            continue
        overlap = min(info.ended, t_to) - max(info.started, t_from)
        if overlap >= 0 and (best is None or overlap > best[0]):
            best = (overlap, info.path)
    return best[1] if best else None


def _recording(b: Bundle, settings: Settings, secrets: list[str], work: Path) -> None:
    from console.session.record.export import export
    from console.session.record.files import NotARecording
    from console.session.record.store import RecordingError

    now = time.time()
    try:
        src = _best_recording(settings, now - RECORD_SPAN_S, now)
    except (NotARecording, OSError) as exc:
        b.missing["recording.podrec"] = str(exc)
        return
    if src is None:
        b.missing["recording.podrec"] = "no recording holds a poll of the last 15 minutes"
        return
    dest = work / "recording.podrec"
    try:
        n = export(src, dest, now - RECORD_SPAN_S, now, secrets)
    except RecordingError as exc:
        b.missing["recording.podrec"] = str(exc)
        return
    b.files["recording.podrec"] = dest.read_bytes()
    b.files["recording.txt"] = f"{n} polls of {src.name}, the last 15 minutes\n".encode()


async def _from_the_pod(b: Bundle, settings: Settings, deployment: Deployment | None,
                        transport: Transport | None, client: HttpClient,
                        secrets: list[str]) -> None:
    """The agent's status and one exposition of each slot, each within its limit."""
    from console.sources.agent_client import AgentClient
    from console.sources.collect.http import HttpError
    from console.sources.remote import AgentError
    from pod_agent.requests import StatusRequest

    async def status() -> None:
        if transport is None:
            b.missing["agent-status.json"] = "no agent configured (pod.ssh_host)"
            return
        try:
            r = await asyncio.wait_for(AgentClient(transport).request(
                StatusRequest(), timeout_s=STEP_TIMEOUT_S), STEP_TIMEOUT_S)
        except (AgentError, TimeoutError) as exc:
            b.missing["agent-status.json"] = str(exc) or "timed out"
            return
        b.json("agent-status.json", r.final, secrets)

    async def exposition(slot: str, url: str) -> None:
        try:
            r = await client.get(url + "/metrics", timeout=STEP_TIMEOUT_S)
        except HttpError as exc:
            b.missing[f"expositions/{slot}.txt"] = exc.describe()
            return
        b.text(f"expositions/{slot}.txt", f"# GET {url}/metrics: HTTP {r.status_code}\n"
               + r.text, secrets)

    jobs = [status()]
    if deployment is not None:
        jobs += [exposition(t.slot, t.base_url) for t in deployment.targets]
    await asyncio.gather(*jobs)


def _pack(b: Bundle, report: DoctorReport) -> bytes:
    manifest = {"written_at": time.time(), "exit_code": report.exit_code,
                "files": sorted(b.files), "missing": b.missing}
    b.files["MANIFEST.json"] = json.dumps(manifest, indent=1, sort_keys=True).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in sorted(b.files.items()):
            info = tarfile.TarInfo(f"{TOP}/{name}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def check_clean(path: Path, secrets: Iterable[str]) -> None:
    """No secret in the file, nor in any member once decompressed (the export inside it
    was searched frame by frame by ``record export`` itself); else the file is deleted."""
    needles = [s.encode() for s in secrets]
    if not needles:
        return
    import gzip

    raw = path.read_bytes()
    blobs = [raw, gzip.decompress(raw)]
    with tarfile.open(path, "r:gz") as tar:
        for m in tar.getmembers():
            f = tar.extractfile(m)
            if f is not None:
                blobs.append(f.read())
    if any(n in blob for n in needles for blob in blobs):
        path.unlink()
        raise BundleError("the bundle still held a secret: not written")


async def write_bundle(dest: Path, report: DoctorReport, settings: Settings | None,
                       config_path: Path | None, *, deployment: Deployment | None = None,
                       transport: Transport | None = None,
                       client: HttpClient | None = None,
                       tail_lines: int = TAIL_LINES) -> Bundle:
    """Write the bundle to ``dest`` (a new file); what went in and what could not."""
    import tempfile

    from console.config.config_file import config_path as resolve_config
    from console.sources.collect.http import HttpClient

    if dest.exists():
        raise BundleError(f"{dest}: exists already (not overwritten)")
    cfg, _ = resolve_config(config_path)
    texts, missing = await asyncio.to_thread(_read_texts, settings, cfg)
    secrets = bundle_secrets(settings, deployment, texts.values())
    b = Bundle(missing=missing)
    for name, text in texts.items():
        b.files[name] = redact_text(text, secrets).encode()
    b.json("doctor.json", report.to_json(), secrets)
    b.json("versions.json", _versions(report), secrets)
    if settings is None:
        b.missing["settings.json"] = "the config did not load (see doctor.json)"
    else:
        b.json("settings.json", _settings_json(settings), secrets)
        for name, path in (("audit.jsonl", settings.state_dir / "audit.jsonl"),
                           ("errors.log", settings.state_dir / "errors.log")):
            tail = await asyncio.to_thread(_tail, path, tail_lines)
            if tail is None:
                b.missing[name] = f"{path}: none"
            else:
                b.text(name, tail, secrets)
        own = client is None
        http = client or HttpClient(relay=None)
        try:
            await _from_the_pod(b, settings, deployment, transport, http, secrets)
        finally:
            if own:
                await http.aclose()
    with tempfile.TemporaryDirectory(prefix="pod-console-bundle-") as work:
        if settings is not None:
            await asyncio.to_thread(_recording, b, settings, secrets, Path(work))
        data = _pack(b, report)
    tmp = dest.with_name(dest.name + ".part")
    try:
        tmp.write_bytes(data)
        await asyncio.to_thread(check_clean, tmp, secrets)
        tmp.rename(dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return b
