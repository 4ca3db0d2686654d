"""BPE and character tokenizers: exact round trips, special ids, save/load."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data import (
    SPECIAL_TOKENS,
    CharTokenizer,
    Tokenizer,
    load_multi30k,
    load_tinyshakespeare,
    load_tokenizer,
    load_tokenizers,
    save_tokenizers,
    train_bpe,
)
from repo_paths import SHARED_DATA

REAL_DATA = Path(os.environ["ATTNLAB_DATA"]) if os.environ.get("ATTNLAB_DATA") else SHARED_DATA
requires_data = pytest.mark.skipif(
    not os.environ.get("ATTNLAB_DATA") and not SHARED_DATA.is_dir(),
    reason="ATTNLAB_DATA is unset and ../shared/data is missing",
)

TRICKY = [
    "Ein älterer Mann, der über die Straße geht, grüßt „Öl“ & Äpfel!",
    "  two  leading spaces, a\ttab and a trailing space ",
    "Quotes: «ok» 'single' \"double\" — dash… 😀 ★ 中文",
    "Literal <eos> and <pad> are text, not specials.",
    "",
]

TINY = ["Ein Hund läuft über die Wiese.", "A dog runs across the meadow."] * 20


@pytest.fixture(scope="module")
def tiny_tok() -> Tokenizer:
    return Tokenizer.train(TINY, vocab_size=300, min_frequency=1)


@pytest.fixture(scope="module")
def multi30k_train():
    if not os.environ.get("ATTNLAB_DATA") and not SHARED_DATA.is_dir():
        pytest.skip("ATTNLAB_DATA is unset and ../shared/data is missing")
    return load_multi30k("train", "de", "en", data_dir=REAL_DATA)


@pytest.fixture(scope="module")
def joint(multi30k_train):
    src, tgt = train_bpe([s for s, _ in multi30k_train], [t for _, t in multi30k_train], 8000)
    return src, tgt


def test_special_ids_are_fixed(tiny_tok):
    tok = tiny_tok
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert [tok.hf.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]


def test_bos_eos_wrapping_and_batch(tiny_tok):
    tok = tiny_tok
    plain = tok.encode(TINY[0])
    assert tok.encode(TINY[0], add_bos=True, add_eos=True) == [1, *plain, 2]
    assert tok.encode_batch(TINY[:2], add_eos=True) == [
        tok.encode(t, add_eos=True) for t in TINY[:2]
    ]
    assert tok.decode([1, *plain, 2, 0, 0]) == TINY[0]
    assert tok.decode(torch.tensor([1, *plain, 2, *plain])) == TINY[0]  # stops at <eos>
    assert tok.decode([1, *plain], skip_special=False) == "<bos>" + TINY[0]


def test_decode_rejects_out_of_range_ids(tiny_tok):
    tok = tiny_tok
    with pytest.raises(ValueError, match="vocab_size=300"):
        tok.decode([5, 300])


def test_vocab_size_too_small():
    with pytest.raises(ValueError, match="vocab_size must be >= 260"):
        Tokenizer.train(TINY, vocab_size=100)


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=60))
def test_bpe_round_trips_any_text(tiny_tok, text):
    assert tiny_tok.decode(tiny_tok.encode(text)) == text


@requires_data
def test_bpe_on_multi30k_round_trips_exactly(joint):
    tok, _ = joint
    val = load_multi30k("val", "de", "en", data_dir=REAL_DATA)
    sentences = [s for pair in val for s in pair] + TRICKY
    assert tok.decode_batch(tok.encode_batch(sentences)) == sentences
    assert any(ch in "äöüß" for s in sentences for ch in s)  # umlauts were exercised


@requires_data
def test_bpe_on_multi30k_vocab_and_merges(joint, multi30k_train):
    tok, same = joint
    assert tok is same and tok.vocab_size == 8000
    inner = Counter(w for pair in multi30k_train for s in pair for w in s.split()[1:])
    frequent = [w for w, _ in inner.most_common(20) if w.isalpha()]
    for word in frequent:  # frequent words inside sentences (after a space) are one token
        assert len(tok.encode(" " + word)) == 1, word
    german = [s for s, _ in multi30k_train[:500]]
    n_tokens = sum(len(ids) for ids in tok.encode_batch(german))
    assert n_tokens < 0.3 * sum(len(s.encode()) for s in german)  # real compression


@requires_data
def test_separate_vocabularies(multi30k_train):
    src, tgt = train_bpe(
        [s for s, _ in multi30k_train[:5000]],
        [t for _, t in multi30k_train[:5000]],
        1000,
        joint=False,
    )
    assert src is not tgt and src.vocab_size == tgt.vocab_size == 1000
    assert src.hf.get_vocab() != tgt.hf.get_vocab()
    s, t = multi30k_train[0]
    assert src.decode(src.encode(s)) == s and tgt.decode(tgt.encode(t)) == t


def test_save_load_joint_and_separate(tmp_path, tiny_tok):
    tok = tiny_tok
    other = Tokenizer.train(TINY[::-1] + ["xyz"], vocab_size=280, min_frequency=1)
    assert [p.name for p in save_tokenizers(tmp_path / "joint", tok, tok)] == ["tokenizer.json"]
    src, tgt = load_tokenizers(tmp_path / "joint")
    assert src is tgt and src.encode(TRICKY[0]) == tok.encode(TRICKY[0])
    names = [p.name for p in save_tokenizers(tmp_path / "sep", tok, other)]
    assert names == ["src_tokenizer.json", "tgt_tokenizer.json"]
    src, tgt = load_tokenizers(tmp_path / "sep")
    assert src.vocab_size == 300 and tgt.vocab_size == 280
    assert tgt.encode(TRICKY[3]) == other.encode(TRICKY[3])
    assert tgt.decode(tgt.encode(TRICKY[3])) == TRICKY[3]  # specials-as-text survives reload


def test_load_missing_tokenizer(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_tokenizer(tmp_path)


# --- characters ---------------------------------------------------------------------------


def test_char_tokenizer_basics(tmp_path):
    text = "hello world\nHELLO!"
    tok = CharTokenizer.train(text)
    chars = sorted(set(text))
    assert tok.vocab_size == len(chars) + 4
    assert tok.encode(text) == [4 + chars.index(c) for c in text]
    assert tok.decode(tok.encode(text, add_bos=True, add_eos=True)) == text
    assert tok.token_strings(tok.encode("he")) == ["h", "e"]
    tok.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert isinstance(again, CharTokenizer) and again.encode(text) == tok.encode(text)


def test_char_tokenizer_names_unknown_characters():
    tok = CharTokenizer.train("abc")
    with pytest.raises(ValueError, match=r"2 characters not in the vocabulary .*'x', 'é'"):
        tok.encode("abéx")


@requires_data
def test_char_tokenizer_on_tinyshakespeare():
    text = load_tinyshakespeare(data_dir=REAL_DATA)
    tok = CharTokenizer.train(text)
    assert tok.vocab_size == 65 + 4  # nanoGPT's 65 characters plus the special ids
    ids = tok.encode(text)
    assert len(ids) == len(text) and tok.decode(ids) == text
    assert json.loads(json.dumps(tok.chars)) == sorted(set(text))


def test_word_tokenizer_round_trips_captions_and_reloads(tmp_path):
    from attnlab.data.tokenizers import WordTokenizer

    captions = ["a large seven above a small two", "three digits: four, nine and one, from left to right"]
    tok = WordTokenizer.train(captions)
    words = {w for c in captions for w in c.replace(",", " , ").replace(":", " : ").split()}
    assert tok.vocab_size == 4 + len(words)  # one id a word or mark, after the specials
    for caption in captions:
        ids = tok.encode(caption, add_bos=True, add_eos=True)
        assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
        assert tok.decode(ids) == caption
        assert tok.token_strings(ids[1:-1]) == caption.replace(",", " ,").replace(":", " :").split()
    tok.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert type(again) is WordTokenizer
    assert again.encode(captions[1]) == tok.encode(captions[1])
    assert again.encode("a purple seven") == [tok.encode("a")[0], tok.unk_id, tok.encode("seven")[0]]
