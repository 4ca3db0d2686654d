"""The "Attention Is All You Need" results table beside attnlab's own translators
(Steinert-Threlkeld (Transformers I), "Initial WMT Results": Vaswani et al. 2017, Table 2).

The slide's rows are printed as the slide prints them. Each trained attnlab translator adds
its test sacreBLEU (its ``results.json``) and its training cost in FLOPs, counted rather than
estimated: :func:`attnlab.analysis.training_flops` per target token, averaged over the run's
own training pairs (its tokenizer, its ``max_len`` filter; padding not counted), times the
target tokens the trainer saw (``tokens_seen`` in the newest ``trainer.pt``). Vaswani et al.
estimated theirs as training time × GPUs × each GPU's sustained rate.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from attnlab.analysis import training_flops
from attnlab.checkpoint import TRAINER_NAME, latest_checkpoint, run_dir_of
from attnlab.labs.checkpoints import RUN_CHECKPOINTS, DefaultRun, find_checkpoints
from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions
from attnlab.models import TransformerConfig
from attnlab.parsing import read_json

DEFAULT_RUNS = tuple(
    DefaultRun(f"runs/{name}", f"attnlab train --config configs/{name}.toml --run-dir runs/{name}")
    for name in ("multi30k_de_en", "multi30k_en_de")
) + (DefaultRun("runs/demo", "make demo"),)

WMT_HEADERS = ["Model", "BLEU EN-DE", "BLEU EN-FR", "Training Cost (FLOPs) EN-DE",
               "Training Cost (FLOPs) EN-FR"]
WMT_TABLE = [  # Steinert-Threlkeld (Transformers I), "Initial WMT Results", as printed
    ["ByteNet [15]", "23.75", "", "", ""],
    ["Deep-Att + PosUnk [32]", "", "39.2", "", "1.0 · 10^20"],
    ["GNMT + RL [31]", "24.6", "39.92", "2.3 · 10^19", "1.4 · 10^20"],
    ["ConvS2S [8]", "25.16", "40.46", "9.6 · 10^18", "1.5 · 10^20"],
    ["MoE [26]", "26.03", "40.56", "2.0 · 10^19", "1.2 · 10^20"],
    ["Deep-Att + PosUnk Ensemble [32]", "", "40.4", "", "8.0 · 10^20"],
    ["GNMT + RL Ensemble [31]", "26.30", "41.16", "1.8 · 10^20", "1.1 · 10^21"],
    ["ConvS2S Ensemble [8]", "26.36", "**41.29**", "7.7 · 10^19", "1.2 · 10^21"],
    ["Transformer (base model)", "27.3", "38.1", "**3.3 · 10^18**", ""],
    ["Transformer (big)", "**28.4**", "**41.0**", "2.3 · 10^19", ""],
]
TRANSFORMER_BASE_FLOPS = 3.3e18  # the slide's Transformer (base model), EN-DE


@dataclass(frozen=True)
class TranslatorCost:
    """One trained attnlab translator: its test score and its counted training cost."""

    run_dir: Path
    pair: str  # "de-en"
    split: str
    bleu: float
    steps: int
    tokens_seen: int  # target tokens the trainer saw
    flops_per_token: float  # training FLOPs per target token
    parameters: int

    @property
    def training_flops(self) -> float:
        return self.flops_per_token * self.tokens_seen


def translator_costs(
    options: LabOptions, pairs_limit: int | None = None
) -> tuple[list[TranslatorCost], list[str]]:
    """The translators ``options.checkpoint`` names (else every default run here) with their
    costs, and a note for each one that could not be counted (or for none found).
    ``pairs_limit``: lengths from the first training pairs only (the lab's quick setting)."""
    try:
        checkpoints = find_checkpoints("complexity", options, DEFAULT_RUNS, ("transformer",), every=True)
    except LabUnavailable as why:
        return [], [str(why)]
    costs, notes = [], []
    for checkpoint in checkpoints:
        try:
            costs.append(translator_cost(checkpoint, options.data_dir, pairs_limit))
        except (FileNotFoundError, ValueError, KeyError) as why:
            notes.append(f"{checkpoint}: not counted ({why})")
    return costs, notes


def run_of(checkpoint: Path) -> Path:
    """The run directory of ``final/``, ``best/`` or ``checkpoints/step_*``."""
    return checkpoint.parent if checkpoint.name in RUN_CHECKPOINTS else run_dir_of(checkpoint)


def translator_cost(
    checkpoint: Path, data_dir: str | None = None, pairs_limit: int | None = None
) -> TranslatorCost:
    """BLEU from the run's ``results.json``; training FLOPs counted (module docstring)."""
    from attnlab.pipelines import TranslationPipeline
    from attnlab.training.state import load_trainer_state

    run_dir = run_of(checkpoint)
    results = read_json(run_dir / "results.json", "results")
    trainer = checkpoint if (checkpoint / TRAINER_NAME).is_file() else latest_checkpoint(run_dir)
    if trainer is None:
        raise FileNotFoundError(f"no {TRAINER_NAME} in {checkpoint} or {run_dir}/checkpoints (tokens seen)")
    state = load_trainer_state(trainer / TRAINER_NAME)["state"]
    pipeline = TranslationPipeline.from_checkpoint(checkpoint)
    if "data" not in pipeline.recipe:
        raise ValueError(f"checkpoint {checkpoint} has no recipe.json naming its training data")
    model, tokenizers = pipeline.model, (pipeline.src_tok, pipeline.tgt_tok)
    lengths = training_lengths(pipeline.recipe["data"], *tokenizers, data_dir, pairs_limit)
    return TranslatorCost(
        run_dir=run_dir, pair=f"{results['src_lang']}-{results['tgt_lang']}", split=results["split"],
        bleu=float(results["bleu"]), steps=state.step, tokens_seen=state.tokens_seen,
        flops_per_token=flops_per_target_token(model.config, lengths),
        parameters=model.num_parameters(),
    )


def training_lengths(
    data: dict, src_tok, tgt_tok, data_dir: str | None, pairs_limit: int | None = None,
) -> Counter[tuple[int, int]]:
    """How many training pairs have each ``(S, T)``: source subwords, target subwords + 1 (the
    decoder reads ``<bos>`` + target and predicts target + ``<eos>``), as the run trained on
    (the first ``pairs_limit`` of them when given)."""
    from attnlab.data.batching import TranslationDataset
    from attnlab.data.multi30k import load_multi30k

    pairs = load_multi30k("train", data["src_lang"], data["tgt_lang"], data_dir)
    if data.get("train_limit"):
        pairs = pairs[: data["train_limit"]]
    pairs = pairs[:pairs_limit]
    dataset = TranslationDataset.from_pairs(pairs, src_tok, tgt_tok, max_len=data.get("max_len"))
    return Counter((len(s), len(t) + 1) for s, t in zip(dataset.src, dataset.tgt, strict=True))


def flops_per_target_token(config: TransformerConfig, lengths: Counter[tuple[int, int]]) -> float:
    """Training FLOPs (forward + backward) of every pair once, per target token."""
    if not isinstance(config, TransformerConfig):
        raise ValueError(
            f"training FLOPs are counted for Transformer translators, got {type(config).__name__}"
        )
    total = sum(count * training_flops(config, (s, t)) for (s, t), count in lengths.items())
    return total / sum(count * t for (_, t), count in lengths.items())
