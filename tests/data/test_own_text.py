"""A language model's own text: files, folders, globs, JSON lines, gzip; prepared once into
memory-mapped token files; every bad input refused in one line naming the file."""

import gzip
import json

import numpy as np
import pytest

from attnlab.data import CharTokenizer, Tokenizer, WordTokenizer
from attnlab.data.prepared import token_dtype
from attnlab.data.sources import expand
from attnlab.data.text_corpus import TextSources, prepare_text, safe_cut
from repo_paths import SHARED_DATA

SHAKESPEARE = (SHARED_DATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")


def _prepare(tmp_path, *train, kind="char", val=(), tokenizer=None, **options):
    sources = TextSources(tuple(train), tuple(val), **options)
    return prepare_text(sources, kind=kind, vocab_size=300, tokenizer=tokenizer, cache=tmp_path / "cache",
                        progress=False)


def test_a_folder_reads_every_file_below_it_in_order_skipping_hidden_ones(tmp_path):
    (tmp_path / "notes" / "b").mkdir(parents=True)
    (tmp_path / "notes" / "a.txt").write_text("first\n")
    (tmp_path / "notes" / "b" / "c.txt.gz").write_bytes(gzip.compress(b"second\n"))
    (tmp_path / "notes" / ".hidden").write_text("never\n")
    assert [p.name for p in expand(str(tmp_path / "notes"), "data.corpus")] == ["a.txt", "c.txt.gz"]
    assert [p.name for p in expand(str(tmp_path / "notes" / "**" / "*.gz"), "x")] == ["c.txt.gz"]


@pytest.mark.parametrize("make, problem", [
    (lambda d: str(d / "none*.txt"), "no file matches"),
    (lambda d: (d / "empty").mkdir() or str(d / "empty"), "holds no files"),
    (lambda d: str(d / "missing.txt"), "not found"),
])
def test_a_spec_naming_no_file_is_refused_in_one_line(tmp_path, make, problem):
    with pytest.raises((ValueError, FileNotFoundError), match=f"data.corpus: .*{problem}"):
        expand(make(tmp_path), "data.corpus")


def test_documents_are_joined_by_eos_and_the_split_is_the_tail_of_the_characters(tmp_path):
    (tmp_path / "a.txt").write_text("abcab\n")
    (tmp_path / "b.txt").write_text("ba\n")
    corpus = _prepare(tmp_path, tmp_path / "a.txt", tmp_path / "b.txt", train_fraction=0.8)
    tok = corpus.tokenizer
    stream = [*corpus.tokens("train"), *corpus.tokens("val")]
    assert stream == [*tok.encode("abcab\n"), tok.eos_id, *tok.encode("ba\n")]
    assert len(corpus.tokens("train")) == int(9 * 0.8) + 1  # 7 characters and the <eos> before b.txt
    assert corpus.meta["documents"] == 2


def test_jsonl_records_are_documents_and_a_missing_field_names_the_line(tmp_path):
    good = tmp_path / "notes.jsonl"
    records = [{"body": "one two"}, {"body": ""}, {"body": "three"}]
    good.write_text("\n".join(json.dumps(r) for r in records[:2]) + "\n\n" + json.dumps(records[2]) + "\n")
    corpus = _prepare(tmp_path, good, text_field="body", train_fraction=0.5)
    assert corpus.meta["documents"] == 3  # the empty one too, which adds no <eos>
    tok = corpus.tokenizer
    stream = [*corpus.tokens("train"), *corpus.tokens("val")]
    assert stream == [*tok.encode("one two"), tok.eos_id, *tok.encode("three")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"body": "x"}) + "\n" + json.dumps({"text": "y"}) + "\n")
    with pytest.raises(ValueError, match=rf"{bad}:2: no field 'body' \(the record has: text\)"):
        _prepare(tmp_path, bad, text_field="body")
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match=rf"{bad}:1: not a JSON line"):
        _prepare(tmp_path, bad)


def test_crlf_and_a_byte_order_mark_read_as_plain_newlines(tmp_path):
    (tmp_path / "dos.txt").write_bytes(b"\xef\xbb\xbfab\r\nba\r\n")
    (tmp_path / "unix.txt").write_bytes(b"ab\nba\n")
    dos, unix = (_prepare(tmp_path, tmp_path / n) for n in ("dos.txt", "unix.txt"))
    assert dos.tokenizer.chars == unix.tokenizer.chars == ["\n", "a", "b"]
    assert list(dos.tokens("train")) == list(unix.tokens("train"))


def test_bytes_that_are_not_utf8_name_the_file_line_and_byte_or_are_replaced_and_counted(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"good line\nsch\xf6n\nmore\n")
    where = "at byte 3 of the line, byte 13 of the file"
    with pytest.raises(ValueError, match=rf"{bad}:2: not valid UTF-8 .* {where}"):
        _prepare(tmp_path, bad)
    corpus = _prepare(tmp_path, bad, errors="replace")
    assert "\ufffd" in corpus.tokenizer.chars
    assert corpus.notes()[-1] == f"note: bytes that are not UTF-8 replaced by U+FFFD in {bad} (1 line)"


def test_an_empty_file_and_an_empty_split_are_refused(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match=r"empty\.txt is empty"):
        _prepare(tmp_path, tmp_path / "empty.txt")
    (tmp_path / "tiny.txt").write_text("a")
    with pytest.raises(ValueError, match="the training text is empty after splitting"):
        _prepare(tmp_path, tmp_path / "tiny.txt")


def test_validation_lines_found_in_training_are_counted(tmp_path):
    (tmp_path / "train.txt").write_text("the same line\nonly in training\n")
    (tmp_path / "val.txt").write_text("the same line\nonly in validation\n")
    corpus = _prepare(tmp_path, tmp_path / "train.txt", val=[tmp_path / "val.txt"])
    assert corpus.meta["overlap"] == {"val_lines": 2, "also_in_train": 1}
    assert "1 of the 2 distinct validation lines also occur in the training text" in corpus.notes()[1]


def test_pieces_cut_where_no_pretoken_spans_so_bpe_ids_equal_the_whole_texts(tmp_path):
    """Lines with trailing spaces before blank lines, and a vocabulary that merges such spaces
    with the newline: a cut after the newline would change the ids, a cut before it cannot."""
    text = SHAKESPEARE[:300_000].replace("\n\n", "  \n\n") + "\n   indented\n\n\tTab\nlast"
    assert safe_cut("ab\n  c\nd") == 6 and safe_cut("ab\n  c") == 0 and safe_cut("\nx") == 0
    tok = Tokenizer.train(text[:100_000].splitlines(keepends=True) + [text[:100_000]], 600)
    assert tok.encode("a  \n") + tok.encode("b") != tok.encode("a  \nb")  # the trap is set
    (tmp_path / "t.txt").write_text(text)
    sources = TextSources((tmp_path / "t.txt",), train_fraction=0.5)
    pieces = list(sources._pieces(tmp_path / "t.txt"))
    assert "".join(pieces) == text and len(pieces) > 1  # blocks of a megabyte: force several
    corpus = _prepare(tmp_path, tmp_path / "t.txt", tokenizer=tok, train_fraction=0.5)
    half = len(text) // 2
    assert list(corpus.tokens("train")) == tok.encode(text[:half])
    assert list(corpus.tokens("val")) == tok.encode(text[half:])


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    """Blocks of 64 KB, so a few hundred KB of text is read in several pieces."""
    import attnlab.data.corpora as corpora

    monkeypatch.setattr(corpora, "BLOCK_BYTES", 1 << 16)


@pytest.mark.parametrize("kind, cls", [("char", CharTokenizer), ("word", WordTokenizer), ("bpe", Tokenizer)])
def test_each_tokenizer_kind_is_learned_on_the_training_text_and_saved_with_the_files(tmp_path, kind, cls):
    (tmp_path / "t.txt").write_text(SHAKESPEARE[:20_000])
    corpus = _prepare(tmp_path, tmp_path / "t.txt", kind=kind)
    assert type(corpus.tokenizer) is cls and (corpus.folder / "tokenizer.json").is_file()
    val = corpus.tokenizer.decode(corpus.tokens("val")[:200], skip_special=False)
    assert val.split()[0] in SHAKESPEARE[18_000:18_200]


def test_a_given_tokenizer_json_of_another_project_gets_the_specials_it_lacks(tmp_path):
    import tokenizers as hf
    from tokenizers import models, pre_tokenizers

    vocabulary = {"[UNK]": 0, "to": 1, "be": 2, "or": 3, "not": 4}
    theirs = hf.Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    theirs.pre_tokenizer = pre_tokenizers.Whitespace()
    theirs.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "t.txt").write_text("to be or not to be\nto be\n")
    from attnlab.data import load_tokenizer

    tok = load_tokenizer(tmp_path)
    assert tok.special_ids == (5, 6, 7, 8) and tok.encode("to be") == [1, 2]
    corpus = _prepare(tmp_path, tmp_path / "t.txt", tokenizer=tok)
    assert list(corpus.tokens("train")) == [1, 2, 3, 4, 1, 2, 1]


def test_prepared_once_then_reused_and_made_again_when_a_file_changes(tmp_path):
    (tmp_path / "t.txt").write_text("abcabc\n" * 10)
    first = _prepare(tmp_path, tmp_path / "t.txt")
    again = _prepare(tmp_path, tmp_path / "t.txt")
    assert first.built and not again.built and again.folder == first.folder
    assert isinstance(again.tokens("train"), np.memmap)
    (tmp_path / "t.txt").write_text("abcabd\n" * 10)
    changed = _prepare(tmp_path, tmp_path / "t.txt")
    assert changed.built and changed.folder != first.folder and "d" in changed.tokenizer.chars
    assert not list((tmp_path / "cache").glob(".*tmp*"))  # no half-written folder left behind


def test_a_failed_preparation_leaves_nothing_in_the_cache(tmp_path):
    (tmp_path / "t.txt").write_text("fine\n")
    (tmp_path / "u.jsonl").write_text('{"text": "x"}\n{"other": 1}\n')
    with pytest.raises(ValueError, match="no field"):
        _prepare(tmp_path, tmp_path / "t.txt", tmp_path / "u.jsonl")
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]


def test_ids_are_uint16_where_the_vocabulary_fits_else_uint32():
    assert token_dtype(65_536) == np.uint16 and token_dtype(65_537) == np.uint32


def test_a_consumer_that_stops_early_frees_the_reading_thread(tmp_path):
    from attnlab.data.text_corpus import _ReadAhead

    (tmp_path / "t.txt").write_text(SHAKESPEARE * 6)  # more pieces (64 KB blocks) than the queue holds
    sources = TextSources((tmp_path / "t.txt",))
    val = np.zeros(0, np.int64)
    reader = _ReadAhead(sources, 10**9, val, np.zeros(0, bool))
    read = []
    monkey = reader._put
    reader._put = lambda item: (read.append(item), monkey(item))
    with pytest.raises(KeyboardInterrupt), reader as pieces:
        next(pieces)
        raise KeyboardInterrupt  # Ctrl-C while encoding
    assert not reader.thread.is_alive()
    assert len(read) < 80  # it stopped reading: the file has about 100 pieces
