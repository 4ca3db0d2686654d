"""Checkpoints: one directory each, written atomically, loaded without unpickling anything.

Layout (docs/design.md, "Checkpoints")::

    checkpoint/
      model.safetensors   weights (safetensors: plain tensors, loading runs no code)
      config.json         the model config plus "model_type"
      ...                 extra files: tokenizer.json, recipe.json, trainer.pt, ...

A training run keeps its checkpoints in one run directory::

    run_dir/
      metrics.jsonl                 one JSON object per log / eval event
      checkpoints/step_00001000/    a checkpoint with trainer.pt (optimizer, scheduler, RNG, step)
      best/                         the checkpoint with the best validation metric

:func:`~attnlab.atomic.atomic_directory` writes everything into a temporary sibling
directory and swaps it into place in one atomic step only when the block finishes, so a crash
or an exception mid-write leaves the previous checkpoint untouched. Loading uses safetensors
only — nothing is unpickled.

Tied weights (e.g. GPT's token embedding and output head) are one tensor under two names;
safetensors refuses shared tensors, so one copy is stored and the other names are listed
in the file's metadata (``"aliases"``) and restored by :func:`load_state`.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from attnlab.atomic import atomic_directory, clean_leftovers
from attnlab.parsing import parse_json, read_json
from attnlab.validation import shape_str

__all__ = [
    "CONFIG_NAME",
    "TRAINER_NAME",
    "WEIGHTS_NAME",
    "ExtraFiles",
    "atomic_directory",
    "checkpoint_path",
    "clean_leftovers",
    "is_checkpoint",
    "latest_checkpoint",
    "list_checkpoints",
    "load_config",
    "load_into",
    "load_model_weights",
    "load_state",
    "load_state_file",
    "prune_checkpoints",
    "resolve_resume",
    "run_dir_of",
    "save_pretrained",
    "save_state",
    "upgrade_weight_names",
    "write_checkpoint",
    "write_extra",
]

WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
RECIPE_FILE = "recipe.json"  # the parsed recipe a task saves into each of its checkpoints
ExtraFiles = Mapping[str, "str | Path | bytes"]  # file name -> contents, or a file to copy
_IO_ERROR = re.compile(r"I/O error: (?P<strerror>.+?) \(os error (?P<errno>\d+)\)")  # safetensors' words


def _dedupe_shared(state: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, str]]:
    """Keep one copy of tensors that share memory; return ``(tensors, {alias: kept_name})``."""
    kept: dict[tuple, str] = {}
    storages: set[int] = set()
    tensors, aliases = {}, {}
    for name, t in state.items():
        t = t.detach()
        key = (
            t.untyped_storage().data_ptr(),
            t.storage_offset(),
            tuple(t.shape),
            t.stride(),
            t.dtype,
        )
        if key in kept:
            aliases[name] = kept[key]
            continue
        ptr = t.untyped_storage().data_ptr()
        # A different view of memory already stored (or a non-contiguous view): own copy.
        t = t.contiguous().clone() if ptr in storages or not t.is_contiguous() else t
        kept[key], tensors[name] = name, t
        storages.add(ptr)
    return tensors, aliases


def save_state(
    state: Mapping[str, Tensor], file: str | Path, metadata: Mapping[str, str] | None = None
) -> None:
    """Write a state dict to a safetensors ``file``, storing tied tensors once. A failed write
    (a full disk) raises ``OSError`` naming ``file``, like Python's own writes."""
    tensors, aliases = _dedupe_shared(state)
    meta = {"format": "pt", **(metadata or {})}
    if aliases:
        meta["aliases"] = json.dumps(aliases)
    try:
        save_file({k: v.cpu() for k, v in tensors.items()}, str(file), metadata=meta)
    except SafetensorError as err:  # "Error while serializing: I/O error: File too large (os error 27)"
        failed = _IO_ERROR.search(str(err))
        if failed is None:
            raise OSError(f"cannot write checkpoint weights {file}: {err}") from err
        raise OSError(int(failed["errno"]), failed["strerror"], str(file)) from err


def save_pretrained(
    model: nn.Module,
    directory: str | Path,
    *,
    extra: ExtraFiles | None = None,
) -> Path:
    """Save ``model`` (which has ``config`` with ``to_dict()`` and ``model_type``) to ``directory``.

    Writes ``model.safetensors`` and ``config.json`` (the config plus ``"model_type"``), and
    each ``extra`` entry: ``name → bytes`` is written, ``name → path`` is copied. All of it
    lands atomically (see :func:`atomic_directory`). Returns the directory.
    """
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        raise TypeError(f"model must have a config with to_dict(), got {type(model).__name__}")
    with atomic_directory(directory) as tmp:
        save_state(model.state_dict(), tmp / WEIGHTS_NAME)
        config_dict = {"model_type": getattr(model, "model_type", type(model).__name__.lower())}
        config_dict.update(config.to_dict())
        (tmp / CONFIG_NAME).write_text(json.dumps(config_dict, indent=2) + "\n")
        write_extra(tmp, extra)
    return Path(directory)


def write_extra(directory: Path, extra: ExtraFiles | None) -> None:
    """Write ``extra`` files into ``directory``: bytes are written, paths copied."""
    for name, content in (extra or {}).items():
        if name in (WEIGHTS_NAME, CONFIG_NAME) or Path(name).name != name:
            raise ValueError(
                f"extra file name must be a plain file name other than the model's, got {name!r}"
            )
        if isinstance(content, bytes):
            (directory / name).write_bytes(content)
        elif isinstance(content, str | Path):
            source = Path(content)
            if not source.is_file():
                raise FileNotFoundError(f"extra file {name!r}: source {source} does not exist")
            shutil.copyfile(source, directory / name)
        else:
            raise TypeError(
                f"extra[{name!r}] must be bytes or a path, got {type(content).__name__}"
            )


def _require(directory: Path, name: str) -> Path:
    file = directory / name
    if not file.is_file():
        raise FileNotFoundError(
            f"checkpoint {directory} has no {name} "
            f"(a checkpoint holds {WEIGHTS_NAME} and {CONFIG_NAME})"
        )
    return file


def load_config(directory: str | Path) -> dict[str, Any]:
    """Read ``config.json`` of a checkpoint (including ``"model_type"``)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"checkpoint directory {directory} does not exist")
    return read_json(_require(directory, CONFIG_NAME), "checkpoint config")


def saved_recipe_or_empty(directory: str | Path) -> dict[str, Any]:
    """A checkpoint's ``recipe.json`` as a dict (decoding settings, the data it was trained
    on); ``{}`` for a checkpoint that has none."""
    file = Path(directory) / RECIPE_FILE
    return read_json(file, "recipe") if file.is_file() else {}


def load_state_file(file: str | Path, device: str | torch.device = "cpu") -> dict[str, Tensor]:
    """Read a safetensors state dict, restoring tied-weight aliases (never unpickles)."""
    file = Path(file)
    try:
        state = load_file(str(file), device=str(device))
        with safe_open(str(file), framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(
            f"checkpoint weights {file} are corrupt or not safetensors: {err}"
        ) from err
    where = f"the 'aliases' metadata of checkpoint weights {file}"
    aliases = parse_json(metadata.get("aliases", "{}"), where)
    for alias, name in aliases.items():
        if not isinstance(name, str) or name not in state:
            raise ValueError(
                f"checkpoint weights {file}: alias {alias!r} points to missing tensor {name!r}"
            )
        state[alias] = state[name]
    return state


def load_state(
    directory: str | Path, device: str | torch.device = "cpu"
) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """``(config dict, state dict)`` of a checkpoint directory from :func:`save_pretrained`."""
    config = load_config(directory)
    state = load_state_file(_require(Path(directory), WEIGHTS_NAME), device)
    return config, state


def upgrade_weight_names(model: nn.Module, state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``state`` with weights saved under names the model has since changed renamed.

    Any submodule may list them as ``renamed_weights = {old prefix: new prefix}`` (relative to
    itself), so checkpoints written before a module was restructured still load."""
    state = dict(state)
    for path, module in model.named_modules():
        prefix = f"{path}." if path else ""
        for old, new in getattr(module, "renamed_weights", {}).items():
            for key in [k for k in state if k.startswith(prefix + old)]:
                state[prefix + new + key[len(prefix + old) :]] = state.pop(key)
    return state


def load_into(
    model: nn.Module, state: Mapping[str, Tensor], source: str | Path, *, absent: Sequence[str] = ()
) -> None:
    """``model.load_state_dict(state)`` strictly; a mismatch names ``source``, keys and shapes.
    ``absent``: config fields the checkpoint's ``config.json`` lacks (the model took their
    defaults); a mismatch then names them and the first misfit weight, on one line.

    Weights under names from before a restructuring are renamed first
    (:func:`upgrade_weight_names`)."""
    state = upgrade_weight_names(model, state)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = [
        f"{k} has shape {shape_str(state[k].shape)} in the file "
        f"but {shape_str(v.shape)} in the model"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    problems = (
        ([f"missing {missing[:8]}"] if missing else [])
        + ([f"unexpected {unexpected[:8]}"] if unexpected else [])
        + wrong[:4]
    )
    if problems and absent:
        defaults = "its default does" if len(absent) == 1 else "their defaults do"
        raise ValueError(f"checkpoint config {Path(source) / CONFIG_NAME} has no {', '.join(absent)}, "
                         f"and {defaults} not fit the weights: {problems[0]}")
    if problems:
        raise ValueError(
            f"checkpoint {source} does not match {type(model).__name__}: " + "; ".join(problems)
        )
    model.load_state_dict(state, strict=True)


# --------------------------------------------------------------- a training run's checkpoints
TRAINER_NAME = "trainer.pt"
_STEP_DIR = re.compile(r"^step_(\d+)$")

SaveFn = Callable[[nn.Module, Path, ExtraFiles], object]


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    """``run_dir/checkpoints/step_{step:08d}``."""
    return Path(run_dir) / "checkpoints" / f"step_{step:08d}"


def is_checkpoint(directory: Path) -> bool:
    """A complete training checkpoint: weights, config and trainer state present."""
    return all((directory / n).is_file() for n in (WEIGHTS_NAME, CONFIG_NAME, TRAINER_NAME))


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """The complete ``step_*`` checkpoints of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), d)
        for d in root.iterdir()
        if (m := _STEP_DIR.match(d.name)) and d.is_dir() and is_checkpoint(d)
    ]
    return [d for _, d in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or ``None``."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def resolve_resume(path: str | Path) -> Path:
    """A checkpoint directory to resume from: ``path`` itself when it is one, else the
    newest checkpoint of the run directory ``path``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"resume path {path} does not exist")
    if is_checkpoint(path):
        return path
    latest = latest_checkpoint(path)
    if latest is None:
        raise FileNotFoundError(
            f"resume path {path} is neither a checkpoint (with {WEIGHTS_NAME}, {CONFIG_NAME}, "
            f"{TRAINER_NAME}) nor a run directory holding checkpoints/step_*"
        )
    return latest


def run_dir_of(path: str | Path) -> Path:
    """The run directory a resume path belongs to: ``path`` itself when it holds
    ``checkpoints/``, else the run that holds the checkpoint ``path``
    (``run/checkpoints/step_N`` or ``run/best``)."""
    path = Path(path)
    if not is_checkpoint(path):
        return path
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent


def prune_checkpoints(run_dir: str | Path, keep_last_k: int) -> list[Path]:
    """Delete all but the newest ``keep_last_k`` step checkpoints (0 keeps all); returns
    the deleted paths."""
    if keep_last_k <= 0:
        return []
    old = list_checkpoints(run_dir)[:-keep_last_k]
    for d in old:
        shutil.rmtree(d, ignore_errors=True)
    return old


def default_save_fn(model: nn.Module, directory: Path, extra: ExtraFiles) -> None:
    """Write ``model`` with :func:`attnlab.checkpoint.save_pretrained` (the model needs a
    ``config`` with ``to_dict()``), adding the ``extra`` files, all atomically."""
    save_pretrained(model, directory, extra=extra)


def write_checkpoint(
    directory: Path,
    model: nn.Module,
    trainer_pt: bytes,
    files: ExtraFiles | None = None,
    save_fn: SaveFn = default_save_fn,
) -> Path:
    """Write one checkpoint directory: the model, ``files`` (e.g. tokenizer files) and
    ``trainer.pt`` (already serialised), atomically through ``save_fn``."""
    extra = dict(files or {})
    extra[TRAINER_NAME] = trainer_pt
    save_fn(model, Path(directory), extra)
    return Path(directory)


def load_model_weights(model: nn.Module, directory: str | Path) -> None:
    """Load a checkpoint's ``model.safetensors`` into ``model`` (strict; safetensors only)."""
    _, state = load_state(directory)
    load_into(model, state, directory)


TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
ROLE_NAMES = {"<pad>": "pad_token", "<bos>": "bos_token", "<eos>": "eos_token", "<unk>": "unk_token",
              "[PAD]": "pad_token", "[UNK]": "unk_token", "[CLS]": "cls_token", "[SEP]": "sep_token",
              "[MASK]": "mask_token"}
"""The special tokens ``tokenizer_config.json`` names by convention, by their ``transformers`` role."""


def tokenizer_config(tokenizer_json: str, *, roles: Sequence[str] | None = None,
                     chat_template: str | None = None) -> dict[str, Any]:
    """``tokenizer_config.json`` beside ``tokenizer_json`` (Hugging Face's format; ``transformers``'
    ``AutoTokenizer`` and attnlab's tokenizers read it): ``PreTrainedTokenizerFast``; the special
    tokens by their role — ``roles`` (pad, bos, eos, unk) where given, else those of
    :data:`ROLE_NAMES` that it holds; the chat template. attnlab's tokenizers read a special token
    typed in a text as text, so ``split_special_tokens`` is set where it holds attnlab's ``<eos>``
    or where ``roles`` come from an attnlab tokenizer."""
    specials = [t["content"] for t in json.loads(tokenizer_json).get("added_tokens", []) if t.get("special")]
    config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    if roles is None:
        config |= {ROLE_NAMES[t]: t for t in specials if t in ROLE_NAMES}
    else:
        config |= dict(zip(("pad_token", "bos_token", "eos_token", "unk_token"), roles, strict=True))
    config["split_special_tokens"] = roles is not None or "<eos>" in specials
    return config | ({"chat_template": chat_template} if chat_template else {})
