"""Where tensors live: the model's device, batches moved to it, and bf16 autocast for it.

One rule for every task (docs/design.md, "Devices"): the model is put on a device once; the
trainer, the evaluation loops and the decoders move each batch to the model's device with
:func:`to_device`, and mixed precision takes its device type from the model
(:func:`autocast`), so the same code runs on a CPU or a GPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

import torch
from torch import nn

B = TypeVar("B")


def resolve_device(name: str | torch.device) -> torch.device:
    """A device the machine has: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``.

    Raises ``ValueError`` naming the device when it is malformed or not available here.
    """
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device must be like 'cpu' or 'cuda:0', got {name!r}") from err
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} is not available: torch.cuda.is_available() is False")
        if device.index is not None and device.index >= torch.cuda.device_count():
            count = torch.cuda.device_count()  # (floor 0: no validation.counted here)
            raise ValueError(
                f"device {name!r} is not available: this machine has {count} CUDA "
                f"device{'' if count == 1 else 's'}"
            )
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r} is not available: torch.backends.mps.is_available() is False")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be cpu, cuda or mps, got {name!r}")
    return device


def model_device(model: nn.Module) -> torch.device:
    """The device of ``model``'s parameters (the CPU for a model without any)."""
    param = next(model.parameters(), None)
    return torch.device("cpu") if param is None else param.device


def to_device(batch: B, device: torch.device | str) -> B:
    """``batch`` with every tensor in it on ``device``: a tensor, an object with ``.to(device)``
    (e.g. :class:`~attnlab.data.Batch`), or a tuple, list, dict or dataclass of them."""
    if isinstance(batch, torch.Tensor) or (hasattr(batch, "to") and not isinstance(batch, type)):
        return batch.to(device)
    if isinstance(batch, tuple | list):
        items = [to_device(item, device) for item in batch]
        return type(batch)(*items) if hasattr(batch, "_fields") else type(batch)(items)
    if isinstance(batch, Mapping):
        return type(batch)({key: to_device(value, device) for key, value in batch.items()})
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        fields = {f.name: to_device(getattr(batch, f.name), device) for f in dataclasses.fields(batch)}
        return dataclasses.replace(batch, **fields)
    return batch


def autocast(device: torch.device | str, enabled: bool) -> AbstractContextManager[Any]:
    """bf16 autocast on ``device``'s type when ``enabled``, else nothing."""
    if not enabled:
        return nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
