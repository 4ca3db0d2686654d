"""Recipes: a TOML file whose tables map 1:1 onto typed dataclasses, one recipe class a task.

Every recipe has the same shape::

    task = "translation"          # which Task trains it (attnlab.tasks)
    [data]   the task's data table           (a dataclass of the task)
    [model]  type = "..." (one of the models registered for the task; default its default) and
             that model config's fields, except those the other tables fix (a window's
             length) and those the data decides when it is read (vocabulary sizes)
    [optim]  attnlab.training.OptimConfig    (optimizer and learning-rate schedule)
    [train]  attnlab.training.TrainConfig    (steps, evaluation, checkpoints, bf16, seed)
    [eval]   the task's evaluation table     (a dataclass of the task)

:meth:`Recipe.from_dict` rejects an unknown table or key by name, checks every value (the
``[model]`` table against the config class of the model type it names, through
:class:`ModelTable`) and then the settings that contradict one another
(:meth:`Recipe.check`), all before any data is read. No model config exists until the data
has decided its last fields (:meth:`ModelTable.resolve`). The parsed recipe is saved as
``recipe.json`` into every checkpoint.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from attnlab.config import from_dict, parse_override, unknown_key_error
from attnlab.data.sources import resolved
from attnlab.memory import Need, leading_sizes, measure_model
from attnlab.models import MODEL_TYPES, task_models  # importing the models registers them
from attnlab.training import OptimConfig, TrainConfig
from attnlab.validation import check_choice, counted

C = TypeVar("C")
R = TypeVar("R", bound="Recipe")
# What a resumed run must share with the run it continues: the data, the model, the optimizer
# and the train settings that shape each update. The rest (length, logging, checkpoints, the
# wall-time safety net, [eval]) may change on resume.
FIXED_ON_RESUME = (
    "data.", "model.", "optim.", "train.seed", "train.grad_accum", "train.clip_norm", "train.bf16",
)


def fit_warmup(recipe: MutableMapping[str, Any], overrides: Sequence[str]) -> str | None:
    """Shorten the warmup of a run the command line shortened: when ``overrides`` set
    ``train.max_steps`` (or ``optim.decay_steps``) to no more than the recipe's ``optim.warmup``,
    which a cosine schedule needs to be shorter, the warmup becomes a tenth of the run. Returns
    the note saying so (``None`` when nothing changed). A warmup given in ``overrides`` too is
    left as it is, for :meth:`Recipe.from_dict` to refuse."""
    optim, train = recipe.get("optim", {}), recipe.get("train", {})
    if not isinstance(optim, Mapping) or not isinstance(train, Mapping):
        return None  # refused by name later
    given = {".".join(parse_override(o)[0]) for o in overrides}
    length = "optim.decay_steps" if optim.get("decay_steps") is not None else "train.max_steps"
    total = optim.get("decay_steps") if length == "optim.decay_steps" else train.get("max_steps")
    warmup = optim.get("warmup", OptimConfig.warmup)
    if (optim.get("schedule", OptimConfig.schedule) != "warmup_cosine" or "optim.warmup" in given
            or length not in given or not all(type(v) is int and v > 0 for v in (total, warmup))
            or warmup < total):
        return None
    recipe["optim"] = {**optim, "warmup": total // 10}
    return (f"note: optim.warmup={warmup} is not shorter than {length}={total}: warming up over "
            f"{counted(total // 10, 'step')} instead (a tenth of the run; set optim.warmup to choose)")


def corpus_paths(name: str, corpus: str | list[str], presets: Sequence[str],
                 *held_out: str | list[str]) -> tuple[Any, ...]:
    """A ``[data]`` table's ``corpus`` (a preset's name as it is, else its paths made absolute)
    and its own validation / test files (``""``: none), which only a corpus of files takes."""
    if not corpus:
        raise ValueError(f"{name} must name a preset ({', '.join(presets)}) or your files, got {corpus!r}")
    if isinstance(corpus, str) and corpus in presets:
        given = [n for n, v in zip(("val", "test")[: len(held_out)], held_out, strict=True) if v]
        if given:
            raise ValueError(f"data.{given[0]} names files of your own corpus; the {corpus} preset "
                             "has its own")
        return corpus, *held_out
    return resolved(corpus), *(resolved(v) if v else v for v in held_out)


def _nested(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{"gpt.vocab_size": 65}`` → ``{"gpt": {"vocab_size": 65}}`` (a dotted name is a nested field)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        *tables, key = name.split(".")
        table = out
        for part in tables:
            table = table.setdefault(part, {})
        table[key] = value
    return out


def _merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """The tables merged key by key, nested tables too; a later layer wins."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            both = isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
            out[key] = _merged(out[key], value) if both else value
    return out


def _lookup(table: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """``(True, value)`` of dotted ``name`` in nested ``table``, ``(False, None)`` when absent."""
    for part in name.split("."):
        if not isinstance(table, Mapping) or part not in table:
            return False, None
        table = table[part]
    return True, table


def _without(table: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """``table`` less the dotted ``names`` (nested tables copied)."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in table.items()}
    for name in names:
        *tables, key = name.split(".")
        inner: Any = out
        for part in tables:
            inner = inner.get(part, {}) if isinstance(inner, Mapping) else {}
        if isinstance(inner, dict):
            inner.pop(key, None)
    return out


class ModelTable(Generic[C]):
    """A recipe's ``[model]`` table: ``type`` names the model — one of the models registered for
    the recipe's ``task`` (:func:`~attnlab.models.task_models`, its default when the table names
    none) — and the other keys are fields of that model's config class ``C``, except those
    decided elsewhere:

    * ``fixed``: by the recipe's other tables, known when it is read (a window's length from
      ``[data]``, the widths of a task's vectors);
    * ``pending``: by the data, once it is read (a vocabulary size), each given here with the
      smallest value the data can give it.

    With ``init_from = CKPT`` (where the recipe class takes it: :meth:`Recipe.model_start`)
    the checkpoint's own config decides the fields the table leaves out, pending ones included,
    and a field the table sets must agree with it.

    The table is checked when the recipe is read, with the pending fields at their smallest:
    an unknown key (the closest field suggested), a bad value, a size past the machine's
    memory is refused before any data is read; that check keeps no config. :attr:`settings`
    holds what the recipe decides (defaults included, pending fields not); :meth:`resolve`
    makes the config once the data has decided the pending fields, :meth:`build_model` the
    model.
    """

    def __init__(
        self, task: str, table: Mapping[str, Any], *, fixed: Mapping[str, Any] | None = None,
        pending: Mapping[str, Any] | None = None,
        start: Callable[[str], Mapping[str, Any]] | None = None,
    ):
        if not isinstance(table, Mapping):
            raise ValueError(f"[model] must be a table, got {table!r}")
        table = dict(table)
        self.named_type = "type" in table  # saved back only when the recipe named it
        choices = task_models(task)
        self.type = table.pop("type") if self.named_type else (choices or ("",))[0]
        check_choice("[model] type", self.type, choices)
        self.init_from: str | None = table.pop("init_from", None)
        self.model_class = MODEL_TYPES[self.type]
        self.config_class: type[C] = self.model_class.config_class
        fixed, pending = dict(fixed or {}), dict(pending or {})
        for name in (*fixed, *pending):
            if _lookup(table, name)[0]:
                raise ValueError(f"[model] key {name!r} is set from the data; remove it")
        self.table = table
        self.base = self._start(start)
        decided = {n: v for n, v in pending.items() if _lookup(self.base, n)[0]}  # by the checkpoint
        self.fixed = {**fixed, **{n: _lookup(self.base, n)[1] for n in decided}}
        self.pending = {n: v for n, v in pending.items() if n not in decided}
        checked = dataclasses.asdict(self._config(self.pending))  # the table, checked
        self.settings: dict[str, Any] = _without(checked, list(self.pending))
        """Every config field the recipe decides, by name (nested configs as tables), defaults
        included; the pending fields are not here."""

    def _start(self, start: Callable[[str], Mapping[str, Any]] | None) -> dict[str, Any]:
        """The fields the ``init_from`` checkpoint decides (``{}`` without one), after refusing a
        table field that disagrees with them."""
        if self.init_from is None:
            return {}
        if start is None:
            fields = [f.name for f in dataclasses.fields(self.config_class)]
            raise unknown_key_error("init_from", fields, "[model]")
        if not isinstance(self.init_from, str) or not self.init_from:
            raise ValueError(f"[model] init_from must name a checkpoint directory, got {self.init_from!r}")
        base = dict(start(self.init_from))
        self._check_agrees(self.table, base, "")
        return base

    def _check_agrees(self, table: Mapping[str, Any], base: Mapping[str, Any], prefix: str) -> None:
        for key, value in table.items():
            if key not in base:
                continue
            if isinstance(value, Mapping) and isinstance(base[key], Mapping):
                self._check_agrees(value, base[key], f"{prefix}{key}.")
            elif value != base[key]:
                raise ValueError(
                    f"[model] {prefix}{key} = {value!r} but init_from {self.init_from} has "
                    f"{prefix}{key} = {base[key]!r}; remove the key or make it agree"
                )

    def _config(self, values: Mapping[str, Any]) -> C:
        try:
            merged = _merged(self.base, self.table, _nested(self.fixed), _nested(values))
            return from_dict(self.config_class, merged, where="[model]")
        except (TypeError, ValueError) as err:
            raise ValueError(f"[model]: {err}") from err

    def resolve(self, **values: Any) -> C:
        """The model config, once the data has decided the :attr:`pending` fields ``values``
        (a nested field by its dotted name: ``**{"gpt.vocab_size": 65}``)."""
        if set(values) != set(self.pending):
            raise ValueError(f"[model] {self.type} needs the data's {', '.join(self.pending) or 'nothing'}; "
                             f"got {', '.join(values) or 'nothing'}")
        return self._config(values)

    def build_model(self, **values: Any) -> Any:
        """A fresh model of the table's ``type``: its config is :meth:`resolve` of ``values``."""
        return self.model_class.from_config(self.resolve(**values))

    def training_need(self, **values: Any) -> Need:
        """What training the model needs at least: its parameters, their gradients and Adam's two
        moments, and its buffers, counted on the meta device (nothing is allocated), with the
        pending fields at their smallest unless ``values`` gives a larger bound."""
        config = self._config({**self.pending, **values})
        try:
            size = measure_model(lambda: self.model_class.from_config(config))
        except ValueError as err:  # a layer repeated past the machine's memory
            raise ValueError(f"[model]: {err}") from None
        skip = [*(n.split(".")[-1] for n in (*self.fixed, *self.pending))]
        return size.need(leading_sizes(config, "model.", skip=skip), training=True)

    def to_dict(self) -> dict[str, Any]:
        out = {"type": self.type} if self.named_type else {}
        return {**out, **({"init_from": self.init_from} if self.init_from is not None else {}), **self.table}

    def __repr__(self) -> str:
        return f"ModelTable({self.type!r}, {self.to_dict()!r})"


@dataclass
class Recipe:
    """The tables every recipe has; a task's recipe class adds ``data``, ``model`` and ``eval``.

    ``task_name`` is the ``task = "..."`` the recipe must carry. Its ``[model]`` table may name
    with ``type`` the models registered for that task (``@register_model(task=...)``; the
    same list gives the checkpoints ``attnlab evaluate`` scores with the task). A ``model``
    field typed :class:`ModelTable` is checked against the named type's config class; the
    fields the recipe's other tables fix come from :meth:`model_fixed`, those the data decides
    from :meth:`model_pending`; a recipe class with ``takes_init_from`` accepts ``[model]
    init_from = CKPT`` and reads the checkpoint's fields with :meth:`model_start`.
    """

    task: str
    train: TrainConfig
    optim: OptimConfig

    task_name: ClassVar[str] = ""
    takes_init_from: ClassVar[bool] = False

    @classmethod
    def from_dict(cls: type[R], raw: Mapping[str, Any]) -> R:
        """Map a recipe dict (:func:`attnlab.config.load_toml`) onto this class; raise
        ``ValueError`` naming the first unknown table or key, bad value or contradiction."""
        names = [f.name for f in dataclasses.fields(cls)]
        for key in raw:
            if key not in names:
                raise unknown_key_error(key, names, "the recipe")
        if raw.get("task") != cls.task_name:
            raise ValueError(f"task must be {cls.task_name!r} for this recipe, got {raw.get('task')!r}")
        hints = typing.get_type_hints(cls)
        tables: dict[str, Any] = {}
        for name in names:
            table = raw.get(name, {})
            if name == "task" or hints[name] is ModelTable or typing.get_origin(hints[name]) is ModelTable:
                continue
            if not isinstance(table, Mapping):
                raise ValueError(f"[{name}] must be a table, got {table!r}")
            tables[name] = from_dict(hints[name], table, where=f"[{name}]")
        if "model" in tables or "model" not in names:
            recipe = cls(task=cls.task_name, **tables)
        else:
            start = cls.model_start if cls.takes_init_from else None
            model = ModelTable(cls.task_name, raw.get("model", {}), fixed=cls.model_fixed(tables),
                               pending=cls.model_pending(tables), start=start)
            recipe = cls(task=cls.task_name, model=model, **tables)
        recipe.optim.check_steps(recipe.train.max_steps)
        recipe.check()
        return recipe

    @classmethod
    def model_fixed(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """The ``[model]`` fields the recipe's other tables fix (``tables``: those tables,
        parsed), by name: the table may not set them."""
        return {}

    @classmethod
    def model_pending(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """The ``[model]`` fields the data decides once it is read (a vocabulary size), each with
        the smallest value the data can give it: the table is checked, and the memory a run
        needs bounded, at those; the task passes the real values to ``model.resolve``."""
        return {}

    @classmethod
    def model_start(cls, checkpoint: str) -> Mapping[str, Any]:
        """The ``[model]`` fields the ``init_from`` checkpoint decides (its architecture), read
        from its ``config.json``; only for a recipe class with ``takes_init_from``."""
        raise NotImplementedError

    def check(self) -> None:
        """Raise ``ValueError`` for settings that are each valid but contradict one another."""

    def settings(self) -> dict[str, Any]:
        """Every resolved setting by its dotted name (``model.d_model``), defaults included."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, ModelTable):
                table = {"type": value.type, "init_from": value.init_from, **value.settings}
                out.update({f"{f.name}.{k}": v for k, v in table.items()})
            elif dataclasses.is_dataclass(value):
                out.update({f"{f.name}.{k}": v for k, v in dataclasses.asdict(value).items()})
        return out

    def check_continues(self, saved: Recipe, checkpoint: object) -> None:
        """Raise ``ValueError`` naming the first setting of :data:`FIXED_ON_RESUME` in which
        this recipe differs from ``saved``, the recipe of the run resumed from ``checkpoint``:
        resuming with another model, data or optimizer would mix two runs in one."""
        mine, theirs = self.settings(), saved.settings()
        for key in sorted(mine.keys() | theirs.keys()):
            if key.startswith(FIXED_ON_RESUME) and mine.get(key) != theirs.get(key):
                raise ValueError(
                    f"{key}={mine.get(key)!r} but the run resumed from {checkpoint} has "
                    f"{key}={theirs.get(key)!r}; resume with its settings (omit --config to take "
                    "them from the checkpoint) or start a new run"
                )

    def to_dict(self) -> dict[str, Any]:
        """The recipe as plain nested dicts (what ``recipe.json`` holds)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, ModelTable) else (
                dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
            )
        return out
