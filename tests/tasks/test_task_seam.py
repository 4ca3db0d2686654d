"""The task seam (docs/design.md, "The seams a model joins"): a new task is one class that
registers itself, and ``attnlab.tasks.train`` drives it like every other — seeded model on
the device, optimizer from ``[optim]``, the trainer with its checkpoints, then the report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch import nn

from attnlab.models import (
    GPT,
    MODEL_TASKS,
    GPTConfig,
    Transformer,
    TransformerConfig,
    register_model,
    task_models,
)
from attnlab.models.base import DEFAULT_MODELS, MODEL_TYPES
from attnlab.tasks import (
    TASKS,
    EvaluateRequest,
    LanguageModelTask,
    ModelTable,
    Recipe,
    Task,
    TranslationTask,
    register_task,
    task_for_checkpoint,
    train,
)
from attnlab.training import TrainResult
from attnlab.training.losses import mean_loss
from repo_paths import CONFIGS


@dataclass
class CountingData:
    """``[data]`` of the toy task: predict the next number of a counting sequence."""

    length: int = 8
    batches: int = 4


@dataclass
class CountingEval:
    batches: int = 2


class CountingGPT(GPT):
    """The counting task's model: a GPT under its own model type (a model names its task when
    it registers, in the ``counting_task`` fixture)."""

    model_type = "counting_gpt"


@dataclass
class CountingRecipe(Recipe):
    data: CountingData
    model: ModelTable
    eval: CountingEval

    task_name = "counting"

    @classmethod
    def model_fixed(cls, tables):
        return {"block_size": tables["data"].length}

    @classmethod
    def model_pending(cls, tables):
        return {"vocab_size": 5}  # the smallest vocabulary "the data" could give


class CountingTask(Task):
    """Sequences 3, 4, 5, ... (mod 16): a GPT learns to count. Records what the driver did."""

    recipe_class = CountingRecipe

    def prepare(self, resume):
        n = self.recipe.data.length
        starts = torch.arange(self.recipe.data.batches * 4) % 16
        seqs = (starts[:, None] + torch.arange(n + 1)) % 16  # (N, n + 1)
        self.batches = [(x[:, :-1], x[:, 1:]) for x in seqs.split(4)]
        self.calls = ["prepare"]

    def build_model(self):
        self.calls.append("build_model")
        self.built = self.recipe.model.build_model(vocab_size=16)
        return self.built

    def train_data(self):
        return self.batches

    def loss(self, model, batch):
        x, y = batch
        assert x.device == next(model.parameters()).device  # moved by the trainer
        logits = model(x)
        return nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum"), y.numel()

    def validate(self, model):
        return {"val_loss": mean_loss(model, self.loss, self.batches[: self.recipe.eval.batches])}

    def report(self, model: nn.Module, result: TrainResult) -> dict[str, Any]:
        self.calls.append("report")
        results = {"steps": result.step, "val_loss": result.last_eval["val_loss"]}
        (self.run_dir / "results.json").write_text(json.dumps(results))
        CountingTask.last = self
        return results

    @classmethod
    def evaluate(cls, checkpoint, request):
        return {"checkpoint": str(checkpoint), "device": request.device}

    @classmethod
    def format_scores(cls, scores):
        return f"counted on {scores['device']}"


@pytest.fixture
def counting_task():
    register_model(CountingGPT, task="counting", default=True)
    register_task(CountingTask)
    yield CountingTask
    TASKS.pop("counting")
    for registry in (MODEL_TYPES, MODEL_TASKS):
        registry.pop("counting_gpt")
    DEFAULT_MODELS.pop("counting")


RECIPE = {
    "task": "counting",
    "model": {"d_model": 16, "num_heads": 2, "num_layers": 1},
    "optim": {"lr": 1e-2, "warmup": 2},
    "train": {"max_steps": 6, "eval_every": 3, "save_every": 3, "progress": False, "seed": 3},
}


def test_a_registered_task_is_trained_by_the_one_driver(counting_task, tmp_path, capsys):
    run = train(RECIPE, run_dir=tmp_path / "run", device="cpu")
    header = capsys.readouterr().out.splitlines()[0]  # what the numbers depend on
    assert f" {torch.get_num_threads()} thread" in header and "torch " in header
    assert "device cpu" in header and "task counting" in header
    task = CountingTask.last
    assert task.calls == ["prepare", "build_model", "report"]
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 6
    saved = json.loads((run / "checkpoints" / "step_00000006" / "recipe.json").read_text())
    assert saved["task"] == "counting" and saved["model"] == RECIPE["model"]
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evals = [e["val_loss"] for e in events if e["event"] == "eval"]
    assert len(evals) == 2 and evals[1] < evals[0]  # it learns


def test_the_driver_seeds_the_model_with_train_seed(counting_task, tmp_path):
    a, b = (train(RECIPE, run_dir=tmp_path / name) for name in ("a", "b"))
    first = [CountingGPT.from_pretrained(r / "checkpoints" / "step_00000006").state_dict() for r in (a, b)]
    for key, value in first[0].items():
        torch.testing.assert_close(value, first[1][key], rtol=0, atol=0)


def test_recipe_tables_are_checked_before_any_data(counting_task, tmp_path):
    with pytest.raises(ValueError, match="unknown key 'd_modle' in \\[model\\]; did you mean 'd_model'"):
        train({**RECIPE, "model": {"d_modle": 16}}, run_dir=tmp_path)
    with pytest.raises(ValueError, match="\\[model\\] key 'vocab_size' is set from the data"):
        train({**RECIPE, "model": {"vocab_size": 16}}, run_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown key 'optimiser' in the recipe"):
        train({**RECIPE, "optimiser": {}}, run_dir=tmp_path)
    with pytest.raises(ValueError, match="device must be like 'cpu' or 'cuda:0', got 'gpu'"):
        train(RECIPE, run_dir=tmp_path, device="gpu")
    assert not (tmp_path / "checkpoints").exists()


def test_model_table_reads_resolved_settings(counting_task):
    recipe = CountingRecipe.from_dict(RECIPE)
    settings = recipe.model.settings
    assert (settings["d_model"], settings["num_layers"], settings["block_size"]) == (16, 1, 8)
    assert settings["norm_first"] and settings["positional"] == "learned"  # GPTConfig defaults
    assert "vocab_size" not in settings  # the data decides it: no stand-in value to read
    assert recipe.to_dict()["model"] == RECIPE["model"]


def test_the_model_config_exists_once_the_data_has_decided_its_fields(counting_task):
    """No config is built with stand-in values: ``resolve`` makes it from the data's values,
    and refuses to without them."""
    table = CountingRecipe.from_dict(RECIPE).model
    assert table.pending == {"vocab_size": 5} and table.fixed == {"block_size": 8}
    config = table.resolve(vocab_size=16)
    assert isinstance(config, GPTConfig)
    assert (config.vocab_size, config.block_size, config.d_model) == (16, 8, 16)
    with pytest.raises(ValueError, match="counting_gpt needs the data's vocab_size; got nothing"):
        table.resolve()
    assert not hasattr(table, "d_model")  # settings are read from .settings, never forwarded


def test_a_task_name_is_registered_once(counting_task):
    class Other(CountingTask):
        pass

    with pytest.raises(ValueError, match="task 'counting' of Other is already registered by CountingTask"):
        register_task(Other)


def test_evaluate_finds_the_task_by_model_type(tmp_path):
    torch.manual_seed(0)
    gpt = GPTConfig(vocab_size=8, block_size=4, d_model=8, num_heads=2, num_layers=1)
    GPT(gpt).save_pretrained(tmp_path / "g")
    Transformer(TransformerConfig(8, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1)
                ).save_pretrained(tmp_path / "t")
    assert task_for_checkpoint(tmp_path / "g") is LanguageModelTask
    assert task_for_checkpoint(tmp_path / "t") is TranslationTask
    assert TASKS["translation"] is TranslationTask and TASKS["language_model"] is LanguageModelTask


def test_evaluate_request_defaults():
    request = EvaluateRequest()
    assert (request.split, request.device) == (None, "cpu")
    assert (request.beam_size, request.length_penalty) == (None, None)  # the checkpoint's


def test_decoding_defaults_to_the_checkpoints_recipe_and_the_command_line_wins():
    from attnlab.cli import build_parser
    from attnlab.pipelines import saved_decoding, with_overrides

    recipe = {"eval": {"beam_size": 4, "length_penalty": 2.0, "average_last": 10}}
    args = build_parser().parse_args(["evaluate", "ckpt"])
    assert (args.beam, args.length_penalty) == (None, None)
    saved = with_overrides(saved_decoding(recipe), beam_size=args.beam, length_penalty=args.length_penalty)
    assert (saved.beam_size, saved.length_penalty) == (4, 2.0)
    args = build_parser().parse_args(["translate", "ckpt", "--beam", "1", "--length-penalty", "0"])
    given = with_overrides(saved_decoding(recipe), beam_size=args.beam, length_penalty=args.length_penalty)
    assert (given.beam_size, given.length_penalty) == (1, 0.0)
    assert saved_decoding({}).length_penalty == 0.6  # a checkpoint without a recipe


def test_a_model_declares_its_task_and_the_recipes_pipelines_and_evaluate_follow(counting_task, tmp_path):
    """One source of which models a task trains: the models' registration."""
    from attnlab.pipelines import CaptioningPipeline, LanguageModelPipeline, TranslationPipeline

    assert task_models("counting") == ("counting_gpt",)
    assert task_models("translation") == ("transformer", "attention_seq2seq", "rnn_seq2seq")  # default first
    assert TranslationPipeline.model_types == task_models("translation")
    assert LanguageModelPipeline.model_types == task_models("language_model") == ("gpt", "lstm", "lstmn")
    assert CaptioningPipeline.model_types == task_models("captioning")
    with pytest.raises(ValueError, match="\\[model\\] type must be one of counting_gpt, got 'gpt'"):
        CountingRecipe.from_dict({**RECIPE, "model": {**RECIPE["model"], "type": "gpt"}})
    CountingGPT(GPTConfig(vocab_size=8, block_size=4, d_model=8, num_heads=2, num_layers=1)).save_pretrained(
        tmp_path / "c")
    assert task_for_checkpoint(tmp_path / "c") is CountingTask
    for model_type, task in MODEL_TASKS.items():  # every model names a task that exists
        assert task in TASKS, (model_type, task)


def test_a_model_registers_itself_once():
    assert MODEL_TYPES["gpt"] is GPT and MODEL_TYPES["transformer"] is Transformer

    class Copy(GPT):
        model_type = "gpt"

    with pytest.raises(ValueError, match="model_type 'gpt' of Copy is already registered by GPT"):
        register_model(Copy)


def test_every_shipped_recipe_names_a_registered_task():
    from attnlab.tasks import load_recipe

    configs = CONFIGS
    for path in sorted(configs.glob("*.toml")):
        raw = load_recipe(path)  # every recipe names its task, the fine-tuning one too
        TASKS[raw["task"]].recipe_class.from_dict(raw)


def test_a_mistaken_fresh_run_is_refused_before_it_touches_the_old_runs_files(
    counting_task, tmp_path, monkeypatch
):
    run = train(RECIPE, run_dir=tmp_path / "run")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    prepared = []
    monkeypatch.setattr(CountingTask, "prepare", lambda self, resume: prepared.append(resume))
    with pytest.raises(ValueError, match=r"is not empty \(best/, checkpoints/.*resume it with --resume"):
        train(RECIPE, run_dir=run)
    assert prepared == []  # refused before any data was read or file written
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"} == before


def test_the_driver_reports_the_runs_memory(counting_task, tmp_path, capsys):
    """Every run prints and keeps its resident peak against its live tensors' peak, the
    latter measured on the steps with the largest batches (here all the same: step 1)."""
    run = train(RECIPE, run_dir=tmp_path / "run")
    model_bytes = sum(p.numel() * p.element_size() for p in CountingTask.last.built.parameters())
    figures = json.loads((run / "memory.json").read_text())
    live, resident = figures["live_tensor_peak_bytes"], figures["resident_peak_bytes"]
    assert 4 * model_bytes <= live < resident  # weights, gradients, Adam's two moments, activations
    assert figures["overhead"] == round(resident / live, 2)
    assert capsys.readouterr().out.splitlines()[-1].startswith("memory: peak resident ")
    off = train({**RECIPE, "train": {**RECIPE["train"], "measure_memory": False}}, run_dir=tmp_path / "off")
    assert json.loads((off / "memory.json").read_text())["live_tensor_peak_bytes"] is None
