"""Data-parallel training (PyTorch DDP under ``torchrun``; gloo on CPU, NCCL for CUDA tensors on GPU): this process's
rank, world and device, joined once per process (docs/method.md §1.5)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass
class Dist:
    """This process's place in data-parallel training. ``ddp``: a process group was joined and the model is wrapped
    in DistributedDataParallel (always when ``world`` > 1; with one process only under ``GR_DDP=1``)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    ddp: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0

    def all_sum(self, *values: float) -> list[float]:
        """Sum scalars over processes (identity without a process group)."""
        if not self.ddp:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return t.tolist()

    def barrier(self) -> None:
        if self.ddp:
            torch.distributed.barrier()


def init_distributed() -> Dist:
    """Join the process group torchrun set up (``WORLD_SIZE`` > 1), else a single process.

    ``GR_DDP=1`` under ``torchrun --nproc_per_node 1`` joins a group of one and still wraps the model in DDP: the
    only way to exercise the NCCL path on a one-GPU machine (NCCL refuses two ranks on one device).
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1 and not (os.environ.get("GR_DDP") == "1" and "MASTER_ADDR" in os.environ):
        return Dist()

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        if local_rank < torch.cuda.device_count():  # "cuda" (the encoder, the random state): this rank's GPU, not
            torch.cuda.set_device(local_rank)           # GPU 0 (CPU processes beyond the GPUs keep none)
        # CPU tensors (all_sum's scalars) go through gloo on a GPU machine too: NCCL reduces only CUDA tensors; the
        # other ranks wait at a barrier while rank 0 answers the test split, which takes a 7B more than gloo's 30 min
        dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo",
                                timeout=timedelta(hours=12))
    return Dist(dist.get_rank(), dist.get_world_size(), local_rank, ddp=True)
