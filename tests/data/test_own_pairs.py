"""A translator's own sentence pairs: two line-aligned files, a TSV, Hugging Face's JSON lines;
held-out splits; prepared into memory-mapped rows; every bad input one line naming the file."""

import gzip
import json

import numpy as np
import pytest

from attnlab.data import TokenBatchSampler, TranslationDataset, load_multi30k, train_bpe
from attnlab.data.pair_corpus import PairSources, held_out_side, prepare_pairs
from attnlab.data.sources import pair_files, read_pairs

PAIRS = [("ein Hund", "a dog"), ("eine Katze", "a cat"), ("zwei Hunde", "two dogs"), ("ein Haus", "a house")]


def _write_formats(d):
    (d / "c.de").write_text("".join(s + "\n" for s, _ in PAIRS))
    (d / "c.en.gz").write_bytes(gzip.compress("".join(t + "\n" for _, t in PAIRS).encode()))
    (d / "c.tsv").write_text("".join(f"{s}\t{t}\r\n" for s, t in PAIRS))
    records = (json.dumps({"translation": {"de": s, "en": t}}) for s, t in PAIRS)
    (d / "c.jsonl").write_text("".join(r + "\n" for r in records))
    (d / "flat.jsonl").write_text("".join(json.dumps({"de": s, "en": t}) + "\n" for s, t in PAIRS))


@pytest.mark.parametrize("spec", ["c", "c.tsv", "c.jsonl", "flat.jsonl", ["c.de", "c.en.gz"]])
def test_every_format_reads_the_same_pairs(tmp_path, spec):
    _write_formats(tmp_path)
    named = str(tmp_path / spec) if isinstance(spec, str) else [str(tmp_path / s) for s in spec]
    files = pair_files(named, "de", "en", "data.corpus")
    assert list(read_pairs(files, "de", "en")) == PAIRS


@pytest.mark.parametrize("write, problem", [
    (lambda d: ((d / "p.de").write_text("a\nb\nc\n"), (d / "p.en").write_text("a\nb\n")),
     r"p\.de and .*p\.en differ in length: line 3 of .*p\.de has no counterpart in .*p\.en"),
    (lambda d: ((d / "p.de").write_text("a\n\nc\n"), (d / "p.en").write_text("a\nb\nc\n")),
     r"p\.de:2 / .*p\.en:2: the source side is empty, the other is not"),
    (lambda d: ((d / "p.de").write_text(""), (d / "p.en").write_text("a\n")), r"p\.de is empty"),
    (lambda d: ((d / "p.de").write_bytes(b"gut\nsch\xf6n\n"), (d / "p.en").write_text("good\nfine\n")),
     r"p\.de:2: not valid UTF-8 .*byte 3 of the line, byte 7 of the file"),
])
def test_broken_parallel_files_are_named_with_the_line(tmp_path, write, problem):
    write(tmp_path)
    with pytest.raises(ValueError, match=problem):
        list(read_pairs(pair_files(str(tmp_path / "p"), "de", "en", "data.corpus"), "de", "en"))


def test_bad_tsv_and_jsonl_lines_are_named(tmp_path):
    (tmp_path / "p.tsv").write_text("a\tb\nonly one field\n")
    with pytest.raises(ValueError, match=r"p\.tsv:2: expected source<TAB>target \(exactly one tab\)"):
        list(read_pairs([tmp_path / "p.tsv"], "de", "en"))
    (tmp_path / "p.jsonl").write_text('{"translation": {"de": "a", "en": "b"}}\n'
                                      '{"translation": {"de": "c"}}\n')
    with pytest.raises(ValueError, match=r"p\.jsonl:2: no field 'translation\.en'"):
        list(read_pairs([tmp_path / "p.jsonl"], "de", "en"))


def test_a_missing_side_of_a_prefix_says_what_was_looked_for(tmp_path):
    (tmp_path / "c.de").write_text("a\n")
    with pytest.raises(FileNotFoundError, match=r"data.corpus: neither .*c\.en nor .*c\.en\.gz exists"):
        pair_files(str(tmp_path / "c"), "de", "en", "data.corpus")


def test_held_out_pairs_are_chosen_by_the_source_sentence_and_disjoint(tmp_path):
    sides = [held_out_side(f"sentence {i}", 0.1, 0.1) for i in range(5000)]
    assert 400 < sides.count("val") < 600 and 400 < sides.count("test") < 600
    assert held_out_side("x", 0.0, 0.0) == "train"
    lines = [f"Satz {i % 1500}" for i in range(3000)]  # every sentence twice
    (tmp_path / "c.de").write_text("".join(s + "\n" for s in lines))
    (tmp_path / "c.en").write_text("".join(s.replace("Satz", "sentence") + "\n" for s in lines))
    sources = PairSources((tmp_path / "c.de", tmp_path / "c.en"), "de", "en", held_out=0.05)
    corpus = prepare_pairs(sources, vocab_size=300, joint=True, tokenizers=None, cache=tmp_path / "cache",
                           progress=False)
    val, test, train = (corpus.pairs(s) for s in ("val", "test", "train"))
    assert len(val) + len(test) + len(train) == 3000 and len(corpus.rows("src")) == len(train)
    assert not {s for s, _ in val} & {s for s, _ in train}  # a repeated sentence stays on one side
    assert corpus.meta["overlap"] == {"val": 0, "test": 0}


def test_named_validation_pairs_found_in_training_are_counted(tmp_path):
    (tmp_path / "train.tsv").write_text("a b\tx\nc d\ty\n")
    (tmp_path / "val.tsv").write_text("a b\tx\n")
    sources = PairSources((tmp_path / "train.tsv",), "de", "en", val=(tmp_path / "val.tsv",),
                          test=(tmp_path / "val.tsv",))
    corpus = prepare_pairs(sources, vocab_size=300, joint=True, tokenizers=None, cache=tmp_path / "cache",
                           progress=False)
    assert corpus.meta["overlap"] == {"val": 1, "test": 1}
    assert "note: 1 training pair has the source sentence of a val pair" in corpus.notes()


def test_the_multi30k_preset_and_its_files_read_as_your_own_give_the_same_batches(tmp_path):
    """The preset (as the translation recipe names it) against the generic path on the same
    files: the same BPE, the same rows, the same token-budget batches."""
    from attnlab.data.presets import pair_preset

    n = 3000
    old = load_multi30k("train", "de", "en")[:n]
    src_tok, tgt_tok = train_bpe([s for s, _ in old], [t for _, t in old], 1000)
    before = TranslationDataset.from_pairs(old, src_tok, tgt_tok, max_len=40)
    files = tuple(pair_preset("multi30k", "train", "de", "en"))
    sources = PairSources(files, "de", "en", val=files, train_limit=n)
    corpus = prepare_pairs(sources, vocab_size=1000, joint=True, tokenizers=None, cache=tmp_path,
                           progress=False)
    assert corpus.src_tok.to_json() == src_tok.to_json()
    after = TranslationDataset.from_rows(corpus.rows("src"), corpus.rows("tgt"), corpus.tgt_tok, max_len=40)
    assert len(after) == len(before) and after.too_long == n - len(before)
    assert all(list(after[i][0]) == list(before[i][0]) and list(after[i][1]) == list(before[i][1])
               for i in range(0, len(after), 7))
    batches = [list(TokenBatchSampler(d.lengths, 2000, seed=3)) for d in (before, after)]
    assert batches[0] == batches[1]
    one, other = (d.collate([d[i] for i in batches[0][0]]) for d in (before, after))
    assert all(np.array_equal(getattr(one, f), getattr(other, f)) for f in ("src", "tgt_in", "tgt_out"))


def test_a_corpus_that_leaves_no_training_pair_is_refused(tmp_path):
    held = next(s for s in (f"Satz {i}" for i in range(100)) if held_out_side(s, 0.45, 0.45) != "train")
    (tmp_path / "one.tsv").write_text(f"{held}\tsentence\n")
    sources = PairSources((tmp_path / "one.tsv",), "de", "en", held_out=0.45)
    with pytest.raises(ValueError, match=r"one\.tsv: no training pairs \(after holding out"):
        prepare_pairs(sources, vocab_size=300, joint=True, tokenizers=None, cache=tmp_path / "c",
                      progress=False)
    assert not [p for p in (tmp_path / "c").iterdir() if p.is_dir()]  # nothing half-made left


def test_a_split_held_out_empty_is_refused_when_read(tmp_path):
    (tmp_path / "p.tsv").write_text("a\tx\nb\ty\n")
    sources = PairSources((tmp_path / "p.tsv",), "de", "en", held_out=0.0)
    corpus = prepare_pairs(sources, vocab_size=300, joint=True, tokenizers=None, cache=tmp_path / "c",
                           progress=False)
    with pytest.raises(ValueError, match=r"no val pairs: 2 pairs hold none out at data.held_out=0.0"):
        corpus.pairs("val")
