_world = 1


def init_process_group(backend, init_method, rank, world_size):
    global _world
    _world = world_size


def all_reduce(t):
    t.values = [v * _world for v in t.values]


def destroy_process_group():
    pass
