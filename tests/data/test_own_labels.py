"""Your own labelled text for the classification task (``data.corpus = PATH``): TSV and JSON
lines read through :mod:`attnlab.data.sources`, splits held out by a hash of the text, label
names from the training split, the notes a run prints, every bad input named in one line, and
the preset read back through the same path as files gives the same examples and batches.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import torch

from attnlab.data import kjv
from attnlab.data.classification import PRESET, ShakespeareKJVConfig, load_shakespeare_vs_kjv
from attnlab.data.tokenizers import SMALLEST_VOCABULARY, CharTokenizer
from attnlab.tasks import load_recipe
from attnlab.tasks.classification import ClassificationRecipe, batch_stream
from attnlab.tasks.classification.corpus import hash_share, read_labelled, read_rows
from attnlab.tasks.classification.recipe import ClassificationData
from attnlab.tasks.classification.task import read_splits
from repo_paths import CONFIGS

RECIPE = CONFIGS / "shakespeare_vs_kjv.toml"


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def labelled(n: int = 60) -> list[str]:
    """``n`` distinct short lines a class, three classes, as TSV."""
    return [f"{word} number {i}\t{label}" for i in range(n)
            for word, label in (("apple", "fruit"), ("oak", "tree"), ("trout", "fish"))]


def data(corpus: Path | str, **kwargs) -> ClassificationData:
    return ClassificationData(corpus=str(corpus), **kwargs)


# ---------------------------------------------------------------- reading
def test_tsv_jsonl_and_gzip_read_the_same_rows(tmp_path):
    tsv = write(tmp_path / "a.tsv", ["one fine day\tpos", "", "a bad one \tneg"])
    jsonl = write(tmp_path / "a.jsonl", [json.dumps({"body": {"t": "one fine day"}, "y": "pos"}),
                                         json.dumps({"body": {"t": "a bad one"}, "y": "neg"})])
    packed = tmp_path / "a.tsv.gz"
    packed.write_bytes(gzip.compress(tsv.read_bytes()))
    rows = [(t, y) for t, y, _ in read_rows(str(tsv), "data.corpus")]
    assert rows == [("one fine day", "pos"), ("a bad one", "neg")]
    assert [(t, y) for t, y, _ in read_rows(str(packed), "data.corpus")] == rows
    got = read_rows(str(jsonl), "data.corpus", text_name="body.t", label_name="y")
    assert [(t, y) for t, y, _ in got] == rows
    assert got[1][2] == f"{jsonl}:2"


def test_integer_labels_are_strings_sorted_as_numbers(tmp_path):
    lines = [json.dumps({"text": f"line {i}", "label": i % 11}) for i in range(400)]
    got = read_labelled(str(write(tmp_path / "n.jsonl", lines)), "", "", val_fraction=0.1, test_fraction=0.1)
    assert got.label_names == tuple(str(i) for i in range(11))  # 10 after 9, not after 1
    assert {(int(text.split()[1]) % 11, label) for text, label in got.train} == {(i, i) for i in range(11)}


def test_held_out_by_hash_deterministic_with_duplicates_together(tmp_path):
    lines = labelled() + labelled(20)  # the first 20 of each class twice
    corpus = write(tmp_path / "c.tsv", lines)
    got = read_labelled(str(corpus), "", "", val_fraction=0.2, test_fraction=0.3)
    again = read_labelled(str(corpus), "", "", val_fraction=0.2, test_fraction=0.3)
    assert got == again
    assert got.label_names == ("fish", "fruit", "tree")
    splits = {name: {t for t, _ in getattr(got, name)} for name in ("train", "val", "test")}
    assert not (splits["train"] & splits["val"]) and not (splits["train"] & splits["test"])
    for text, _ in got.test:
        assert hash_share(text) < 0.3
    for text, _ in got.val:
        assert 0.3 <= hash_share(text) < 0.5
    assert sum(map(len, (got.train, got.val, got.test))) == len(lines)
    assert 0.15 < len(got.test) / len(lines) < 0.45  # about test_fraction


def test_val_and_test_files_and_the_overlap_note(tmp_path, capsys):
    train = write(tmp_path / "train.tsv", labelled(20))
    val = write(tmp_path / "val.tsv", ["apple number 3\tfruit", "oak somewhere\ttree"])
    test = write(tmp_path / "test.tsv", ["trout again\tfish"])
    d = data(train, val=str(val), test=str(test), batch_size=4)
    tok = CharTokenizer.train("".join(line for line in labelled(20)) + "swhergi")
    examples, encoded = read_splits(d, tok, None, block_size=15)
    assert [t for t, _ in examples.train] == [line.split("\t")[0] for line in labelled(20)]  # none held out
    assert examples.val == [("apple number 3", 1), ("oak somewhere", 2)]
    assert examples.test == [("trout again", 0)]
    out = capsys.readouterr().out
    assert "note: 1 of 2 val texts also occur in the training examples" in out
    cut = "note: texts longer than model.gpt.block_size - 2 = 13 tokens are cut: 40 of 60 train, 1 of 2 val"
    assert cut in out
    assert max(len(ids) for ids in encoded["train"][0]) == 15


def test_characters_outside_the_vocabulary_are_fitted_with_a_note(tmp_path, capsys):
    train = write(tmp_path / "train.tsv", ["ab ab\tx", "ba\ty"])
    val = write(tmp_path / "val.tsv", ["ab’ ça\tx"])  # ’ → ', ç → c, both then unknown: dropped
    d = data(train, val=str(val), test=str(train), batch_size=1)
    examples, _ = read_splits(d, CharTokenizer.train("ab "), None, block_size=32)
    assert examples.val == [("ab a", 0)]
    assert "note: 1 text held 2 characters outside the tokenizer's 3 characters: mapped or dropped" in (
        capsys.readouterr().out)


# ---------------------------------------------------------------- bad input, one line each
@pytest.mark.parametrize(("lines", "message"), [
    (["good\tx", "two\ttabs\there"], r"{path}:2: expected text<TAB>label \(exactly one tab\), got 3 fields"),
    (["good\tx", "no tab at all"], r"{path}:2: expected text<TAB>label \(exactly one tab\), got 1 field"),
    (["\tx"], r"{path}:1: the text is empty"),
    (["text\t "], r"{path}:1: the label is empty"),
])
def test_bad_tsv_lines_are_named(tmp_path, lines, message):
    path = write(tmp_path / "bad.tsv", lines)
    with pytest.raises(ValueError, match=message.format(path=re.escape(str(path)))):
        read_rows(str(path), "data.corpus")


@pytest.mark.parametrize(("record", "message"), [
    ({"label": "x"}, r"{path}:2: no field 'text' \(the record has: label\)"),
    ({"text": "hi"}, r"{path}:2: no field 'label' \(the record has: text\)"),
    ({"text": "hi", "label": [1]}, r"{path}:2: field 'label' must be a string or an integer, got list"),
    ({"text": 3, "label": "x"}, r"{path}:2: field 'text' must be a string, got int"),
])
def test_bad_json_lines_are_named(tmp_path, record, message):
    path = write(tmp_path / "bad.jsonl", [json.dumps({"text": "fine", "label": "x"}), json.dumps(record)])
    with pytest.raises(ValueError, match=message.format(path=re.escape(str(path)))):
        read_rows(str(path), "data.corpus")


def test_empty_files_one_class_and_unseen_labels_are_refused(tmp_path):
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(ValueError, match=f"^{re.escape(str(empty))} is empty$"):
        read_labelled(str(empty), "", "", val_fraction=0.1, test_fraction=0.1)
    blank = write(tmp_path / "blank.tsv", ["", "  "])
    with pytest.raises(ValueError, match=f"{re.escape(str(blank))} holds no examples"):
        read_labelled(str(blank), "", "", val_fraction=0.1, test_fraction=0.1)
    one = write(tmp_path / "one.tsv", [f"line {i}\tsame" for i in range(50)])
    with pytest.raises(ValueError, match=r"hold 1 class \(same\); a classifier needs at least 2"):
        read_labelled(str(one), "", "", val_fraction=0.1, test_fraction=0.1)
    train = write(tmp_path / "train.tsv", ["a\tx", "b\ty"])
    val = write(tmp_path / "val.tsv", ["a\tx", "c\tz"])
    unseen = (f"{val}:2: label 'z' of a val example does not occur in the training examples "
              "(their labels: x, y)")
    with pytest.raises(ValueError, match=re.escape(unseen)):
        read_labelled(str(train), str(val), str(train), val_fraction=0.1, test_fraction=0.1)
    with pytest.raises(ValueError, match="no test examples: the hash held none of data.corpus out"):
        read_labelled(str(train), str(val), "", val_fraction=0.1, test_fraction=0.01)
    with pytest.raises(FileNotFoundError, match="data.corpus: .*ghost.tsv not found"):
        read_labelled(str(tmp_path / "ghost.tsv"), "", "", val_fraction=0.1, test_fraction=0.1)


# ---------------------------------------------------------------- the recipe
def test_recipe_paths_are_absolute_and_preset_keys_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recipe = ClassificationRecipe.from_dict(load_recipe(RECIPE, ["data.corpus=own.tsv", "data.val=v.jsonl"]))
    assert recipe.data.corpus == str(tmp_path / "own.tsv") and recipe.data.val == str(tmp_path / "v.jsonl")
    assert recipe.data.test == "" and not recipe.data.is_preset
    assert recipe.model.pending == {"gpt.vocab_size": SMALLEST_VOCABULARY, "num_classes": 2}
    preset = ClassificationRecipe.from_dict(load_recipe(RECIPE))
    assert preset.data.corpus == PRESET and preset.data.is_preset
    with pytest.raises(ValueError, match="data.per_class shapes the shakespeare_vs_kjv preset only"):
        ClassificationRecipe.from_dict(load_recipe(RECIPE, ["data.corpus=own.tsv", "data.per_class=5"]))
    with pytest.raises(ValueError, match="data.val names files of your own corpus"):
        ClassificationRecipe.from_dict(load_recipe(RECIPE, ["data.val=v.tsv"]))
    with pytest.raises(ValueError, match=r"\[model\] key 'num_classes' is set from the data"):
        ClassificationRecipe.from_dict(load_recipe(RECIPE, ["model.num_classes=3"]))


# ---------------------------------------------------------------- the preset through the generic path
@pytest.fixture(scope="module")
def preset_examples():
    try:
        kjv.find_kjv_module()
    except FileNotFoundError:
        pytest.skip("sword-text-kjv is not installed: run `make data-kjv` (as root)")
    from attnlab.data import load_tinyshakespeare

    tok = CharTokenizer.train(load_tinyshakespeare())
    return tok, load_shakespeare_vs_kjv(ShakespeareKJVConfig(per_class=200), chars=tok.chars)


def test_the_preset_as_files_gives_the_same_examples_and_batches(preset_examples, tmp_path):
    tok, preset = preset_examples
    files = {}
    for name in ("train", "val", "test"):  # the label's id as the label: "0" < "1" keeps the ids
        files[name] = str(write(tmp_path / f"{name}.tsv", [f"{t}\t{y}" for t, y in getattr(preset, name)]))
    own = data(files["train"], val=files["val"], test=files["test"])
    examples, encoded = read_splits(own, tok, None, block_size=128)
    _, expected = read_splits(ClassificationData(per_class=200), tok, None, block_size=128)
    for name in ("train", "val", "test"):
        assert getattr(examples, name) == getattr(preset, name)
        assert encoded[name][0] == expected[name][0]
        assert torch.equal(encoded[name][1], expected[name][1])
    mine = list(batch_stream(*encoded["train"], 32, seed=1337)(0))
    theirs = list(batch_stream(*expected["train"], 32, seed=1337)(0))
    assert len(mine) == len(theirs) > 0
    for a, b in zip(mine, theirs, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
