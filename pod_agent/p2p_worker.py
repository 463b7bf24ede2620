"""One rank of the NCCL P2P probe: all_reduce a tensor of ones; the sum must be the world size.

Run as ``python -m pod_agent.p2p_worker RANK WORLD INIT_FILE``. The same NCCL
path vLLM takes at start-up; ``torch.cuda.can_device_access_peer`` answers
True on hosts where this hangs, so only a real collective tells the truth.
"""

from __future__ import annotations

import sys


def main(argv: list) -> int:
    rank, world, init_file = int(argv[0]), int(argv[1]), argv[2]
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    x = torch.ones(1024, device=f"cuda:{rank}")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    got = float(x[0].item())
    dist.destroy_process_group()
    if int(got) != world:
        print(f"all_reduce gave {got}, expected {world}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
