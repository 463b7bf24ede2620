"""The one function that turns a slot into its server's command line (``vllm serve``,
SGLang's ``launch_server``: the engine's module in ``pod_agent/engines/`` builds it).

Used by ``pod-console profile render`` on the laptop and by the agent's slot
supervisor on the pod, so what the operator previews is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .engines import ENGINES
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


def slot_command(profile: Profile, slot_name: str, *, p2p_disabled: bool = False,
                 host: str = "0.0.0.0", vllm: str = "vllm", sglang: str = "python3",
                 model_path: str | None = None) -> SlotCommand:
    """Build the command for ``slot_name`` with its engine's command line
    (``pod_agent/engines/``).

    Args:
        p2p_disabled: the host check's verdict; with TP >= 2 it adds
            ``--disable-custom-all-reduce`` (NCCL_P2P_DISABLE alone still hangs
            in custom all-reduce, as the field saw with the 27B slot).
        vllm, sglang: the executable each engine's command starts with.
        model_path: local weights directory instead of the Hugging Face id.
    """
    slot = profile.slots[slot_name]
    eng = ENGINES[slot.engine]
    exe = {"vllm": vllm, "sglang": sglang}.get(slot.engine, eng.exe)
    argv = eng.argv(slot, exe=exe, model=model_path or slot.hf_repo_id, host=host,
                    p2p_disabled=p2p_disabled)
    argv += list(slot.extra_args)
    env: dict[str, str] = {}
    env.update(profile.env)
    env.update(slot.env)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in slot.gpus)
    env["NCCL_P2P_DISABLE"] = "1" if p2p_disabled else "0"
    return SlotCommand(slot=slot_name, argv=tuple(argv), env=env)
