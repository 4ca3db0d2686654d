"""Configs: dataclasses filled from TOML recipes and ``key=value`` overrides, never from code.

A recipe is a TOML file (read with :mod:`tomllib`); each table maps 1:1 onto a dataclass.
:func:`from_dict` rejects an unknown key by name and suggests the closest field, so a typo
such as ``d_modle`` fails loudly instead of being ignored. Overrides are dotted keys whose
values are TOML literals: ``model.d_model=256``, ``train.lr=3e-4``,
``model.positional="rope"`` (a bare word such as ``rope`` is taken as a string).

Model configs live next to this module's helpers: :class:`TransformerConfig`
(encoder-decoder) and :class:`GPTConfig` (decoder-only); every config subclasses
:class:`Config` to get ``from_dict`` / ``to_dict``.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import tomllib

from attnlab.layers import ACTIVATIONS, NORMS
from attnlab.positional import POSITIONAL_KINDS

T = TypeVar("T")


def _unknown_key_error(key: str, allowed: Sequence[str], where: str) -> ValueError:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(
        f"unknown key {key!r} in {where}{hint} (allowed: {', '.join(sorted(allowed))})"
    )


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    """Check ``value`` against a field's type; ints become floats, tables become dataclasses."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in (o for o in options if o is not type(None)):
            try:
                return _coerce(name, value, option)
            except (TypeError, ValueError) as err:
                errors.append(str(err))
        raise ValueError(errors[0] if len(errors) == 1 else f"{name}: {'; '.join(errors)}")
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, Mapping):
            raise ValueError(
                f"{name} must be a table of {annotation.__name__} fields, got {value!r}"
            )
        return from_dict(annotation, value, where=name)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{name} must be a list, got {type(value).__name__} {value!r}")
        (item,) = typing.get_args(annotation)[:1] or (Any,)
        return origin(_coerce(f"{name}[{i}]", v, item) for i, v in enumerate(value))
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation in (int, float, str, bool):
        if not isinstance(value, annotation) or (annotation is int and isinstance(value, bool)):
            raise ValueError(
                f"{name} must be {annotation.__name__}, got {type(value).__name__} {value!r}"
            )
    return value


def from_dict(cls: type[T], data: Mapping[str, Any], *, where: str | None = None) -> T:
    """Build dataclass ``cls`` from ``data``; unknown or missing keys raise ``ValueError`` by name.

    Nested dataclass fields take nested tables. Values are type-checked against the field
    annotations (an int is accepted for a float field).
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"cls must be a dataclass type, got {cls!r}")
    if not isinstance(data, Mapping):
        raise TypeError(
            f"data must be a mapping of {cls.__name__} fields, got {type(data).__name__}"
        )
    where = where or cls.__name__
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            raise _unknown_key_error(key, list(fields), where)
    missing = [
        name
        for name, f in fields.items()
        if name not in data
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ValueError(f"{where} is missing required key(s): {', '.join(missing)}")
    kwargs = {key: _coerce(f"{where}.{key}", value, hints[key]) for key, value in data.items()}
    return cls(**kwargs)


def to_dict(config: Any) -> dict[str, Any]:
    """A dataclass config as plain nested dicts (JSON/TOML-ready)."""
    return dataclasses.asdict(config)


def parse_override(override: str) -> tuple[list[str], Any]:
    """``"model.d_model=256"`` → ``(["model", "d_model"], 256)``; the value is a TOML literal.

    A value that is not a TOML literal (``positional=rope``) is kept as a string.
    """
    key, sep, raw = override.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key:
        raise ValueError(f"override must look like key=value, got {override!r}")
    path = key.split(".")
    if any(not part for part in path):
        raise ValueError(f"override key must be dotted names like model.d_model, got {key!r}")
    try:
        value = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw
    return path, value


def apply_overrides(data: dict[str, Any], overrides: Sequence[str] | None) -> dict[str, Any]:
    """Set each dotted ``key=value`` in ``data`` (in place, creating tables), and return it."""
    for override in overrides or ():
        path, value = parse_override(override)
        table = data
        for i, part in enumerate(path[:-1]):
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ValueError(
                    f"override {override!r}: {'.'.join(path[: i + 1])} is a value, not a table"
                )
        table[path[-1]] = value
    return data


def load_toml(path: str | Path, overrides: Sequence[str] | None = None) -> dict[str, Any]:
    """Read a TOML recipe into nested dicts and apply ``key=value`` overrides.

    Map the tables onto dataclasses with :func:`from_dict` (or ``Config.from_dict``).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"config file {path} is not valid TOML: {err}") from err
    return apply_overrides(data, overrides)


class Config:
    """Mixin for configs: ``Cls.from_dict(d)``, ``cfg.to_dict()``, ``cfg.replace()``."""

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        return from_dict(cls, data)

    @classmethod
    def from_toml(
        cls: type[T],
        path: str | Path,
        overrides: Sequence[str] | None = None,
        *,
        section: str | None = None,
    ) -> T:
        """Read ``path`` (optionally only its ``[section]`` table) into this config."""
        data = load_toml(path, overrides)
        if section is not None:
            if section not in data:
                raise ValueError(
                    f"config file {path} has no [{section}] table (tables: {', '.join(data)})"
                )
            data = data[section]
        return from_dict(cls, data)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def replace(self: T, **changes: Any) -> T:
        return dataclasses.replace(self, **changes)


def _check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _check_common(cfg: Any) -> None:
    """Checks shared by the model configs (positive sizes, known choices, head split)."""
    for name in ("d_model", "num_heads", "max_len"):
        if getattr(cfg, name) <= 0:
            raise ValueError(f"{name} must be > 0, got {getattr(cfg, name)}")
    if cfg.d_model % cfg.num_heads:
        raise ValueError(
            f"num_heads must divide d_model, got d_model={cfg.d_model}, num_heads={cfg.num_heads}"
        )
    if cfg.positional == "rope" and (cfg.d_model // cfg.num_heads) % 2:
        raise ValueError(
            f"positional='rope' needs an even head width, got {cfg.d_model // cfg.num_heads}"
        )
    for name in ("dropout", "attn_dropout"):
        if not 0.0 <= getattr(cfg, name) < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {getattr(cfg, name)}")
    _check_choice("positional", cfg.positional, POSITIONAL_KINDS)
    _check_choice("activation", cfg.activation, ACTIVATIONS)
    _check_choice("norm", cfg.norm, NORMS)


@dataclass
class TransformerConfig(Config):
    """Encoder-decoder Transformer (Vaswani et al. 2017; seed 004 "Transformer Machine
    Translation").

    Defaults are the paper's base model. ``tgt_vocab_size=None`` means the source vocabulary
    size. ``share_embeddings`` ties source and target embeddings (one joint vocabulary, sizes
    must match); ``tie_output`` ties the target embedding and the output projection.
    ``max_len`` bounds learned positions. ``d_ff=None`` means ``4 · d_model``.
    """

    src_vocab_size: int
    tgt_vocab_size: int | None = None
    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int | None = None
    dropout: float = 0.1
    attn_dropout: float = 0.0
    activation: str = "relu"
    norm: str = "layernorm"
    norm_first: bool = False
    norm_eps: float = 1e-5
    bias: bool = True
    positional: str = "sinusoidal"
    max_len: int = 512
    pad_id: int = 0
    share_embeddings: bool = False
    tie_output: bool = True
    rope_base: float = 10000.0
    num_buckets: int = 32
    max_distance: int = 128

    def __post_init__(self) -> None:
        if self.tgt_vocab_size is None:
            self.tgt_vocab_size = self.src_vocab_size
        for name in (
            "src_vocab_size",
            "tgt_vocab_size",
            "num_encoder_layers",
            "num_decoder_layers",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary, got src_vocab_size={self.src_vocab_size} "
                f"and tgt_vocab_size={self.tgt_vocab_size}"
            )
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"pad_id must be a token id in both vocabularies, got {self.pad_id}")
        _check_common(self)

    @property
    def ffn_dim(self) -> int:
        return self.d_ff or 4 * self.d_model


@dataclass
class GPTConfig(Config):
    """Decoder-only language model (Radford et al. 2018/2019; seed 004 "Transformer Language
    Pre-training").

    Defaults follow GPT-2 style: pre-LN, GELU, learned positions, tied input/output
    embeddings. ``block_size`` is the longest context (and bounds learned positions).
    ``d_ff=None`` means ``4 · d_model``.
    """

    vocab_size: int
    block_size: int = 256
    d_model: int = 384
    num_heads: int = 6
    num_layers: int = 6
    d_ff: int | None = None
    dropout: float = 0.0
    attn_dropout: float = 0.0
    activation: str = "gelu"
    norm: str = "layernorm"
    norm_first: bool = True
    norm_eps: float = 1e-5
    bias: bool = True
    positional: str = "learned"
    tie_weights: bool = True
    rope_base: float = 10000.0
    num_buckets: int = 32
    max_distance: int = 128

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "num_layers"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        _check_common(self)

    @property
    def max_len(self) -> int:
        return self.block_size

    @property
    def ffn_dim(self) -> int:
        return self.d_ff or 4 * self.d_model
