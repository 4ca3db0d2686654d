"""Tables Hugging Face ``datasets`` reads from disk (Parquet, CSV, save_to_disk folders) read
like JSON lines, offline; they skip without the extra (``make datasets``)."""

import json
import sys

import pytest

from attnlab.data.pair_corpus import PairSources, prepare_pairs
from attnlab.data.sources import expand, pair_files, read_pairs, records
from attnlab.data.text_corpus import TextSources, prepare_text

datasets = pytest.importorskip("datasets",
                               reason="Hugging Face datasets is not installed: run `make datasets`")

PAIRS = [("ein Hund", "a dog"), ("eine Katze", "a cat"), ("zwei Hunde", "two dogs")]


def test_a_parquet_file_gives_the_tokens_its_json_lines_give(tmp_path):
    texts = [f"line {i} of my notes\n" for i in range(200)]
    datasets.Dataset.from_dict({"body": texts}).to_parquet(str(tmp_path / "notes.parquet"))
    (tmp_path / "notes.jsonl").write_text("".join(json.dumps({"body": t}) + "\n" for t in texts))
    got = {}
    for name in ("notes.parquet", "notes.jsonl"):
        sources = TextSources((tmp_path / name,), text_field="body")
        corpus = prepare_text(sources, kind="char", vocab_size=300, tokenizer=None, cache=tmp_path / "cache",
                              progress=False)
        got[name] = (corpus.meta["documents"], list(corpus.tokens("train")), list(corpus.tokens("val")))
    assert got["notes.parquet"] == got["notes.jsonl"] and got["notes.jsonl"][0] == 200


def test_a_save_to_disk_folder_of_pairs_is_one_source(tmp_path):
    rows = {"translation": [{"de": s, "en": t} for s, t in PAIRS]}
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "pairs"))
    assert expand(str(tmp_path / "pairs"), "data.corpus") == [tmp_path / "pairs"]
    files = pair_files(str(tmp_path / "pairs"), "de", "en", "data.corpus")
    assert list(read_pairs(files, "de", "en")) == PAIRS
    sources = PairSources(tuple(files), "de", "en", val=tuple(files), test=tuple(files))
    corpus = prepare_pairs(sources, vocab_size=300, joint=True, tokenizers=None, cache=tmp_path / "c",
                           progress=False)
    assert corpus.meta["rows"] == 3 and corpus.meta["sources"][0]["size"] > 0


def test_a_csv_row_without_the_field_is_named_and_a_dict_of_splits_asks_for_one(tmp_path):
    (tmp_path / "t.csv").write_text("text,label\nhello,a\nworld,b\n")
    assert [r["label"] for _, r in records(tmp_path / "t.csv")] == ["a", "b"]
    split = datasets.Dataset.from_dict({"text": ["x"]})
    datasets.DatasetDict({"train": split, "validation": split}).save_to_disk(str(tmp_path / "dd"))
    several = r"dd holds several splits \(train, validation\): name one, e\.g\. .*dd/train"
    with pytest.raises(ValueError, match=several):
        list(records(tmp_path / "dd"))


def test_without_the_extra_a_table_is_refused_naming_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if not installed
    (tmp_path / "t.parquet").write_bytes(b"PAR1")
    with pytest.raises(ValueError, match=r"needs Hugging Face datasets: pip install 'attnlab\[datasets\]'"):
        list(records(tmp_path / "t.parquet"))
