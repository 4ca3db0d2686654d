"""Models trained by attnlab's own recipes, exported with ``attnlab export`` and run by
``transformers``: the demo translator (configs/multi30k_demo.toml, tiny and short) translates
Multi30k test sentences as ``TranslationPipeline.translate`` does with beam 1, and the
Shakespeare GPTs (configs/shakespeare_char.toml and shakespeare_bpe.toml, tiny and short)
continue prompts as ``LanguageModelPipeline.generate`` does at temperature 0, text for text.
Slow: three training runs through ``attnlab train``."""

from __future__ import annotations

import dataclasses
import gzip
import os
from pathlib import Path

import pytest
import torch

from attnlab.cli import main
from attnlab.data.corpora import data_dir
from attnlab.data.tokenizers import SPECIAL_TOKENS
from attnlab.pipelines import LanguageModelPipeline, TranslationPipeline
from trained_toys import ROOT, train_translator

transformers = pytest.importorskip("transformers", reason="transformers: the test extras (make test)")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (Path(os.environ.get("ATTNLAB_DATA", "/nonexistent")) / "multi30k").is_dir(),
    reason="needs $ATTNLAB_DATA/multi30k and tinyshakespeare (the shared corpora)")]

GPT_TINY = ["model.num_layers=2", "model.d_model=48", "model.num_heads=4", "data.block_size=48",
            "train.max_steps=40", "optim.warmup=5", "train.eval_every=20", "eval.eval_iters=2",
            "train.progress=false", "train.log_every=10", "train.save_every=0", "train.keep_last_k=0"]
PROMPTS = ["ROMEO:", "First Citizen:\nWe are", "KING HENRY"]


def export(checkpoint: Path, out: Path) -> Path:
    assert main(["export", str(checkpoint), str(out)]) == 0
    return out


def test_the_demo_translator_translates_the_same_in_transformers(tmp_path):
    checkpoint = train_translator(tmp_path / "run", "train.max_steps=40") / "final"
    ours = TranslationPipeline.from_checkpoint(checkpoint)
    decoding = dataclasses.replace(ours.decoding, beam_size=1)
    folder = export(checkpoint, tmp_path / "hf")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    with gzip.open(data_dir() / "multi30k" / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as f:
        sentences = [next(f).strip() for _ in range(12)]
    theirs = []
    for sentence in sentences:  # one at a time: each output limited by its own source length, as attnlab's
        ids = tokenizer(sentence, return_tensors="pt")["input_ids"]
        out = model.generate(ids, max_new_tokens=decoding.limit(ids.shape[1]))
        theirs.append(tokenizer.decode(out[0], skip_special_tokens=True))
    assert theirs == ours.translate(sentences, decoding)
    assert len(set(theirs)) > 1  # the outputs depend on the source


@pytest.mark.parametrize("recipe", ["shakespeare_char", "shakespeare_bpe"])
def test_a_shakespeare_gpt_continues_the_same_in_transformers(tmp_path, recipe):
    args = ["train", "--config", str(ROOT / "configs" / f"{recipe}.toml"), "--run-dir", str(tmp_path / "run")]
    assert main([*args, *GPT_TINY]) == 0
    checkpoint = tmp_path / "run" / "best"
    ours = LanguageModelPipeline.from_checkpoint(checkpoint)
    folder = export(checkpoint, tmp_path / "hf")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    specials = list(range(len(SPECIAL_TOKENS)))  # attnlab's pipeline never draws them
    continuations = set()
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        assert ids[0].tolist() == ours.prompt_ids(prompt)
        new = 48 - ids.shape[1]  # within the context window: GPT-2 has no sliding window
        out = model.generate(ids, max_new_tokens=new, do_sample=False, suppress_tokens=specials,
                             attention_mask=torch.ones_like(ids), pad_token_id=0)
        text = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        assert text == ours.generate(prompt, new, temperature=0.0)
        continuations.add(text)
    assert len(continuations) > 1  # they depend on the prompt
