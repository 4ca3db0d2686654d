"""Data-parallel training with ``torchrun``: process-group setup, rank helpers, sharding.

``torchrun --nproc_per_node=N -m attnlab.cli train ...`` starts N processes and sets the
environment variables ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT``. :func:`init_distributed` reads them and joins the process group (gloo on
CPU, nccl on GPU); without them it does nothing and every helper answers as for a single
process, so the same code runs with and without ``torchrun``.

Each rank reads its own shard of the data (:func:`shard`), ``DistributedDataParallel``
averages the gradients, and rank 0 alone writes checkpoints, metrics and the progress bar.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


@dataclass(frozen=True)
class DistInfo:
    """This process's place in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device


def init_distributed(backend: str | None = None, timeout_s: float = 600.0) -> DistInfo:
    """Join the process group described by torchrun's environment variables.

    ``backend`` defaults to ``"nccl"`` when CUDA is available, else ``"gloo"``. With
    ``"nccl"`` each process uses ``cuda:LOCAL_RANK`` (a ``ValueError`` when the machine has
    no such GPU); with ``"gloo"`` every process computes on the CPU, on any machine. Without
    ``WORLD_SIZE`` (or with ``WORLD_SIZE=1``) no group is created and the result describes a
    single process, on ``cuda:LOCAL_RANK`` when CUDA is available.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"RANK must be in [0, WORLD_SIZE={world_size}), got {rank}")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    cuda = torch.cuda.is_available() and backend != "gloo"
    if cuda and local_rank >= torch.cuda.device_count():
        raise ValueError(
            f"LOCAL_RANK={local_rank} needs cuda:{local_rank} but this machine has "
            f"{torch.cuda.device_count()} CUDA device(s): start at most that many processes a machine, "
            f"or use the gloo backend to train on the CPU"
        )
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world_size > 1 and not dist.is_initialized():
        for var in ("MASTER_ADDR", "MASTER_PORT"):
            if var not in os.environ:
                raise ValueError(f"environment variable {var} must be set when WORLD_SIZE > 1")
        kwargs = {"device_id": device} if backend == "nccl" else {}
        dist.init_process_group(
            backend,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
            **kwargs,
        )
    return DistInfo(rank, world_size, local_rank, device)


def is_distributed() -> bool:
    """True inside an initialised process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def get_world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def is_main_process() -> bool:
    """Rank 0 (or the only process): the one that writes files and shows progress."""
    return get_rank() == 0


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def cleanup() -> None:
    """Leave the process group (call at the end of a torchrun job)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum ``x`` over all ranks in place (no-op for a single process); returns ``x``."""
    if is_distributed():
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
    return x


def broadcast_object(obj: T, src: int = 0) -> T:
    """Rank ``src``'s ``obj`` on every rank (keeps decisions such as early stopping in step)."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def gather_objects(obj: T) -> list[T]:
    """``[obj of rank 0, obj of rank 1, ...]`` on every rank."""
    if not is_distributed():
        return [obj]
    out: list = [None] * get_world_size()
    dist.all_gather_object(out, obj)
    return out


def shard(items: Sequence[T], rank: int | None = None, world_size: int | None = None) -> list[T]:
    """This rank's share of ``items``: ``items[rank::world_size]`` after dropping the tail
    that does not divide evenly, so every rank gets the same number of items (DDP needs
    every rank to take the same number of steps). Shuffle ``items`` identically on all ranks
    (same seed) before sharding."""
    rank = get_rank() if rank is None else rank
    world_size = get_world_size() if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    usable = len(items) - len(items) % world_size
    return list(items[rank:usable:world_size])


def rank_seed(seed: int) -> int:
    """A per-rank seed (``seed + rank``) for streams that must differ between ranks, such
    as random LM windows or dropout."""
    return seed + get_rank()
