"""Configs: dataclasses filled from TOML recipes and ``key=value`` overrides, never from code.

A recipe is a TOML file (read with :func:`attnlab.parsing.read_toml`); each table maps 1:1 onto a dataclass.
:func:`from_dict` rejects an unknown key by name and suggests the closest field, so a typo
such as ``d_modle`` fails loudly instead of being ignored. Overrides are dotted keys whose
values are TOML literals: ``model.d_model=256``, ``train.lr=3e-4``,
``model.positional="rope"`` (a bare word such as ``rope`` is taken as a string).

This module is the machinery only; each config lives beside the code it configures (the
model configs beside their models in :mod:`attnlab.models`, the layers' shared
:class:`~attnlab.modules.block_config.BlockConfig` in :mod:`attnlab.modules`) and subclasses
:class:`Config` for ``from_dict`` / ``to_dict``. A field renamed since a checkpoint was
written is listed in the class's ``renamed_fields``: :func:`upgrade` maps an old
``config.json`` onto the new names, while a recipe that still uses the old name is told the
new one.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from attnlab.parsing import read_toml, toml_literal

T = TypeVar("T")
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # TOML's integers, and torch's: every int setting is one


def unknown_key_error(
    key: str, allowed: Sequence[str], where: str, renamed: Mapping[str, str] | None = None
) -> ValueError:
    """``unknown key 'd_modle' in [model]; did you mean 'd_model'? (allowed: ...)``."""
    if renamed and key in renamed:
        return ValueError(f"key {key!r} in {where} was renamed to {renamed[key]!r}")
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
        if abs(value) > sys.float_info.max:
            raise ValueError(f"{name} = {value} is too large for a float (at most {sys.float_info.max:.4g})")
        return float(value)
    if annotation in (int, float, str, bool):
        if not isinstance(value, annotation) or (annotation is int and isinstance(value, bool)):
            raise ValueError(
                f"{name} must be {annotation.__name__}, got {type(value).__name__} {value!r}"
            )
    if annotation is int and not INT_MIN <= value <= INT_MAX:
        raise ValueError(f"{name} = {value} is outside the 64-bit integers a setting holds "
                         f"({INT_MIN} to {INT_MAX})")
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
            raise unknown_key_error(key, list(fields), where, getattr(cls, "renamed_fields", None))
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


def upgrade(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (e.g. an old ``config.json``) with the fields ``cls`` renamed under their new
    names, in nested config tables too; a key already under its new name wins."""
    renamed = getattr(cls, "renamed_fields", {})
    out = {renamed.get(k, k): v for k, v in data.items() if k not in renamed}
    out.update({new: data[old] for old, new in renamed.items() if old in data and new not in data})
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        for key, value in out.items():
            if key in hints and dataclasses.is_dataclass(hints[key]) and isinstance(value, Mapping):
                out[key] = upgrade(hints[key], value)
    return out


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
    return path, toml_literal(raw, f"override {key}")


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
    return apply_overrides(read_toml(path), overrides)


class Config:
    """Mixin for configs: ``Cls.from_dict(d)``, ``cfg.to_dict()``, ``cfg.replace()``.

    ``renamed_fields`` maps old field names to new ones (see :func:`upgrade`).
    """

    renamed_fields: typing.ClassVar[Mapping[str, str]] = {}

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
