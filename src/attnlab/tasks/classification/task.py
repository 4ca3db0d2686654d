"""The classification task: a GPT with a classification head tells Shakespeare lines from King
James verses (the preset), or the classes of your own labelled text (``data.corpus = PATH``,
:mod:`.corpus`) (Ba (CSC413 Lecture 8), "Transformer Language Pre-training": a language model
pre-trained on raw text, fine-tuned on a downstream classification; Radford et al. 2018, §3.2).

    attnlab train --config configs/shakespeare_vs_kjv.toml model.init_from=CKPT   # fine-tuned
    attnlab train --config configs/shakespeare_vs_kjv.toml                        # from scratch
    attnlab evaluate RUN_DIR/best

The model is :class:`~attnlab.models.GPTForSequenceClassification`. With ``[model] init_from``
its body starts from a pretrained ``"gpt"`` checkpoint and the text is read with that
checkpoint's tokenizer; without, the same architecture starts from random weights and the
text is read with the character tokenizer of tinyshakespeare (the vocabulary of
``configs/shakespeare_char.toml``'s model) for the preset, or of the training texts for your
own files. The number of classes is the data's. Either way the driver seeds the model with
``train.seed`` before building it, so both start from the same head, and the training batches
come in an order seeded by ``train.seed`` alone: two runs that differ only in ``init_from``
see the same batches. The loss is GPT-1's L3 = L2 + λ·L1 (eq. 5, λ = ``optim.lm_weight``);
validation and test score accuracy and the classification's cross-entropy. The report adds
the two baselines a result must beat: chance (the majority class) and length alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping
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
    encode_counting,
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
from attnlab.tasks.classification.corpus import fit_to_chars, overlap_note, read_labelled
from attnlab.tasks.classification.recipe import ClassificationData, ClassificationEval, ClassificationRecipe
from attnlab.training import TrainResult
from attnlab.validation import counted

Encoded = tuple[list[list[int]], Tensor]  # token ids per example, labels (N,)
SPLITS = ("train", "val", "test")


def read_examples(data: ClassificationData, chars: Collection[str] | None, data_dir: str | None,
                  raw: TextClassificationData | None = None) -> TextClassificationData:
    """The examples of ``data``: the preset's (drawn with characters outside ``chars``
    dropped), or the user's files (``raw``, when already read) fitted to ``chars``."""
    if data.is_preset:
        return load_shakespeare_vs_kjv(data, chars=chars, data_dir=data_dir, sword_dir=data.sword_dir or None)
    examples = raw or read_user_examples(data)
    if chars is not None:
        examples, note = fit_to_chars(examples, chars)
        _say(note)
    return examples


def read_user_examples(data: ClassificationData) -> TextClassificationData:
    """The three splits of the user's labelled files ``data.corpus`` (``data.val``, ``data.test``)."""
    return read_labelled(data.corpus, data.val, data.test, val_fraction=data.val_fraction,
                         test_fraction=data.test_fraction, text_name=data.text_field,
                         label_name=data.label_field)


def read_splits(
    data: ClassificationData, tokenizer: AnyTokenizer, data_dir: str | None, block_size: int,
    raw: TextClassificationData | None = None,
) -> tuple[TextClassificationData, dict[str, Encoded]]:
    """The examples of ``data`` (:func:`read_examples`, ``chars`` a character tokenizer's) and
    each split encoded as ``<bos> text <eos>``, cut to ``block_size`` (the cut ones counted in
    a note, as are validation and test texts that are training texts too)."""
    chars = tokenizer.chars if isinstance(tokenizer, CharTokenizer) else None
    examples = read_examples(data, chars, data_dir, raw)
    encoded, cut = {}, {}
    for name in SPLITS:
        ids, labels, cut[name] = encode_counting(getattr(examples, name), tokenizer, block_size)
        encoded[name] = (ids, labels)
    if any(cut.values()):
        counts = ", ".join(f"{cut[n]:,} of {len(encoded[n][0]):,} {n}" for n in SPLITS if cut[n])
        _say(f"note: texts longer than model.gpt.block_size - 2 = {block_size - 2} tokens are cut: {counts}")
    _say(overlap_note(examples))
    return examples, encoded


def _say(note: str | None) -> None:
    if note:
        print(note, flush=True)


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


def baselines(examples: TextClassificationData, test_labels: Tensor) -> dict[str, float | None]:
    """What a result must beat: ``chance``, the test share of the majority class, and the
    test accuracy of length alone (two classes only; ``None`` for more)."""
    two = len(examples.label_names) == 2
    return {
        "chance": float(torch.bincount(test_labels).max()) / len(test_labels),
        "length_baseline_test_accuracy": length_baseline(examples.train, examples.test) if two else None,
    }


def baseline_line(scores: Mapping[str, Any]) -> str:
    """The baselines in one line (the length-only one where there is one)."""
    length = scores["length_baseline_test_accuracy"]
    start = f"length-only baseline {length:.4f}, " if length is not None else ""
    return f"{start}chance {scores['chance']:.4f}"


@register_task
class ClassificationTask(Task):
    """A GPT classifier, fine-tuned or from scratch (see the module docstring)."""

    recipe_class = ClassificationRecipe
    recipe: ClassificationRecipe
    eval_splits = ("test", "val")

    def prepare(self, resume: Path | None) -> None:
        """The tokenizer (the resumed run's, else ``init_from``'s, else the characters of
        tinyshakespeare for the preset or of the training texts for your own files), the
        examples and their encoded splits."""
        data = self.recipe.data
        raw = None if data.is_preset else read_user_examples(data)
        source = resolve_resume(resume) if resume is not None else self.recipe.model.init_from
        if source is not None:
            self.tokenizer = load_tokenizer(source)
        elif raw is None:
            self.tokenizer = CharTokenizer.train(load_tinyshakespeare(self.data_dir))
        else:
            self.tokenizer = CharTokenizer.train("".join(text for text, _ in raw.train))
        self.tokenizer_file = self.run_file(TOKENIZER_FILE, self.tokenizer.to_json())
        block_size = self.recipe.model.settings["gpt"]["block_size"]
        self.examples, self.splits = read_splits(data, self.tokenizer, self.data_dir, block_size, raw)
        print(f"data: {self.examples.describe()}", flush=True)
        if len(self.examples.train) < data.batch_size:
            raise ValueError(f"data.corpus holds {counted(len(self.examples.train), 'training example')}, "
                             f"fewer than one batch (data.batch_size = {data.batch_size})")
        self.baselines = baselines(self.examples, self.splits["test"][1])

    def build_model(self) -> nn.Module:
        """The recipe's classifier (as many classes as the training labels); with ``init_from``,
        its body loaded from that checkpoint."""
        table = self.recipe.model
        # The body's vocabulary is the tokenizer's (init_from's config.json holds it already).
        decided = {"gpt.vocab_size": self.tokenizer.vocab_size, "num_classes": len(self.examples.label_names)}
        model = table.build_model(**{name: decided[name] for name in table.pending})
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
            "label_names": list(self.examples.label_names), "corpus": self.recipe.data.corpus,
            **self.baselines,
            "checkpoint": str(result.last_checkpoint),
        }
        write_atomic(self.run_dir / "results.json", json.dumps(results, indent=2) + "\n")
        print(f"{self.format_scores({'split': 'test', 'examples': results['sizes']['test'], **test})}; "
              f"{counted(result.step, 'step')} in {result.seconds:.1f} s ({result.stopped})\n"
              f"{baseline_line(self.baselines)}\ncheckpoint: {result.last_checkpoint}", flush=True)
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
        examples, splits = read_splits(data, load_tokenizer(checkpoint), request.data_dir, block_size)
        names = examples.label_names
        if len(names) != model.config.num_classes:
            raise ValueError(f"{checkpoint} classifies {model.config.num_classes} classes but its recipe's "
                             f"data now holds {len(names)} ({', '.join(names)}): the files changed")
        scores = split_scores(model, splits[split], batch_size)
        return {"split": split, "examples": len(splits[split][0]), **scores, "label_names": list(names)}

    @classmethod
    def format_scores(cls, scores: Mapping[str, Any]) -> str:
        return (f"{scores['split']}: accuracy {scores['accuracy']:.4f} of {scores['examples']:,} examples, "
                f"classification loss {scores['loss']:.4f}")
