"""The one function that turns a slot into its ``vllm serve`` command line.

Used by ``pod-console profile render`` on the laptop and by the agent's slot
supervisor on the pod, so what the operator previews is what runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .profile import Profile

SECRET_ENV = ("VLLM_API_KEY",)
"""Variables the launcher passes through from its own environment, never written to disk.

vLLM reads ``VLLM_API_KEY`` itself, so the key never needs to be on argv, where
every user of the host could read it with ``ps``."""


@dataclass(frozen=True)
class SlotCommand:
    """argv and environment (without secrets) of one slot's server process."""

    slot: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    secret_env: tuple[str, ...] = SECRET_ENV

    def to_json_dict(self) -> dict[str, object]:
        return {"argv": list(self.argv), "env": dict(sorted(self.env.items())),
                "secret_env": list(self.secret_env)}


def _fmt_util(u: float) -> str:
    # repr keeps 0.76 as "0.76" and never prints 0.7600000000000001 for a parsed literal
    return repr(round(u, 4))


def slot_command(profile: Profile, slot_name: str, *, p2p_disabled: bool = False,
                 host: str = "0.0.0.0", vllm: str = "vllm",
                 model_path: str | None = None) -> SlotCommand:
    """Build the command for ``slot_name``.

    Args:
        p2p_disabled: the host check's verdict; with TP >= 2 it adds
            ``--disable-custom-all-reduce`` (NCCL_P2P_DISABLE alone still hangs
            in custom all-reduce, as the field saw with the 27B slot).
        model_path: local weights directory instead of the Hugging Face id.
    """
    slot = profile.slots[slot_name]
    argv: list[str] = [
        vllm, "serve", model_path or slot.hf_repo_id,
        "--served-model-name", slot.served_model_name,
        "--host", host,
        "--port", str(slot.port),
        "--tensor-parallel-size", str(slot.tensor_parallel_size),
        "--gpu-memory-utilization", _fmt_util(slot.gpu_util),
        "--max-model-len", str(slot.max_model_len),
    ]
    if slot.speculative is not None:
        spec = slot.speculative.model_dump(exclude_none=True)
        argv += ["--speculative-config", json.dumps(spec, sort_keys=True, separators=(",", ":"))]
    if p2p_disabled and slot.tensor_parallel_size >= 2:
        argv.append("--disable-custom-all-reduce")
    argv += list(slot.extra_args)
    env: dict[str, str] = {}
    env.update(profile.env)
    env.update(slot.env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in slot.gpus)
    env["NCCL_P2P_DISABLE"] = "1" if p2p_disabled else "0"
    return SlotCommand(slot=slot_name, argv=tuple(argv), env=env)
