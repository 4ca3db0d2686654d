"""Sizes checked against memory before anything is allocated.

A setting can ask for more memory than any machine has (``model.memory_size=1000000000``, a
batch of a billion sequences, a ``config.json`` whose ``d_model`` is a million). Left alone,
such a run dies in the allocator, after the data was read, with a message about C++. Instead,
each place that turns settings into tensors states what it cannot do without, as a
:class:`Need` (bytes, and the settings that size them), and :func:`check_fits` refuses the
lot in one line when it exceeds the memory of the device it would run on::

    data.batch_size × model.memory_size × model.memory_width = 8 × 1,000,000,000 × 1,000
    floats (the NTM's memory) need at least 32.0 TB; this machine has 25.3 GB

Every need is a **lower bound** — tensors that must exist at once, counted exactly — so a run
that would fit is never refused; a run that is refused could not have run. A model is
measured by building it on PyTorch's ``meta`` device (:func:`measure_model`): every parameter
and buffer gets its shape and dtype and no storage, so a model of a trillion parameters is
counted in milliseconds.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

UNITS = ("bytes", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
MODULE_BYTES = 1024
"""A lower bound of the Python objects one ``nn.Module`` holds (its dicts of parameters, buffers,
submodules and hooks: about 2 kB measured with ``tracemalloc`` on CPython 3.11)."""


def format_bytes(n: int | float) -> str:
    """``32_000_000_000_000`` → ``"32.0 TB"``: decimal units, as the allocator and disks count."""
    value, unit = float(n), UNITS[0]
    for unit in UNITS:
        if value < 1000 or unit == UNITS[-1]:
            break
        value /= 1000
    return f"{int(value)} bytes" if unit == "bytes" else f"{value:,.1f} {unit}"


def _meminfo() -> dict[str, int]:
    """``/proc/meminfo`` in bytes (empty where there is none)."""
    path = Path("/proc/meminfo")
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            out[key] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return out


def host_memory() -> int | None:
    """Bytes this process may use at most: RAM plus swap, or the cgroup's limit (a container's)
    when lower; ``None`` where the platform does not say."""
    info = _meminfo()
    if "MemTotal" in info:
        total = info["MemTotal"] + info.get("SwapTotal", 0)
    else:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):
            return None
    for limit in CGROUP_LIMITS:
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def device_memory(device: str | torch.device = "cpu") -> tuple[int, str] | None:
    """``(bytes, who)`` for the memory tensors on ``device`` live in (``who``: "this machine",
    "cuda:0"); ``None`` where it is not known (then nothing is refused)."""
    device = torch.device(device)
    if device.type == "cpu":
        total = host_memory()
        return None if total is None else (total, "this machine")
    if device.type == "cuda" and torch.cuda.is_available():
        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.get_device_properties(index).total_memory, f"cuda:{index}"
    return None


@dataclass(frozen=True)
class Need:
    """Bytes a command cannot do without, and ``what`` needs them, naming the settings;
    ``host``: they live in the machine's memory whatever device the model is on (a data set)."""

    what: str
    nbytes: int
    host: bool = False


def sized(
    what: str, factors: Mapping[str, int], item_bytes: int, items: str = "floats", *, host: bool = False
) -> Need:
    """A tensor of ``prod(factors)`` items of ``item_bytes`` each (``items`` names them:
    floats, ids), described by its factors: ``data.batch_size × model.memory_size = 8 × 128
    floats (the NTM's memory)``."""
    names = " × ".join(factors)
    values = " × ".join(f"{v:,}" for v in factors.values())
    return Need(f"{names} = {values} {items} ({what})", math.prod(factors.values()) * item_bytes, host)


def check_fits(needs: Iterable[Need], device: str | torch.device = "cpu", *, context: str = "") -> None:
    """Raise ``ValueError`` when ``needs`` (all at once) exceed the memory they live in: the
    machine's for host needs and for a CPU ``device``, else the device's. One line naming the
    largest need, the total and what the memory holds (``context`` leads it)."""
    device = torch.device(device)
    needs = [n for n in needs if n.nbytes > 0]
    _check([n for n in needs if n.host or device.type == "cpu"], torch.device("cpu"), context)
    if device.type != "cpu":
        _check([n for n in needs if not n.host], device, context)


def _check(needs: list[Need], device: torch.device, context: str) -> None:
    memory = device_memory(device) if needs else None
    if memory is None:
        return
    available, who = memory
    total = sum(n.nbytes for n in needs)
    if total <= available:
        return
    largest = max(needs, key=lambda n: n.nbytes)
    also = "" if format_bytes(total) == format_bytes(largest.nbytes) else f", {format_bytes(total)} in all"
    raise ValueError(
        f"{context}{largest.what} need at least {format_bytes(largest.nbytes)}{also}; "
        f"{who} has {format_bytes(available)}"
    )


# ----------------------------------------------------------------------------- models
@dataclass(frozen=True)
class ModelSize:
    """A model's parameters (tied ones once) and their bytes, its buffers' bytes, its modules."""

    parameters: int
    parameter_bytes: int
    buffer_bytes: int
    modules: int

    def need(self, settings: str, *, training: bool) -> Need:
        """The model in memory; ``training``: with a gradient and Adam's two moments for every
        parameter (four copies in all). ``settings`` names what sizes it."""
        copies = 4 if training else 1
        extra = " with their gradients and Adam's two moments" if training else ""
        return Need(
            f"the model's {self.parameters:,} parameters ({settings}){extra}",
            copies * self.parameter_bytes + self.buffer_bytes + self.modules * MODULE_BYTES,
        )


class _ShapesOnly(TorchFunctionMode):
    """Skip what only fills values on the meta device: random initialisation has nothing to
    fill there, and its meta kernels are slow to load the first time."""

    FILLS = frozenset({"normal_", "uniform_", "trunc_normal_", "xavier_uniform_", "xavier_normal_",
                       "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "zeros_", "ones_"})
    RANDOM = frozenset({"randn", "rand"})

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = args[0] if args else kwargs.get("tensor")
        if name in self.FILLS and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        if name in self.RANDOM and func in (torch.randn, torch.rand):
            kwargs.pop("generator", None)
            return torch.empty(*args, **kwargs)
        return func(*args, **kwargs)


def measure_model(build: Callable[[], nn.Module]) -> ModelSize:
    """Count the model ``build()`` makes without allocating it: built on the ``meta`` device
    (shapes and dtypes, no storage), random initialisation skipped."""
    with torch.device("meta"), _ShapesOnly():
        model = build()
    params = list(model.parameters())
    return ModelSize(
        parameters=sum(p.numel() for p in params),
        parameter_bytes=sum(p.numel() * p.element_size() for p in params),
        buffer_bytes=sum(b.numel() * b.element_size() for b in model.buffers()),
        modules=sum(1 for _ in model.modules()),
    )


def leading_sizes(config: Any, prefix: str = "", count: int = 3, *, skip: Iterable[str] = ()) -> str:
    """The ``count`` largest integer settings of a dataclass config (but ``skip``), largest
    first, as ``model.d_model=1000000, model.d_ff=4000000``: what most likely sizes its model."""
    values = [(getattr(config, f.name), f.name) for f in dataclasses.fields(config) if f.name not in skip]
    values = [(v, name) for v, name in values if isinstance(v, int) and not isinstance(v, bool)]
    top = sorted((v for v in values if v[0] > 1), reverse=True)[:count]
    return ", ".join(f"{prefix}{name}={value}" for value, name in top) or "its settings"


def check_repeats(name: str, count: int, one: nn.Module, settings: str) -> None:
    """Before a layer is built ``count`` times (``name``: the setting): refuse when ``count``
    copies of ``one`` (its parameters, buffers and modules; ``settings`` size it) cannot fit in
    the memory of the device ``one`` is on — before a loop that would run for days."""
    if count <= 1:  # the one layer is built already
        return
    tensors = [*one.parameters(), *one.buffers()]
    each = sum(t.numel() * t.element_size() for t in tensors) + MODULE_BYTES * sum(1 for _ in one.modules())
    device = tensors[0].device if tensors else torch.device("cpu")
    layers = sized(f"each sized by {settings}", {name: count}, each, f"layers of {format_bytes(each)}")
    check_fits([layers], "cpu" if device.type == "meta" else device)
