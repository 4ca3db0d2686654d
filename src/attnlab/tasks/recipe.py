"""Recipes: a TOML file whose tables map 1:1 onto typed dataclasses, one recipe class a task.

Every recipe has the same shape::

    task = "translation"          # which Task trains it (attnlab.tasks)
    [data]   the task's data table           (a dataclass of the task)
    [model]  type = "..." (one of the recipe's model types; default the first) and that model
             config's fields, except the ones the data fixes (vocabulary sizes, ...)
    [optim]  attnlab.training.OptimConfig    (optimizer and learning-rate schedule)
    [train]  attnlab.training.TrainConfig    (steps, evaluation, checkpoints, bf16, seed)
    [eval]   the task's evaluation table     (a dataclass of the task)

:meth:`Recipe.from_dict` rejects an unknown table or key by name, checks every value (the
``[model]`` table against the config class of the model type it names, through
:class:`ModelTable`) and then the
settings that contradict one another (:meth:`Recipe.check`), all before any data is read. The
parsed recipe is saved as ``recipe.json`` into every checkpoint.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from attnlab.config import from_dict, parse_override, unknown_key_error
from attnlab.memory import Need, leading_sizes, measure_model
from attnlab.models import MODEL_TYPES  # importing the models registers them
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


class ModelTable(Generic[C]):
    """A recipe's ``[model]`` table: ``type`` names the model (one of ``choices``, registered
    model types; default the first), the other keys are fields of that model's config class
    ``C`` except ``fixed``, the ones the data decides (a vocabulary size comes from the
    tokenizer).

    The table is checked when the recipe is read, by building ``C`` with stand-in values for
    the fixed fields; its attributes read the resolved settings, defaults included
    (``recipe.model.d_model``). :meth:`build` makes the real config once the data is known and
    :meth:`build_model` the model.
    """

    def __init__(self, choices: tuple[str, ...], table: Mapping[str, Any], stand_ins: Mapping[str, Any]):
        if not isinstance(table, Mapping):
            raise ValueError(f"[model] must be a table, got {table!r}")
        table = dict(table)
        self.named_type = "type" in table  # saved back only when the recipe named it
        self.type = table.pop("type", choices[0])
        check_choice("[model] type", self.type, choices)
        for key in stand_ins:
            if key in table:
                raise ValueError(f"[model] key {key!r} is set from the data; remove it")
        self.model_class = MODEL_TYPES[self.type]
        self.config_class, self.table, self.fixed = self.model_class.config_class, table, tuple(stand_ins)
        self._stand_ins = dict(stand_ins)
        self._resolved = self.build(**stand_ins)

    def build(self, **fixed: Any) -> C:
        """The model config: this table plus the data-fixed fields ``fixed``."""
        try:
            return from_dict(self.config_class, {**self.table, **fixed}, where="[model]")
        except (TypeError, ValueError) as err:
            raise ValueError(f"[model]: {err}") from err

    def build_model(self, **fixed: Any) -> Any:
        """A fresh model of the table's ``type`` (its config: :meth:`build` of ``fixed``)."""
        return self.model_class(self.build(**fixed))

    def training_need(self, **fixed: Any) -> Need:
        """What training the model needs at least: its parameters, their gradients and Adam's two
        moments, and its buffers, counted on the meta device (nothing is allocated). ``fixed``:
        the data-fixed fields where the stand-ins would overstate them (a vocabulary)."""
        config = self.build(**{**self._stand_ins, **fixed})
        try:
            size = measure_model(lambda: self.model_class(config))
        except ValueError as err:  # a layer repeated past the machine's memory
            raise ValueError(f"[model]: {err}") from None
        return size.need(leading_sizes(config, "model.", skip=self.fixed), training=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("config_class", "table", "fixed", "type", "model_class"):
            raise AttributeError(name)
        if name in self.fixed:
            raise AttributeError(f"[model] {name} is set from the data, not by the recipe")
        return getattr(self._resolved, name)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.table} if self.named_type else dict(self.table)

    def __repr__(self) -> str:
        return f"ModelTable({self.type!r}, {self.table!r})"


@dataclass
class Recipe:
    """The tables every recipe has; a task's recipe class adds ``data``, ``model`` and ``eval``.

    ``task_name`` is the ``task = "..."`` the recipe must carry. ``model_types`` are the
    registered model types its ``[model]`` table may name with ``type`` (the first is the
    default); they are also the checkpoints ``attnlab evaluate`` scores with the task. A
    ``model`` field typed :class:`ModelTable` is checked against the named type's config
    class, with the stand-ins :meth:`model_stand_ins` gives for the fields the data fixes.
    """

    task: str
    train: TrainConfig
    optim: OptimConfig

    task_name: ClassVar[str] = ""
    model_types: ClassVar[tuple[str, ...]] = ()

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
            model = ModelTable(cls.model_types, raw.get("model", {}), cls.model_stand_ins(tables))
            recipe = cls(task=cls.task_name, model=model, **tables)
        recipe.optim.check_steps(recipe.train.max_steps)
        recipe.check()
        return recipe

    @classmethod
    def model_stand_ins(cls, tables: Mapping[str, Any]) -> dict[str, Any]:
        """Values for the ``[model]`` fields the data fixes, to check the table before the data
        is read (``tables``: the other parsed tables)."""
        return {}

    def check(self) -> None:
        """Raise ``ValueError`` for settings that are each valid but contradict one another."""

    def settings(self) -> dict[str, Any]:
        """Every resolved setting by its dotted name (``model.d_model``), defaults included."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, ModelTable):
                out[f"{f.name}.type"] = value.type
                value = value._resolved
            if dataclasses.is_dataclass(value):
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
