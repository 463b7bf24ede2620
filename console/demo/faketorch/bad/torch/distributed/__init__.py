def init_process_group(backend, init_method, rank, world_size):
    raise RuntimeError("NCCL error: unhandled system error")


def all_reduce(t):
    pass


def destroy_process_group():
    pass
