"""A stand-in torch for the P2P probe's worker on a machine without GPUs.

``FAKE_TORCH_MODE`` picks what the NCCL collective does: ``good`` (the sum is the
world size), ``hang`` (init never returns, as on a host with broken PCIe P2P) or
``bad`` (init raises an NCCL error).
"""
import os

MODE = os.environ.get("FAKE_TORCH_MODE", "good")


class _Scalar:
    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v


class _Tensor:
    def __init__(self, n, value=1.0):
        self.values = [value] * n

    def __getitem__(self, i):
        return _Scalar(self.values[i])


def ones(n, device=None):
    return _Tensor(n)


class cuda:
    @staticmethod
    def set_device(rank):
        pass

    @staticmethod
    def synchronize():
        pass
