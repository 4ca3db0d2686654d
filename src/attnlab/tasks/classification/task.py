"""The classification task: a GPT with a classification head tells Shakespeare lines from King
James verses (Ba (CSC413 Lecture 8), "Transformer Language Pre-training": a language model
pre-trained on raw text, fine-tuned on a downstream classification; Radford et al. 2018, §3.2).

    attnlab train --config configs/shakespeare_vs_kjv.toml model.init_from=CKPT   # fine-tuned
    attnlab train --config configs/shakespeare_vs_kjv.toml                        # from scratch
    attnlab evaluate RUN_DIR/best

The model is :class:`~attnlab.models.GPTForSequenceClassification`. With ``[model] init_from``
its body starts from a pretrained ``"gpt"`` checkpoint and the text is read with that
checkpoint's tokenizer; without, the same architecture starts from random weights and the
text is read with the character tokenizer of tinyshakespeare (the vocabulary of
``configs/shakespeare_char.toml``'s model). Either way the driver seeds the model with
``train.seed`` before building it, so both start from the same head, and the training batches
come in an order seeded by ``train.seed`` alone: two runs that differ only in ``init_from``
see the same batches. The loss is GPT-1's L3 = L2 + λ·L1 (eq. 5, λ = ``optim.lm_weight``);
validation and test score accuracy and the classification's cross-entropy. The report adds
the two baselines a result must beat: chance (the majority class) and length alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.atomic import write_atomic
from attnlab.checkpoint import ExtraFiles, resolve_resume, saved_recipe_or_empty
from attnlab.config import from_dict
from attnlab.data import load_tinyshakespeare
from attnlab.data.classification import (
    TextClassificationData,
    encode_examples,
    length_baseline,
    load_shakespeare_vs_kjv,
    pad_batch,
)
from attnlab.data.tokenizers import (
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    AnyTokenizer,
    CharTokenizer,
    load_tokenizer,
)
from attnlab.devices import model_device, to_device
from attnlab.models import GPT, GPTForSequenceClassification
from attnlab.tasks.base import EvaluateRequest, Task, register_task
from attnlab.tasks.classification.recipe import ClassificationData, ClassificationEval, ClassificationRecipe
from attnlab.training import TrainResult
from attnlab.validation import counted

Encoded = tuple[list[list[int]], Tensor]  # token ids per example, labels (N,)
SPLITS = ("train", "val", "test")


def read_splits(
    data: ClassificationData, tokenizer: AnyTokenizer, data_dir: str | None, block_size: int
) -> tuple[TextClassificationData, dict[str, Encoded]]:
    """The examples of ``data`` (characters outside a character tokenizer's dropped) and each
    split encoded as ``<bos> text <eos>``, cut to ``block_size``."""
    chars = tokenizer.chars if isinstance(tokenizer, CharTokenizer) else None
    examples = load_shakespeare_vs_kjv(data, chars=chars, data_dir=data_dir, sword_dir=data.sword_dir or None)
    encoded = {name: encode_examples(getattr(examples, name), tokenizer, block_size) for name in SPLITS}
    return examples, encoded


def batch_stream(
    ids: list[list[int]], labels: Tensor, batch_size: int, seed: int
) -> Callable[[int], Iterator[tuple[Tensor, Tensor, Tensor]]]:
    """``stream(epoch)`` → batches ``(idx (B, n), lengths (B,), labels (B,))`` in a shuffled order
    that depends only on ``seed`` and ``epoch``; full batches only."""
    def stream(epoch: int) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        order = torch.randperm(len(ids), generator=g).tolist()
        for start in range(0, len(order) - batch_size + 1, batch_size):
            rows = order[start:start + batch_size]
            idx, lengths = pad_batch([ids[r] for r in rows])
            yield idx, lengths, labels[rows]
    return stream


@torch.no_grad()
def split_scores(model: GPTForSequenceClassification, data: Encoded, batch_size: int = 256
                 ) -> dict[str, float]:
    """``{"accuracy", "loss"}`` of ``model`` on ``data``: the fraction classified correctly and
    the mean cross-entropy of the classification (eq. 4, no language-model term); the model is
    put in eval mode."""
    ids, labels = data
    model.eval()
    device, correct, loss = model_device(model), 0, 0.0
    for start in range(0, len(ids), batch_size):
        idx, lengths = to_device(pad_batch(ids[start:start + batch_size]), device)
        logits = model(idx, lengths).float().cpu()  # (B, C)
        rows = labels[start:start + batch_size]
        correct += int((logits.argmax(dim=-1) == rows).sum())
        loss += float(F.cross_entropy(logits, rows, reduction="sum"))
    return {"accuracy": correct / len(ids), "loss": loss / len(ids)}


def accuracy(model: GPTForSequenceClassification, data: Encoded, batch_size: int = 256) -> float:
    """The fraction of ``data`` that ``model`` classifies correctly (:func:`split_scores`)."""
    return split_scores(model, data, batch_size)["accuracy"]


@register_task
class ClassificationTask(Task):
    """A GPT classifier, fine-tuned or from scratch (see the module docstring)."""

    recipe_class = ClassificationRecipe
    recipe: ClassificationRecipe
    eval_splits = ("test", "val")

    def prepare(self, resume: Path | None) -> None:
        """The tokenizer (the resumed run's, else ``init_from``'s, else tinyshakespeare's
        characters), the examples and their encoded splits."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        source = resolve_resume(resume) if resume is not None else self.recipe.model.init_from
        if source is not None:
            self.tokenizer = load_tokenizer(source)
        else:
            self.tokenizer = CharTokenizer.train(load_tinyshakespeare(self.data_dir))
        self.tokenizer_file = self.tokenizer.save(self.run_dir)
        block_size = self.recipe.model.settings["gpt"]["block_size"]
        examples, self.splits = read_splits(self.recipe.data, self.tokenizer, self.data_dir, block_size)
        print(f"data: {examples.describe()}", flush=True)
        test_labels = self.splits["test"][1]
        self.baselines = {
            "chance": float(torch.bincount(test_labels).max()) / len(test_labels),  # the majority class
            "length_baseline_test_accuracy": length_baseline(examples.train, examples.test),
        }

    def build_model(self) -> nn.Module:
        """The recipe's classifier; with ``init_from``, its body loaded from that checkpoint."""
        table = self.recipe.model
        # The body's vocabulary is the tokenizer's (init_from's config.json holds it already).
        model = table.build_model(**{name: self.tokenizer.vocab_size for name in table.pending})
        if table.init_from is not None:
            tokens, vocabulary = self.tokenizer.vocab_size, model.config.gpt.vocab_size
            if tokens != vocabulary:
                raise ValueError(f"[model] init_from {table.init_from}: its tokenizer has {tokens} "
                                 f"tokens but its model {vocabulary}")
            model.gpt.load_state_dict(GPT.from_pretrained(table.init_from).state_dict())
        return model

    def describe(self, model: nn.Module) -> str:
        start = f"body from {self.recipe.model.init_from}" if self.recipe.model.init_from else "from scratch"
        sizes = " / ".join(f"{len(self.splits[name][0]):,} {name}" for name in SPLITS)
        return f"{model.model_type}: {model.num_parameters():,} parameters, {start}; {sizes} examples"

    def train_data(self) -> Callable[[int], Iterator]:
        ids, labels = self.splits["train"]
        return batch_stream(ids, labels, self.recipe.data.batch_size, self.recipe.train.seed)

    def checkpoint_files(self) -> ExtraFiles:
        return {**super().checkpoint_files(), TOKENIZER_FILE: self.tokenizer_file}

    def loss(self, model: nn.Module, batch: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, int]:
        """GPT-1's L3 (eq. 5) summed over the batch's examples, and their count."""
        idx, lengths, labels = batch
        loss, _ = model.loss(idx, labels, lengths, lm_weight=self.recipe.optim.lm_weight,
                             special_ids=len(SPECIAL_TOKENS))
        return loss * len(labels), len(labels)

    def validate(self, model: nn.Module) -> dict[str, float]:
        scores = split_scores(model, self.splits["val"], self.recipe.eval.batch_size)
        return {"val_accuracy": scores["accuracy"], "val_loss": scores["loss"]}

    def report(self, model: nn.Module, result: TrainResult) -> dict[str, Any]:
        """Score the test split, print it beside the baselines, write ``results.json``."""
        test = split_scores(model, self.splits["test"], self.recipe.eval.batch_size)
        losses = [h["loss"] for h in result.history[-20:]]
        results = {
            "init_from": self.recipe.model.init_from,
            "test_accuracy": test["accuracy"], "test_loss": test["loss"],
            "val_accuracy": result.last_eval.get("val_accuracy"),
            f"best_{self.recipe.train.metric}": result.best_metric,
            "train_loss": sum(losses) / len(losses) if losses else None,  # L3, the last 20 steps
            "steps": result.step, "seconds": result.seconds, "stopped": result.stopped,
            "parameters": model.num_parameters(),
            "sizes": {name: len(self.splits[name][0]) for name in SPLITS},
            **self.baselines,
            "checkpoint": str(result.last_checkpoint),
        }
        write_atomic(self.run_dir / "results.json", json.dumps(results, indent=2) + "\n")
        print(f"{self.format_scores({'split': 'test', 'examples': results['sizes']['test'], **test})}; "
              f"{counted(result.step, 'step')} in {result.seconds:.1f} s ({result.stopped})\n"
              f"length-only baseline {self.baselines['length_baseline_test_accuracy']:.4f}, "
              f"chance {self.baselines['chance']:.4f}\ncheckpoint: {result.last_checkpoint}", flush=True)
        return results

    @classmethod
    def evaluate(cls, checkpoint: Path, request: EvaluateRequest) -> dict[str, Any]:
        """Accuracy and loss of ``checkpoint`` on a split of the data its recipe names."""
        split = cls.eval_split(request)
        recipe = saved_recipe_or_empty(checkpoint)
        data = from_dict(ClassificationData, recipe.get("data", {}), where="[data]")
        batch_size = from_dict(ClassificationEval, recipe.get("eval", {}), where="[eval]").batch_size
        model = GPTForSequenceClassification.from_pretrained(checkpoint, device=request.device)
        block_size = model.config.gpt.block_size
        _, splits = read_splits(data, load_tokenizer(checkpoint), request.data_dir, block_size)
        scores = split_scores(model, splits[split], batch_size)
        return {"split": split, "examples": len(splits[split][0]), **scores}

    @classmethod
    def format_scores(cls, scores: Mapping[str, Any]) -> str:
        return (f"{scores['split']}: accuracy {scores['accuracy']:.4f} of {scores['examples']:,} examples, "
                f"classification loss {scores['loss']:.4f}")
