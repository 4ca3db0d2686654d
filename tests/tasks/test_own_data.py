"""Training on your own data through the CLI: the GPT on a folder of text, the translator on a
pair of files; the presets are the same readers on the bundled files."""

import json
import shutil

import pytest
import torch

from attnlab.cli import main
from attnlab.tasks import LanguageModelTask, load_recipe
from attnlab.tasks.language_model.recipe import LMRecipe
from repo_paths import CONFIGS, SHARED_DATA

SHAKESPEARE = SHARED_DATA / "tinyshakespeare" / "input.txt"
TINY_GPT = ["model.num_layers=1", "model.num_heads=2", "model.d_model=32", "data.block_size=32",
            "data.batch_size=8", "train.max_steps=4", "optim.warmup=1", "train.eval_every=2",
            "eval.eval_iters=2", "eval.sample_chars=20"]


def _lm_task(tmp_path, name, *overrides):
    recipe = LMRecipe.from_dict(load_recipe(CONFIGS / "shakespeare_char.toml", [*TINY_GPT, *overrides]))
    task = LanguageModelTask(recipe, tmp_path / name)
    task.prepare(None)
    return task


def test_the_tinyshakespeare_preset_and_its_file_named_as_your_own_give_the_same_batches(tmp_path):
    preset = _lm_task(tmp_path, "preset")
    own = _lm_task(tmp_path, "own", f"data.corpus={SHAKESPEARE}")
    assert preset.tokenizer.to_json() == own.tokenizer.to_json()
    batches = zip(preset.train_data()(0), own.train_data()(0), strict=False)  # endless: the first three
    for (a, b), _ in zip(batches, range(3), strict=False):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert all(torch.equal(x[0], y[0]) for x, y in zip(preset.eval_batches, own.eval_batches, strict=True))


def test_a_preset_name_with_validation_files_is_refused():
    problem = "data.val names files of your own corpus; the tinyshakespeare preset"
    with pytest.raises(ValueError, match=problem):
        LMRecipe.from_dict(load_recipe(CONFIGS / "shakespeare_char.toml", ["data.val=v.txt"]))


def test_the_gpt_trains_on_a_folder_of_text_and_evaluates_from_its_recipe(tmp_path, capsys, monkeypatch):
    notes = tmp_path / "notes"
    (notes / "more").mkdir(parents=True)
    text = SHAKESPEARE.read_text()
    (notes / "one.txt").write_text(text[:40_000])
    (notes / "more" / "two.md").write_text(text[40_000:60_000])
    monkeypatch.chdir(tmp_path)  # the corpus given relative to here, saved absolute
    run = tmp_path / "run"
    args = ["train", "--config", str(CONFIGS / "shakespeare_char.toml"), "--run-dir", str(run), *TINY_GPT]
    assert main([*args, "data.corpus=notes", "data.tokenizer=bpe", "data.vocab_size=300"]) == 0
    out = capsys.readouterr().out
    assert "prepared " in out and "2 documents" in out and "val loss" in out
    recipe = json.loads((run / "checkpoints" / "step_00000004" / "recipe.json").read_text())
    assert recipe["data"]["corpus"] == str(notes)
    shutil.move(str(tmp_path / "notes"), str(tmp_path / "elsewhere"))  # evaluate needs the files: refused
    assert main(["evaluate", str(run / "checkpoints" / "step_00000004")]) == 2
    assert f"data.corpus: {notes} not found" in capsys.readouterr().err


def test_the_translator_trains_on_a_pair_of_files(tmp_path, capsys):
    import gzip

    for lang in ("en", "fr"):
        raw = (SHARED_DATA / "multi30k" / f"train.{lang}.gz").read_bytes()
        lines = gzip.decompress(raw).decode().splitlines()
        (tmp_path / f"mine.{lang}").write_text("\n".join(lines[:1500]) + "\n")
    run = tmp_path / "run"
    tiny = ["model.d_model=32", "model.num_heads=2", "model.d_ff=64", "model.num_encoder_layers=1",
            "model.num_decoder_layers=1", "data.vocab_size=400", "optim.warmup=1",
            "train.max_steps=3", "train.eval_every=3", "eval.beam_size=2", "eval.test_limit=8",
            "eval.val_limit=8", "eval.average_last=1"]
    args = ["train", "--config", str(CONFIGS / "multi30k_demo.toml"), "--run-dir", str(run), *tiny]
    assert main([*args, f"data.corpus={tmp_path / 'mine'}", "data.src_lang=en", "data.tgt_lang=fr",
                 "data.held_out=0.05"]) == 0
    out = capsys.readouterr().out
    assert "training pairs" in out and "en-fr test:" in out
    results = json.loads((run / "results.json").read_text())
    assert results["src_lang"] == "en" and results["sentences"] == 8
    assert main(["evaluate", str(run / "final"), "--split", "val", "--beam", "1"]) == 0
    assert "en-fr val: BLEU" in capsys.readouterr().out
    assert main(["evaluate", str(run / "final"), "--split", "test_2016_flickr"]) == 2
    assert "is a Multi30k split" in capsys.readouterr().err


def test_the_kjv_preset_is_its_verses_as_a_text_file_read_like_your_own(tmp_path):
    from attnlab.data.kjv import find_kjv_module, load_kjv_verses
    from attnlab.tasks.language_model.task import prepare_corpus

    try:
        find_kjv_module()
    except FileNotFoundError:
        pytest.skip("sword-text-kjv is not installed: run `make data-kjv` (as root)")
    recipe = LMRecipe.from_dict(load_recipe(CONFIGS / "shakespeare_char.toml",
                                            ["data.corpus=kjv", "data.tokenizer=word"]))
    corpus = prepare_corpus(recipe.data, None, progress=False)
    verses = load_kjv_verses()
    assert corpus.meta["documents"] == 1 and corpus.tokenizer.vocab_size > 10_000  # a word vocabulary
    text = "".join(v + "\n" for v in verses)
    tail = text[int(len(text) * 0.9):]
    assert list(corpus.tokens("val")) == corpus.tokenizer.encode(tail)


def test_prepare_writes_the_token_files_that_train_then_reuses(tmp_path, capsys):
    (tmp_path / "mine.txt").write_text(SHAKESPEARE.read_text()[:30_000])
    config, corpus = str(CONFIGS / "shakespeare_char.toml"), f"data.corpus={tmp_path / 'mine.txt'}"
    assert main(["prepare", config, corpus]) == 0
    assert capsys.readouterr().out.startswith("prepared ")
    assert main(["train", "--config", config, "--run-dir", str(tmp_path / "run"), corpus, *TINY_GPT]) == 0
    assert "\nreusing " in capsys.readouterr().out


def test_bytes_that_are_not_utf8_stop_prepare_in_one_line_unless_errors_replace(tmp_path, capsys):
    (tmp_path / "latin1.txt").write_bytes(SHAKESPEARE.read_bytes()[:5000] + b"sch\xf6n\n" * 3)
    args = ["prepare", str(CONFIGS / "shakespeare_char.toml"), f"data.corpus={tmp_path / 'latin1.txt'}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "latin1.txt:" in err and "--errors replace" in err
    assert main([*args, "--errors", "replace"]) == 0
    assert "replaced by U+FFFD in " in capsys.readouterr().out.split("\n")[-2]


def test_training_pairs_longer_than_max_len_are_counted_not_dropped_silently(tmp_path, capsys):
    (tmp_path / "p.tsv").write_text("".join(f"kurz {i}\tshort {i}\n" for i in range(300)) +
                                    "ein sehr langer Satz mit vielen Wörtern darin\ta long sentence indeed\n")
    run = tmp_path / "run"
    tiny = ["model.d_model=16", "model.num_heads=2", "model.d_ff=32", "model.num_encoder_layers=1",
            "model.num_decoder_layers=1", "data.vocab_size=300", "optim.warmup=1", "train.max_steps=2",
            "train.eval_every=2", "eval.beam_size=1", "eval.average_last=1", "data.max_len=12",
            "data.held_out=0.05"]
    assert main(["train", "--config", str(CONFIGS / "multi30k_demo.toml"), "--run-dir", str(run), *tiny,
                 f"data.corpus={tmp_path / 'p.tsv'}"]) == 0
    assert "note: 1 training pair (0." in capsys.readouterr().out


def test_a_corpus_too_small_for_one_window_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "short.txt").write_text("To be, or not to be: that is the question.\n")
    args = ["train", "--config", str(CONFIGS / "shakespeare_char.toml"), "--run-dir", str(tmp_path / "run"),
            *TINY_GPT, f"data.corpus={tmp_path / 'short.txt'}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("fewer than data.block_size + 1 = 33: lower data.block_size or give more text")
    assert not (tmp_path / "run").exists()  # a refused run leaves nothing behind


def test_the_translator_takes_a_tokenizer_json_of_another_project(tmp_path, capsys):
    """Its padding id is not 0 (the four specials come after its own vocabulary): the model takes
    the tokenizer's, and trains."""
    import tokenizers as hf
    from tokenizers import models, pre_tokenizers, trainers

    lines = [f"wort{i % 7} word{i % 5}" for i in range(400)]
    (tmp_path / "p.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in (line.split() for line in lines)))
    theirs = hf.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    theirs.pre_tokenizer = pre_tokenizers.Whitespace()
    theirs.train_from_iterator(lines, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    theirs.save(str(tmp_path / "tokenizer.json"))
    run = tmp_path / "run"
    tiny = ["model.d_model=16", "model.num_heads=2", "model.d_ff=32", "model.num_encoder_layers=1",
            "model.num_decoder_layers=1", "optim.warmup=1", "train.max_steps=2", "train.eval_every=2",
            "eval.beam_size=1", "eval.average_last=1", "data.held_out=0.1", "eval.val_bleu=false",
            "train.metric=val_loss", "model.share_embeddings=false"]
    data = [f"data.corpus={tmp_path / 'p.tsv'}", f"data.tokenizer_file={tmp_path / 'tokenizer.json'}"]
    config = str(CONFIGS / "multi30k_demo.toml")
    assert main(["train", "--config", config, "--run-dir", str(run), *tiny, *data]) == 0
    config = json.loads((run / "final" / "config.json").read_text())
    assert config["pad_id"] == 13 and config["src_vocab_size"] == 17  # 13 words and [UNK], then the specials


def test_the_bpe_preset_learns_and_encodes_as_before_the_token_files(tmp_path):
    """shakespeare_bpe's tokenizer and streams as the whole-text code made them: BPE learned on
    the first 90 % of the characters, line by line; each split encoded as one text."""
    from attnlab.data import Tokenizer, load_tinyshakespeare
    from attnlab.tasks.language_model import split_text

    task = _lm_task(tmp_path, "bpe", "data.tokenizer=bpe", "data.vocab_size=600")
    train_text, val_text = split_text(load_tinyshakespeare(), 0.9)
    before = Tokenizer.train(train_text.splitlines(keepends=True), 600)
    assert task.tokenizer.to_json() == before.to_json()
    assert list(task.train_ids) == before.encode(train_text) and list(task.val_ids) == before.encode(val_text)
