"""The KJV reader (SWORD zText) and the Shakespeare-vs-KJV dataset.

Independent references: a zText module written here from known strings by the format's
spec; facts about the real KJV (31,102 verses, Genesis 1:1, John 11:35, Revelation 22:21);
properties the dataset promises (balanced, disjoint, seeded, within the vocabulary, from
the held-out tail, length alone near chance).
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from attnlab.data import kjv
from attnlab.data.classification import (
    ShakespeareKJVConfig,
    cut_at_word,
    fit_to_vocab,
    length_baseline,
    shakespeare_lines,
    shakespeare_vs_kjv,
)
from attnlab.data.tokenizers import CharTokenizer
from repo_paths import SHARED_DATA

DATA = Path(os.environ.get("ATTNLAB_DATA") or SHARED_DATA)
SHAKESPEARE = DATA / "tinyshakespeare" / "input.txt"


# ---------------------------------------------------------------- a zText module by the spec
def write_ztext(root: Path, testaments: dict[str, list[str]], per_block: int = 2) -> Path:
    """A SWORD library at ``root`` with one zText module named KJV holding ``testaments``."""
    module = root / "modules" / "texts" / "ztext" / "kjv"
    module.mkdir(parents=True)
    for name, entries in testaments.items():
        bzs, bzv, bzz = bytearray(), bytearray(), bytearray()
        for first in range(0, len(entries), per_block):
            block = b""
            for text in entries[first:first + per_block]:
                raw = text.encode("utf-8")
                bzv += struct.pack("<IIH", first // per_block, len(block), len(raw))
                block += raw
            packed = zlib.compress(block)
            bzs += struct.pack("<III", len(bzz), len(packed), len(block))
            bzz += packed
        for ext, data in (("bzs", bzs), ("bzv", bzv), ("bzz", bzz)):
            (module / f"{name}.{ext}").write_bytes(bytes(data))
    (root / "mods.d").mkdir()
    (root / "mods.d" / "kjv.conf").write_text(
        "[KJV]\nAbbreviation=KJV\nDataPath=./modules/texts/ztext/kjv/\nModDrv=zText\n"
        "CompressType=ZIP\nEncoding=UTF-8\n"
    )
    return module


def test_read_ztext_returns_every_entry_in_order(tmp_path):
    ot = ["", "<w lemma='x'>In</w> the beginning", "¶ second", "thïrd verse", "", "fifth"]
    nt = ["Jesus wept.", "last"]
    module = write_ztext(tmp_path, {"ot": ot, "nt": nt})
    assert kjv.find_kjv_module(tmp_path) == module.resolve()
    assert list(kjv.read_ztext(module)) == ot + nt


def test_load_from_sword_path_env(tmp_path, monkeypatch):
    write_ztext(tmp_path, {"ot": ["", "A <note>n</note>verse."], "nt": ["Another."]})
    monkeypatch.setenv("SWORD_PATH", str(tmp_path))
    assert kjv.load_kjv_verses() == ["A verse.", "Another."]


def test_corrupt_block_size_is_reported(tmp_path):
    module = write_ztext(tmp_path, {"ot": ["abc", "def"], "nt": ["x"]})
    bzs = bytearray((module / "ot.bzs").read_bytes())
    bzs[8:12] = struct.pack("<I", 99)
    (module / "ot.bzs").write_bytes(bytes(bzs))
    with pytest.raises(ValueError, match="index says 99"):
        list(kjv.read_ztext(module))


def test_osis_to_text_strips_markup():
    osis = (
        '<div type="x-milestone" sID="pv1"/>¶ And <w lemma="strong:H0430">God</w> said, '
        '<transChange type="added">Let</transChange> the \\nd <w lemma="strong:H3068">LORD</w>'
        '</divineName> &amp; <title type="main">Genesis</title>all<note placement="foot">'
        '<reference>1.3 </reference>Heb. light</note>.'
    )
    assert kjv.osis_to_text(osis) == "And God said, Let the LORD & all."
    psalm = '<title canonical="true" type="psalm">A Psalm of <w>David</w>.</title> The LORD'
    assert kjv.osis_to_text(psalm) == "A Psalm of David. The LORD"


def test_missing_module_error_names_the_make_target(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data-kjv") as err:
        kjv.load_kjv_verses(tmp_path)
    assert str(tmp_path) in str(err.value)


def test_loading_never_runs_a_program(tmp_path, monkeypatch):
    """The loader only reads: a missing KJV is an error, never an install (docs/reliability.md)."""
    ran = []
    for name in ("run", "Popen", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, lambda *a, **k: ran.append(a))
    monkeypatch.setattr("os.system", lambda *a: ran.append(a))
    with pytest.raises(FileNotFoundError, match="make data-kjv"):
        kjv.load_kjv_verses(tmp_path)
    assert ran == [] and not hasattr(kjv, "ensure_kjv")


# ---------------------------------------------------------------- the real module
@pytest.fixture(scope="module")
def verses() -> list[str]:
    """The installed KJV (``make data-kjv``; the tests skip without it)."""
    try:
        kjv.find_kjv_module()
    except FileNotFoundError:
        pytest.skip("sword-text-kjv is not installed: run `make data-kjv` (as root)")
    return kjv.load_kjv_verses()


def test_real_kjv_has_every_verse(verses):
    assert len(verses) == kjv.KJV_VERSES
    assert verses[0] == "In the beginning God created the heaven and the earth."
    assert "Jesus wept." in verses
    assert verses[-1] == "The grace of our Lord Jesus Christ be with you all. Amen."
    assert not [v for v in verses if set(v) & set("<>\\¶") or v != " ".join(v.split())]


# ---------------------------------------------------------------- the dataset
TOY_PLAY = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
    "All:\nSpeak, speak.\n\nROMEO:\nBut, soft! what light through yonder window breaks?\n"
    "It is the east, and Juliet is the sun.\n"
)


def test_shakespeare_lines_drop_speakers():
    assert shakespeare_lines(TOY_PLAY, holdout_fraction=1.0) == [
        "Before we proceed any further, hear me speak.",
        "Speak, speak.",
        "But, soft! what light through yonder window breaks?",
        "It is the east, and Juliet is the sun.",
    ]
    tail = shakespeare_lines(TOY_PLAY, holdout_fraction=0.3)
    assert tail == ["It is the east, and Juliet is the sun."]  # the cut first line dropped


def test_cut_at_word_is_closest_word_prefix():
    rng = random.Random(0)
    words = "And the earth was without form and void and darkness was upon the deep".split()
    for _ in range(200):
        text = " ".join(rng.sample(words, rng.randint(1, len(words))))
        target = rng.randint(0, 80)
        cut = cut_at_word(text, target)
        prefixes = [" ".join(text.split()[:k]) for k in range(1, len(text.split()) + 1)]
        assert cut in prefixes
        assert abs(len(cut) - target) == min(abs(len(p) - target) for p in prefixes)


def test_fit_to_vocab_maps_then_drops():
    chars = set("abcdefghijklmnopqrstuvwxyzAEL' -")
    assert fit_to_vocab("Læbel’s  (café)—x", chars) == "Laebel's cafe--x"
    assert fit_to_vocab("a\tb\n c") == "a b c"


def test_length_baseline_detects_length_and_chance():
    long_short = [("x" * 10, 0)] * 20 + [("x" * 50, 1)] * 20
    assert length_baseline(long_short, long_short) == 1.0
    same = [("x" * 10, 0), ("y" * 10, 1)] * 20
    assert length_baseline(same, same) == 0.5


@pytest.fixture(scope="module")
def shakespeare_text() -> str:
    if not SHAKESPEARE.is_file():
        pytest.skip(f"tinyshakespeare not found at {SHAKESPEARE} (set ATTNLAB_DATA)")
    return SHAKESPEARE.read_text(encoding="utf-8")


def test_real_dataset_properties(shakespeare_text, verses):
    tok = CharTokenizer.train(shakespeare_text)
    cfg = ShakespeareKJVConfig(per_class=600, seed=3)
    verses = verses[::4]  # a quarter of the Bible keeps the test fast
    data = shakespeare_vs_kjv(shakespeare_text, verses, cfg, chars=tok.chars)
    splits = {"train": data.train, "val": data.val, "test": data.test}
    for name, split in splits.items():  # balanced
        labels = [y for _, y in split]
        assert labels.count(0) == labels.count(1), name
    assert sum(len(s) for s in splits.values()) == 1200
    texts = [t for s in splits.values() for t, _ in s]
    assert len(set(texts)) == len(texts)  # no example in two splits or both classes
    assert set("".join(texts)) <= set(tok.chars)
    tail = shakespeare_text[int(0.9 * len(shakespeare_text)):]
    assert all(t in tail for s in splits.values() for t, y in s if y == 0)
    assert length_baseline(data.train, data.test) < 0.6  # length is no giveaway
    again = shakespeare_vs_kjv(shakespeare_text, verses, cfg, chars=tok.chars)
    assert again.test == data.test
    other = shakespeare_vs_kjv(shakespeare_text, verses, cfg.replace(seed=4), chars=tok.chars)
    assert other.test != data.test
    few = shakespeare_vs_kjv(shakespeare_text, verses, cfg.replace(train_per_class=50),
                             chars=tok.chars)
    assert (few.val, few.test) == (data.val, data.test)
    assert sorted(few.train) == sorted(t for t in data.train if t in few.train)
    assert [y for _, y in few.train].count(0) == [y for _, y in few.train].count(1) == 50


def test_dataset_config_errors():
    with pytest.raises(ValueError, match="val_fraction \\+ test_fraction must be < 1"):
        ShakespeareKJVConfig(val_fraction=0.5, test_fraction=0.5)
    verses = [f"Verse {i} of many." for i in range(9)]
    with pytest.raises(ValueError, match="per_class must be <= [1-4] "):
        cfg = ShakespeareKJVConfig(per_class=5, holdout_fraction=1.0)
        shakespeare_vs_kjv(TOY_PLAY, verses, cfg)
