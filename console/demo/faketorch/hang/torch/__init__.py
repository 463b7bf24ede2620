"""A stand-in torch for the P2P probe's worker on a machine without GPUs (hang)."""
import time

KIND = "hang"


class _Tensor:
    def __init__(self, n, value=1.0):
        self.values = [value] * n

    def __getitem__(self, i):
        return _Scalar(self.values[i])


class _Scalar:
    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v


def ones(n, device=None):
    return _Tensor(n)


class cuda:
    @staticmethod
    def set_device(rank):
        pass

    @staticmethod
    def synchronize():
        pass
