"""The translation task: train, translate and evaluate an encoder-decoder Transformer on
Multi30k (seed 004, "Transformer Machine Translation"; Vaswani et al. 2017).

    attnlab train --config configs/multi30k_de_en.toml [key=value ...]
    attnlab translate RUN_DIR/final --beam 5 < in.de > out.en
    attnlab evaluate RUN_DIR/final --split test_2016_flickr

:func:`train` reads the corpus, learns BPE, trains with the :class:`~attnlab.training.Trainer`
(label-smoothed cross-entropy, Adam, noam or warmup-cosine schedule, validation loss and greedy
BLEU), averages the last checkpoints into ``RUN_DIR/final``, decodes the test split with beam
search, prints sacreBLEU / chrF with their signatures and sample translations, writes
``results.json`` and a cross-attention heatmap. Every checkpoint carries its tokenizer files and
``recipe.json`` (language pair, decoding settings), so the other commands need only the directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

import torch
from torch import nn

from attnlab.data import (
    TokenBatchSampler,
    TranslationDataset,
    load_multi30k,
    load_tokenizers,
    train_bpe,
)
from attnlab.evaluation import bleu, chrf
from attnlab.generation import beam_search, greedy_search
from attnlab.models import Transformer
from attnlab.tasks.translation_recipe import (
    RECIPE_FILE,
    TranslationRecipe,
    checkpoint_files,
    load_translator,
    make_schedule,
    parse_recipe,
)
from attnlab.training import (
    Trainer,
    average_checkpoints,
    label_smoothed_cross_entropy,
    lambda_lr,
    last_checkpoints,
    make_optimizer,
    resolve_resume,
)
from attnlab.training.distributed import get_rank

__all__ = ["evaluate_cli", "train", "translate", "translate_cli"]


# --------------------------------------------------------------------------- decoding
def translate(
    model: Transformer,
    src_tok,
    tgt_tok,
    sentences: Sequence[str],
    *,
    beam_size: int = 5,
    length_penalty: float = 0.6,
    batch_size: int = 64,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    max_len: int | None = None,
) -> list[str]:
    """Translate ``sentences`` (detokenized text in, detokenized text out, order kept).

    Sources are encoded as in training (no ``<bos>``/``<eos>``) and decoded with beam search
    (``beam_size = 1``: greedy) at most ``batch_size`` at a time, in batches of equal source
    length (so no padding). Each sentence may produce ``max_len_a · source length + max_len_b``
    subwords (``max_len`` when given): a per-sentence limit, so a translation does not depend on
    the other input lines. Blank sentences translate to ``""``.
    """
    encoded = src_tok.encode_batch([s.strip() for s in sentences])
    out = [""] * len(sentences)
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(encoded):
        if ids:
            by_length.setdefault(len(ids), []).append(i)
    device = next(model.parameters()).device
    batches = [
        group[j : j + batch_size]
        for _, group in sorted(by_length.items())
        for j in range(0, len(group), batch_size)
    ]
    for rows in batches:
        src = torch.tensor([encoded[i] for i in rows], device=device)  # (B, S)
        limit = max_len or int(max_len_a * src.shape[1] + max_len_b)
        kwargs = dict(max_new_tokens=max(limit, 1), bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id)
        if beam_size == 1:
            hyps = greedy_search(model, src, **kwargs)
        else:
            best = beam_search(model, src, beam_size=beam_size, length_penalty=length_penalty, **kwargs)
            hyps = [h[0].tokens for h in best]
        for i, tokens in zip(rows, hyps, strict=True):
            out[i] = tgt_tok.decode(tokens)
    return out


def score(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """sacreBLEU and chrF (cased, detokenized) with details and signatures."""
    b, c = bleu(hypotheses, references), chrf(hypotheses, references)
    return {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_signature": b.signature,
        "chrf_signature": c.signature,
        "bleu_details": b.details,
        "chrf_details": c.details,
    }


def print_scores(scores: dict, split: str, pair: str) -> None:
    print(f"{pair} {split}: {scores['bleu_details']} | {scores['bleu_signature']}")
    print(f"{pair} {split}: {scores['chrf_details']} | {scores['chrf_signature']}")


def translate_cli(args: argparse.Namespace) -> int:
    """``attnlab translate CHECKPOINT``: stdin lines → stdout translations, one per line."""
    model, src_tok, tgt_tok, recipe = load_translator(args.checkpoint)
    ev = recipe.get("eval", {})
    lines = sys.stdin.read().splitlines()
    outputs = translate(
        model,
        src_tok,
        tgt_tok,
        lines,
        beam_size=args.beam,
        length_penalty=args.length_penalty,
        batch_size=args.batch_size,
        max_len_a=ev.get("max_len_a", 1.5),
        max_len_b=ev.get("max_len_b", 10),
        max_len=args.max_len,
    )
    for line in outputs:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return 0


def evaluate_cli(args: argparse.Namespace) -> int:
    """``attnlab evaluate CHECKPOINT``: sacreBLEU and chrF on a Multi30k split."""
    model, src_tok, tgt_tok, recipe = load_translator(args.checkpoint)
    data = recipe.get("data", {})
    if "src_lang" not in data or "tgt_lang" not in data:
        raise ValueError(
            f"checkpoint {args.checkpoint} has no {RECIPE_FILE} naming its language pair "
            "(data.src_lang / data.tgt_lang)"
        )
    split = args.split or "test_2016_flickr"
    pairs = load_multi30k(split, data["src_lang"], data["tgt_lang"], args.data_dir)
    ev = recipe.get("eval", {})
    hyps = translate(
        model,
        src_tok,
        tgt_tok,
        [s for s, _ in pairs],
        beam_size=args.beam,
        length_penalty=args.length_penalty,
        batch_size=ev.get("batch_size", 64),
        max_len_a=ev.get("max_len_a", 1.5),
        max_len_b=ev.get("max_len_b", 10),
    )
    print_scores(score(hyps, [t for _, t in pairs]), split, f"{data['src_lang']}-{data['tgt_lang']}")
    return 0


# --------------------------------------------------------------------------- training
def _limit(pairs: list, n: int) -> list:
    return pairs[:n] if n else pairs


def _autocast(enabled: bool):
    return torch.autocast("cpu", dtype=torch.bfloat16) if enabled else nullcontext()


def _make_eval_fn(recipe, val_data, val_pairs, src_tok, tgt_tok):
    """Validation: token-level cross-entropy (no smoothing) and greedy BLEU on val pairs."""
    loader = torch.utils.data.DataLoader(
        val_data,
        batch_sampler=TokenBatchSampler(val_data.lengths, recipe.data.max_tokens, shuffle=False),
        collate_fn=val_data.collate,
    )
    ev = recipe.eval
    bleu_pairs = _limit(val_pairs, ev.val_limit)

    def eval_fn(model: Transformer) -> dict[str, float]:
        total, tokens = 0.0, 0
        with _autocast(recipe.train.bf16):
            for batch in loader:
                logits = model(batch.src, batch.tgt_in)  # (B, T, V)
                loss, n = label_smoothed_cross_entropy(
                    logits, batch.tgt_out, epsilon=0.0, ignore_index=val_data.pad_id
                )
                total, tokens = total + float(loss), tokens + int(n)
        metrics = {"val_loss": total / max(tokens, 1)}
        if ev.val_bleu:
            hyps = translate(
                model,
                src_tok,
                tgt_tok,
                [s for s, _ in bleu_pairs],
                beam_size=1,
                batch_size=ev.batch_size,
                max_len_a=ev.max_len_a,
                max_len_b=ev.max_len_b,
            )
            metrics["val_bleu"] = bleu(hyps, [t for _, t in bleu_pairs]).score
        return metrics

    return eval_fn


def _prepare_data(recipe: TranslationRecipe, data_dir, tokenizers=None):
    """Pairs, tokenizers (learned here unless ``tokenizers`` is given: resume) and datasets."""
    d = recipe.data
    print(f"loading Multi30k {d.src_lang}-{d.tgt_lang} ...", flush=True)
    train_pairs = _limit(load_multi30k("train", d.src_lang, d.tgt_lang, data_dir), d.train_limit)
    val_pairs = load_multi30k("val", d.src_lang, d.tgt_lang, data_dir)
    src_tok, tgt_tok = tokenizers or train_bpe(
        [s for s, _ in train_pairs], [t for _, t in train_pairs], d.vocab_size, joint=d.joint_vocab
    )
    print(f"BPE: vocabulary {src_tok.vocab_size} (src) / {tgt_tok.vocab_size} (tgt)", flush=True)
    train_data = TranslationDataset.from_pairs(train_pairs, src_tok, tgt_tok, max_len=d.max_len)
    val_data = TranslationDataset.from_pairs(val_pairs, src_tok, tgt_tok)
    return train_pairs, val_pairs, src_tok, tgt_tok, train_data, val_data


def train(recipe: dict, *, run_dir, resume=None, data_dir=None) -> Path:
    """Train a translator from a recipe dict; returns ``run_dir`` (see the module docstring)."""
    start = time.perf_counter()
    r = parse_recipe(recipe)
    run_dir = Path(run_dir)
    r.train = dataclasses.replace(r.train, run_dir=str(run_dir))
    tokenizers = load_tokenizers(resolve_resume(resume)) if resume else None
    train_pairs, val_pairs, src_tok, tgt_tok, train_data, val_data = _prepare_data(r, data_dir, tokenizers)
    files = checkpoint_files(run_dir, r, src_tok, tgt_tok)
    sampler = TokenBatchSampler(train_data.lengths, r.data.max_tokens, seed=r.data.seed)
    loader = torch.utils.data.DataLoader(train_data, batch_sampler=sampler, collate_fn=train_data.collate)
    torch.manual_seed(r.train.seed)
    model = Transformer(r.model_config(src_tok.vocab_size, tgt_tok.vocab_size, tgt_tok.pad_id))
    print(
        f"model: {model.num_parameters():,} parameters; {len(train_data):,} training pairs, "
        f"{len(sampler)} batches/epoch",
        flush=True,
    )
    optimizer = make_optimizer(model, r.optim.optimizer, lr=r.optim.lr, weight_decay=r.optim.weight_decay)
    scheduler = lambda_lr(optimizer, make_schedule(r, model.config.d_model))

    def loss_fn(m: nn.Module, batch) -> tuple[torch.Tensor, torch.Tensor]:
        batch = batch.to(next(m.parameters()).device)
        logits = m(batch.src, batch.tgt_in)  # (B, T, V)
        return label_smoothed_cross_entropy(
            logits, batch.tgt_out, epsilon=r.optim.label_smoothing, ignore_index=train_data.pad_id
        )

    eval_fn = _make_eval_fn(r, val_data, val_pairs, src_tok, tgt_tok)
    trainer = Trainer(
        model,
        optimizer,
        loss_fn,
        loader,
        r.train,
        scheduler=scheduler,
        eval_fn=eval_fn,
        files=files,
    )
    result = trainer.fit(resume_from=resume)
    if get_rank() != 0:  # under torchrun, rank 0 alone averages, decodes and reports
        return run_dir
    print(f"training stopped ({result.stopped}) at step {result.step}; last eval {result.last_eval}")
    final = _save_final(model, run_dir, r.eval.average_last, files)
    _report_test(model, r, src_tok, tgt_tok, run_dir, data_dir, final, start)
    return run_dir


def _save_final(model: Transformer, run_dir: Path, k: int, files: dict) -> Path:
    """Average the last ``k`` step checkpoints into ``run_dir/final`` (paper §6.1)."""
    found = last_checkpoints(run_dir, k)
    model.load_state_dict(average_checkpoints(found))
    final = model.save_pretrained(run_dir / "final", extra=files)
    print(f"final model: mean of {len(found)} checkpoint(s) -> {final}", flush=True)
    return final


def _report_test(
    model, r: TranslationRecipe, src_tok, tgt_tok, run_dir, data_dir, final, start: float
) -> None:
    """Beam-decode the test split, print scores and samples, write results.json + heatmap."""
    d, ev = r.data, r.eval
    pairs = _limit(load_multi30k(ev.test_split, d.src_lang, d.tgt_lang, data_dir), ev.test_limit)
    print(f"decoding {len(pairs)} {ev.test_split} sentences (beam {ev.beam_size}) ...", flush=True)
    model.eval()
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    hyps = translate(
        model,
        src_tok,
        tgt_tok,
        sources,
        beam_size=ev.beam_size,
        length_penalty=ev.length_penalty,
        batch_size=ev.batch_size,
        max_len_a=ev.max_len_a,
        max_len_b=ev.max_len_b,
    )
    scores = score(hyps, refs)
    print_scores(scores, ev.test_split, f"{d.src_lang}-{d.tgt_lang}")
    samples = [
        {"source": s, "reference": t, "hypothesis": h}
        for s, t, h in list(zip(sources, refs, hyps, strict=True))[: ev.sample_count]
    ]
    for sample in samples:
        print(f"  SRC {sample['source']}\n  REF {sample['reference']}\n  HYP {sample['hypothesis']}")
    index = min(ev.heatmap_index, len(pairs) - 1)
    heatmap = plot_cross_attention(
        model, src_tok, tgt_tok, sources[index], hyps[index], run_dir / "cross_attention.png"
    )
    results = {
        "split": ev.test_split,
        "src_lang": d.src_lang,
        "tgt_lang": d.tgt_lang,
        "beam_size": ev.beam_size,
        "length_penalty": ev.length_penalty,
        "sentences": len(pairs),
        **scores,
        "checkpoint": str(final),
        "heatmap": str(heatmap),
        "wall_s": round(time.perf_counter() - start, 1),  # data + BPE + training + decoding
        "samples": samples,
    }
    path = run_dir / "results.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"results: {path}\ncross-attention heatmap: {heatmap}\ncheckpoint: {final}", flush=True)
    print(f"wall time: {results['wall_s'] / 60:.1f} min (data, BPE, training, averaging, decoding)")


def plot_cross_attention(
    model: Transformer, src_tok, tgt_tok, source: str, translation: str, path: Path
) -> Path:
    """Heatmap of the last decoder layer's cross-attention, averaged over heads, while the
    model reads its own ``translation`` of ``source`` (rows: output subwords incl. ``<eos>``;
    columns: source subwords). Seed 004's encoder-decoder attention picture."""
    from attnlab.visualize import plot_attention

    src_ids = src_tok.encode(source) or [src_tok.unk_id]
    out_ids = tgt_tok.encode(translation)
    src = torch.tensor([src_ids])  # (1, S)
    tgt_in = torch.tensor([[tgt_tok.bos_id, *out_ids]])  # (1, T)
    with torch.no_grad():
        memory, src_mask = model.encode(src)  # (1, S, d), (1, S)
        _, weights = model.decode(tgt_in, memory, src_mask, return_weights=True)
    last = weights[-1][0].mean(dim=0)  # (T, S): head average of the last layer
    return plot_attention(
        last.float(),
        path,
        x_labels=src_tok.token_strings(src_ids),
        y_labels=[*tgt_tok.token_strings(out_ids), "<eos>"],
        title="cross-attention, last decoder layer (mean over heads)",
    )
