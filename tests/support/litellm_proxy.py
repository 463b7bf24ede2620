"""A real LiteLLM proxy (its own venv, ``tests/support/litellm_venv.sh``) on a config the
console rendered: the gateway users call, in front of real or misbehaving servers."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import procs

VENV = Path(os.environ.get("POD_CONSOLE_LITELLM_VENV", "/opt/litellm-venv"))
MASTER_KEY = "sk-smoke-0123456789abcdef"


def available() -> bool:
    return (VENV / "bin" / "litellm").exists()


@dataclass
class LiteLLMProxy:
    workdir: Path
    config: str
    """``litellm.yaml``'s text (``profile render`` writes it)."""
    port: int = field(default_factory=procs.free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 180.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "litellm.yaml"
        cfg.write_text(self.config)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM", "VLLM"))}
        # the keys by environment, as the rendered config's os.environ/ entries read them;
        # the bundled cost map, not a download (no network here)
        env.update({"LITELLM_MASTER_KEY": MASTER_KEY, "VLLM_API_KEY": "unused-by-cpu-vllm",
                    "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_DOCS": "True",
                    "DISABLE_ADMIN_UI": "True"})
        log = self.workdir / "litellm.log"
        self.proc = procs.start([str(VENV / "bin" / "litellm"), "--config", str(cfg),
                                 "--host", "127.0.0.1", "--port", str(self.port)], log,
                                env=env)
        procs.wait_http(self.url + "/health/liveliness", timeout_s, self.proc, log)

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc)
            self.proc = None
