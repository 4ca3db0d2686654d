"""A translator's sentence pairs, prepared once into token files and streamed from them.

The pairs come from the files of :func:`attnlab.data.sources.pair_files` (two line-aligned
files, a TSV or JSON lines). Validation and test pairs come from their own files, or are held
out of the training pairs: each pair whose source sentence hashes below ``held_out`` goes to
validation, below ``2 × held_out`` to test — deterministic, spread over the corpus, and a
sentence repeated in the corpus always lands on the same side.

Preparing streams the training pairs three times (the ``train_limit`` first ones): once to
hold out and count, once (or twice: source side, then target side, as one joint vocabulary
is learned) to learn BPE, once to encode them in blocks — all of a block's sentences at once,
on every core — into ``src.bin`` / ``src.idx`` and ``tgt.bin`` / ``tgt.idx``
(:mod:`attnlab.data.prepared`). Held-out pairs, a small part, are kept as JSON lines there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from attnlab.data.corpora import Replaced
from attnlab.data.prepared import Rows, TokenWriter, build_once, content_key, fingerprint, token_dtype
from attnlab.data.sources import read_pairs
from attnlab.data.tokenizers import AnyTokenizer, load_tokenizers, save_tokenizers, train_bpe
from attnlab.progress import progress_bar
from attnlab.validation import counted

Pair = tuple[str, str]
BLOCK_PAIRS = 20_000  # pairs encoded at once


def held_out_side(source: str, val: float, test: float) -> str:
    """``"val"``, ``"test"`` or ``"train"`` for a pair, by the hash of its source sentence:
    ``val`` of the pairs validate, ``test`` test."""
    if val + test <= 0:
        return "train"
    u = int.from_bytes(hashlib.blake2b(source.encode(), digest_size=8).digest(), "big") / 2**64
    return "val" if u < val else "test" if u < val + test else "train"


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=8).digest()


@dataclass(frozen=True)
class PairSources:
    """Where the pairs come from; ``val`` / ``test`` empty: held out of ``train``."""

    train: tuple[Path, ...]
    src_lang: str
    tgt_lang: str
    val: tuple[Path, ...] = ()
    test: tuple[Path, ...] = ()
    held_out: float = 0.0
    train_limit: int = 0
    errors: str = "strict"
    replaced: Replaced = field(default_factory=Replaced, compare=False)

    def read(self, files: tuple[Path, ...]) -> Iterator[Pair]:
        return read_pairs(files, self.src_lang, self.tgt_lang, errors=self.errors, replaced=self.replaced)

    def side(self, source: str) -> str:
        """Where a pair of the training files goes: ``train``, or held out for ``val`` or
        ``test`` (a split with files of its own holds none out)."""
        return held_out_side(source, 0.0 if self.val else self.held_out, 0.0 if self.test else self.held_out)

    def first(self) -> Iterator[Pair]:
        """The pairs of the training files, the first ``train_limit`` (0: all)."""
        pairs = self.read(self.train)
        return islice(pairs, self.train_limit) if self.train_limit else pairs

    def training(self) -> Iterator[Pair]:
        """The training pairs: :meth:`first`, less those held out."""
        return (p for p in self.first() if self.side(p[0]) == "train")

    def named(self, split: str) -> list[Pair] | None:
        """The pairs of ``split``'s own files (``None``: held out of the training files)."""
        files = self.val if split == "val" else self.test
        return list(self.read(files)) if files else None


@dataclass
class PreparedPairs:
    """A prepared corpus: its folder, ``meta.json``, the tokenizers and the training rows."""

    folder: Path
    meta: dict[str, Any]
    sources: PairSources
    src_tok: AnyTokenizer
    tgt_tok: AnyTokenizer
    built: bool

    def rows(self, side: str) -> Rows:
        """The training pairs' ``src`` or ``tgt`` ids, memory-mapped."""
        return Rows(self.folder, side, self.meta["dtype"])

    def pairs(self, split: str) -> list[Pair]:
        """The text pairs of ``val`` or ``test`` (their own files, or those held out: refused
        when none were), or of ``train`` (read from its files)."""
        if split == "train":
            return list(self.sources.training())
        named = self.sources.named(split)
        if named is not None:
            return named
        lines = (self.folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        if not lines:
            raise ValueError(f"no {split} pairs: {self.meta['rows']:,} pairs hold none out at "
                             f"data.held_out={self.sources.held_out}; raise it or name data.{split}")
        return [(s, t) for s, t in map(json.loads, lines)]

    def notes(self) -> list[str]:
        m, how = self.meta, "prepared" if self.built else "reusing"
        held = ", ".join(f"{n:,} {split}" for split, n in m["held_out"].items() if n)
        held = f" (held out: {held})" if held else ""
        lines = [f"{how} {self.folder}: {m['rows']:,} training pairs{held}, "
                 f"{m['tokens']['src']:,} source / {m['tokens']['tgt']:,} target tokens ({m['dtype']})"]
        for split, n in m["overlap"].items():
            if n:
                pairs = f"{counted(n, 'training pair')} {'has' if n == 1 else 'have'}"
                lines.append(f"note: {pairs} the source sentence of a {split} pair")
        return lines + ([Replaced.describe(m["replaced"])] if m["replaced"] else [])


def _hold_out(sources: PairSources, out: Path) -> dict[str, Any]:
    """Write the held-out splits (when not named) and count the training pairs and those whose
    source sentence a validation or test pair shares."""
    held: dict[str, list[Pair]] = {"val": [], "test": []}
    named = {s: sources.named(s) for s in held}
    digests = {s: {_digest(p[0]) for p in named[s] or ()} for s in held}
    overlap, rows = dict.fromkeys(held, 0), 0
    for pair in sources.first():
        side = sources.side(pair[0])
        if side != "train":
            held[side].append(pair)
            continue
        rows += 1
        d = _digest(pair[0])
        for s in held:
            overlap[s] += d in digests[s]
    for split, pairs in held.items():
        lines = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs)
        (out / f"{split}.jsonl").write_text(lines, encoding="utf-8")
    return {"rows": rows, "overlap": overlap, "held_out": {s: len(p) for s, p in held.items()}}


def _encode(sources: PairSources, src_tok: AnyTokenizer, tgt_tok: AnyTokenizer, out: Path,
            total: int, progress: bool) -> dict[str, Any]:
    dtype = token_dtype(max(src_tok.vocab_size, tgt_tok.vocab_size))
    writers = {side: TokenWriter(out, side, dtype, rows=True) for side in ("src", "tgt")}
    bar = progress_bar(total, unit="pair", enabled=progress, desc="tokenizing", leave=False)
    pairs = sources.training()
    while block := list(islice(pairs, BLOCK_PAIRS)):
        writers["src"].add_rows(src_tok.encode_arrays([s for s, _ in block]))
        writers["tgt"].add_rows(tgt_tok.encode_arrays([t for _, t in block]))
        bar.update(len(block))
    bar.close()
    counts = {side: w.close() for side, w in writers.items()}
    return {"dtype": dtype.name, "tokens": {side: c["tokens"] for side, c in counts.items()}}


def prepare_pairs(
    sources: PairSources, *, vocab_size: int, joint: bool,
    tokenizers: tuple[AnyTokenizer, AnyTokenizer] | None, cache: Path, progress: bool = True,
) -> PreparedPairs:
    """The prepared training pairs of ``sources``, tokenized by ``tokenizers`` (or by BPE of
    ``vocab_size`` learned from them), from the cache or built into it."""
    files = fingerprint([*sources.train, *sources.val, *sources.test], cache)
    split = {"langs": [sources.src_lang, sources.tgt_lang], "named": [len(sources.val), len(sources.test)],
             "held_out": sources.held_out, "train_limit": sources.train_limit, "errors": sources.errors}
    learned = ({"vocab_size": vocab_size, "joint": joint} if tokenizers is None
               else {"given": [t.to_json() for t in tokenizers]})
    key = content_key("pairs", files, split, learned)

    def build(tmp: Path) -> dict[str, Any]:
        counts = _hold_out(sources, tmp)
        if counts["rows"] == 0:
            raise ValueError(f"{sources.train[0]}: no training pairs (after holding out validation and test)")
        if tokenizers is None:
            src_texts = (s for s, _ in sources.training())
            tgt_texts = (t for _, t in sources.training())
            src_tok, tgt_tok = train_bpe(src_texts, tgt_texts, vocab_size, joint=joint)
        else:
            src_tok, tgt_tok = tokenizers
        save_tokenizers(tmp, src_tok, tgt_tok)
        encoded = _encode(sources, src_tok, tgt_tok, tmp, counts["rows"], progress)
        return {"sources": files, "split": split, **counts, **encoded, "replaced": sources.replaced.lines}

    meta, built = build_once(cache / key, build)
    src_tok, tgt_tok = tokenizers or load_tokenizers(cache / key)
    return PreparedPairs(cache / key, meta, sources, src_tok, tgt_tok, built)
