import time

from .. import MODE

_world = 1


def init_process_group(backend, init_method, rank, world_size):
    global _world
    if MODE == "hang":
        while True:  # what a host with broken PCIe P2P does: never returns
            time.sleep(1)
    if MODE == "bad":
        raise RuntimeError("NCCL error: unhandled system error")
    _world = world_size


def all_reduce(t):
    t.values = [v * _world for v in t.values]


def destroy_process_group():
    pass
