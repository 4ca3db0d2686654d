"""A trained translator and a trained GPT, exported with ``attnlab export`` and run by
``transformers``: do they say the same as attnlab?

    .venv/bin/python benchmarks/hf_export.py --translator runs/demo/final --gpt runs/shakespeare_char/best

(a) The translator's folder loaded by ``AutoModelForSeq2SeqLM`` and ``AutoTokenizer``; the first
``--sentences`` German sentences of Multi30k's test_2016_flickr translated greedily by
``generate`` (one sentence at a time, each limited to the recipe's ``max_len_a · S + max_len_b``
new tokens, as attnlab's) and by ``TranslationPipeline.translate`` with beam 1: how many of
the translations are the same text, and sacreBLEU of each against the English references.

(b) The GPT's folder loaded by ``AutoModelForCausalLM``: the greedy continuation of each of three
prompts (``generate`` with the special tokens suppressed, as attnlab's pipeline keeps them out)
against ``LanguageModelPipeline.generate`` at temperature 0, within the context window.

Exits non-zero if a folder does not load. One torch thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import tempfile
from pathlib import Path

import sacrebleu
import torch
import transformers

from attnlab.cli import main as attnlab
from attnlab.data.corpora import data_dir
from attnlab.data.tokenizers import SPECIAL_TOKENS
from attnlab.measure import machine as _machine
from attnlab.pipelines import LanguageModelPipeline, TranslationPipeline

PROMPTS = ["ROMEO:", "First Citizen:\nWe are", "KING HENRY"]


def first_lines(name: str, n: int) -> list[str]:
    with gzip.open(data_dir() / "multi30k" / name, "rt", encoding="utf-8") as f:
        return [next(f).strip() for _ in range(n)]


def translator(checkpoint: str, out: Path, n: int) -> None:
    assert attnlab(["export", checkpoint, str(out)]) == 0
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    print(f"loaded by transformers: {type(model).__name__}, {type(tokenizer).__name__}")
    ours = TranslationPipeline.from_checkpoint(checkpoint)
    decoding = dataclasses.replace(ours.decoding, beam_size=1)
    sources, refs = first_lines("test_2016_flickr.de.gz", n), first_lines("test_2016_flickr.en.gz", n)
    theirs = []
    with torch.inference_mode():
        for sentence in sources:
            ids = tokenizer(sentence, return_tensors="pt")["input_ids"]
            new = model.generate(ids, max_new_tokens=decoding.limit(ids.shape[1]))
            theirs.append(tokenizer.decode(new[0], skip_special_tokens=True))
    mine = ours.translate(sources, decoding)
    same = sum(a == b for a, b in zip(theirs, mine, strict=True))
    print(f"greedy translations equal: {same}/{n}")
    for who, hyps in (("attnlab", mine), ("transformers", theirs)):
        print(f"  {who:13s} sacreBLEU {sacrebleu.corpus_bleu(hyps, [refs]).score:.2f}")
    for a, b in zip(theirs, mine, strict=True):
        if a != b:
            print(f"  first difference: transformers {a!r} / attnlab {b!r}")
            break


def gpt(checkpoint: str, out: Path) -> None:
    assert attnlab(["export", checkpoint, str(out)]) == 0
    model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    print(f"loaded by transformers: {type(model).__name__}, {type(tokenizer).__name__}")
    ours = LanguageModelPipeline.from_checkpoint(checkpoint)
    window = ours.model.config.block_size
    same = 0
    for prompt in PROMPTS:
        ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        new = window - ids.shape[1]
        with torch.inference_mode():
            out_ids = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                     do_sample=False, suppress_tokens=list(range(len(SPECIAL_TOKENS))),
                                     pad_token_id=0)
        text = tokenizer.decode(out_ids[0, ids.shape[1]:], skip_special_tokens=True)
        same += text == ours.generate(prompt, new, temperature=0.0)
        print(f"  {prompt!r} + {new} tokens: {text[:60]!r}...")
    print(f"greedy continuations equal: {same}/{len(PROMPTS)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--translator", help="a translator checkpoint (runs/demo/final)")
    p.add_argument("--gpt", help="a GPT checkpoint (runs/shakespeare_char/best)")
    p.add_argument("--sentences", type=int, default=100)
    args = p.parse_args()
    torch.set_num_threads(1)
    print(_machine.header() + "\n", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.translator:
            translator(args.translator, Path(tmp) / "translator", args.sentences)
        if args.gpt:
            gpt(args.gpt, Path(tmp) / "gpt")


if __name__ == "__main__":
    main()
