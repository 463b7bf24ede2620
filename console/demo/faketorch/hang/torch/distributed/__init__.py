import time


def init_process_group(*a, **k):
    # what a host with broken PCIe P2P does: never returns
    while True:
        time.sleep(1)


def all_reduce(t):
    pass


def destroy_process_group():
    pass
