"""Stand-in ``torch.distributed`` for the P2P probe on a machine without GPUs.

With ``NCCL_DEBUG=INFO`` it prints what real NCCL 2.28 printed on a two-GPU H200
host (``console/demo/faketorch/nccl/``, captured logs): channels ``via P2P/CUMEM``
when P2P is allowed, ``via SHM/direct/direct`` under ``NCCL_P2P_DISABLE=1``.
Modes (``FAKE_TORCH_MODE``): ``good``; ``shm`` (NCCL picks SHM even with P2P
allowed); ``quiet`` (no channel lines); ``hang``/``bad`` (P2P hangs / errors, the
P2P-disabled path works); ``hang-always``/``bad-always`` (both paths fail).
"""
import os
import sys
import time

from .. import MODE

_world = 1
_LOGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "nccl")


def _replay(kind, rank):
    if os.environ.get("NCCL_DEBUG", "").upper() != "INFO" or MODE == "quiet":
        return
    with open(os.path.join(_LOGS, f"{kind}-rank{rank % 2}.log"), encoding="utf-8") as fh:
        sys.stdout.write(fh.read())
    sys.stdout.flush()


def init_process_group(backend, init_method, rank, world_size):
    global _world
    p2p_off = os.environ.get("NCCL_P2P_DISABLE") == "1"
    if MODE == "hang-always" or (MODE == "hang" and not p2p_off):
        while True:  # what a host with broken PCIe P2P does: never returns
            time.sleep(1)
    if MODE == "bad-always" or (MODE == "bad" and not p2p_off):
        raise RuntimeError("NCCL error: unhandled system error")
    _replay("shm" if p2p_off or MODE == "shm" else "p2p", rank)
    _world = world_size


def all_reduce(t):
    t.values = [v * _world for v in t.values]


def destroy_process_group():
    pass
