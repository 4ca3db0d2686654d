"""The speech task end to end at a tiny size, on utterances eSpeak NG speaks (skipped without it:
``make data-speech``): a tiny recognizer overfits three utterances to CER 0, its checkpoint is
read back and transcribes the same WAV files through ``attnlab transcribe`` (with the alignment
picture), ``attnlab evaluate`` scores it again as the report did, and bad recipes are named."""

from __future__ import annotations

import json
import shutil

import pytest
from PIL import Image

from attnlab.cli.main import main
from attnlab.data.speech import SyntheticSpeechConfig, synthetic_speech
from attnlab.data.speech.espeak import INSTALL_COMMAND
from attnlab.data.tokenizers import CharTokenizer
from attnlab.evaluation import cer
from attnlab.pipelines import SpeechPipeline
from attnlab.tasks import EvaluateRequest, train
from attnlab.tasks.speech import ALPHABET, SpeechRecipe, SpeechTask

needs_espeak = pytest.mark.skipif(
    shutil.which("espeak-ng") is None,
    reason=f"espeak-ng is not installed: run `make data-speech` ({INSTALL_COMMAND})",
)
CORPUS = {"text": "digits", "sizes": [3, 1, 1], "held_out_variants": 1, "snr_db": [], "corpus_seed": 1}
LAS = {"type": "listen_attend_spell", "encoder_dim": 32, "embed_dim": 16, "hidden_dim": 64,
       "attention_dim": 32, "listener_layers": 3, "dropout": 0.0, "score": "location",
       "location_filters": 4, "location_kernel": 5}


def recipe(steps: int, model: dict | None = None, **data) -> dict:
    return {
        "task": "speech",
        "data": {**CORPUS, "n_mels": 20, "batch_size": 3, "freq_masks": 0, "time_masks": 0, **data},
        "model": model or LAS,
        "optim": {"lr": 3e-3, "warmup": 10, "min_lr": 3e-3, "label_smoothing": 0.0},
        "train": {"max_steps": steps, "eval_every": 0, "save_every": 0, "log_every": 0, "progress": False},
        "eval": {"beam_size": 2, "val_limit": 1, "sample_count": 1},
    }


def train_and_transcribe(tmp_path, capsys, steps: int) -> tuple[list[str], list[str]]:
    """Train a tiny recognizer ``steps`` steps on 3 spoken utterances; check its report, ``attnlab
    transcribe`` and ``evaluate`` on it; return the training utterances' texts and its transcripts."""
    raw = recipe(steps)
    raw["optim"]["warmup"] = min(10, steps - 1)
    run = train(raw, run_dir=tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == steps and results["model_type"] == "listen_attend_spell"
    assert set(results) >= {"valid", "test"} and 0.0 <= results["test"]["cer"]
    assert Image.open(results["alignment"]).size[0] > 100
    corpus = synthetic_speech(SyntheticSpeechConfig(text="digits", sizes=(3, 1, 1), held_out_variants=1,
                                                    snr_db=None, seed=1))
    wavs, texts = [str(u.path) for u in corpus["train"]], [u.text for u in corpus["train"]]
    recognizer = SpeechPipeline.from_checkpoint(run / "final")
    heard = recognizer.transcribe(wavs, recognizer.settings(beam_size=1))
    capsys.readouterr()
    picture = tmp_path / "alignment.png"
    assert main(["transcribe", str(run / "final"), *wavs, "--beam", "1", "--attention", str(picture)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [f"{w}\t{t}" for w, t in zip(wavs, heard, strict=True)]
    assert lines[3] == f"alignment picture: {picture}" and Image.open(picture).size[0] > 100
    again = SpeechTask.evaluate(run / "final", EvaluateRequest())
    assert again["cer"] == results["test"]["cer"] and again["wer"] == results["test"]["wer"]
    assert main(["evaluate", str(run / "final"), "--split", "valid"]) == 0
    assert f"valid (beam 2, 1 utterances): {results['valid']['cer_detail']}" in capsys.readouterr().out
    return texts, heard


@needs_espeak
def test_a_trained_recognizer_transcribes_through_the_cli_and_evaluates_again(tmp_path, capsys):
    train_and_transcribe(tmp_path, capsys, steps=4)


@needs_espeak
@pytest.mark.slow
def test_a_tiny_recognizer_overfits_three_utterances_and_transcribes_them_again(tmp_path, capsys):
    texts, heard = train_and_transcribe(tmp_path, capsys, steps=200)
    assert cer(heard, texts).rate == 0.0  # the training utterances, overfit


@needs_espeak
def test_the_transformer_trains_through_the_same_task(tmp_path):
    model = {"type": "speech_transformer", "d_model": 16, "num_heads": 2, "d_ff": 32, "num_encoder_layers": 1,
             "num_decoder_layers": 1, "conv_channels": 4}
    raw = recipe(2, model, freq_masks=1, time_masks=1)
    raw["optim"]["warmup"] = 1
    run = train(raw, run_dir=tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    assert results["model_type"] == "speech_transformer" and results["steps"] == 2


@needs_espeak
def test_prepare_speaks_the_corpus_once(tmp_path):
    raw = recipe(50, text="digits", corpus_seed=7)
    first = SpeechTask.prepare_data(raw, None)
    assert first[0].startswith("spoke 5 utterances of 5 into ")
    assert first[1] == "train: 3 utterances, 3 texts, 3 voices"
    assert SpeechTask.prepare_data(raw, None)[0].startswith("spoke 0 utterances of 5 ")


@pytest.mark.parametrize("change, message", [
    ({"data": {"source": "folder"}}, "data.folder must name a folder"),
    ({"data": {"snr_db": [10.0]}}, r"data.snr_db must be \[low, high\]"),
    ({"data": {"time_ratio": 2.0}}, "time_ratio"),
    ({"model": {"n_mels": 40}}, "set from the data"),
    ({"model": {"type": "transformer"}}, "type"),
    ({"train": {"max_steps": None}}, "max_steps"),
    ({"train": {"metric": "val_bleu"}}, "train.metric"),
])
def test_bad_recipes_are_named(change, message):
    raw = recipe(50)
    for table, values in change.items():
        raw[table] = {**raw[table], **values}
    raw["train"] = {k: v for k, v in raw["train"].items() if v is not None}
    with pytest.raises(ValueError, match=message):
        SpeechRecipe.from_dict(raw)


def test_transcribe_refuses_another_familys_checkpoint_and_a_file_that_is_not_a_wav(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "transformer"}))
    assert main(["transcribe", str(tmp_path), "a.wav"]) == 2
    assert ("checkpoint" in (err := capsys.readouterr().err) and "'transformer'; transcribe takes "
            "listen_attend_spell, speech_transformer checkpoints" in err)
    not_wav = tmp_path / "notes.wav"
    not_wav.write_text("hello")
    SpeechPipeline(_tiny_recognizer(), CharTokenizer(ALPHABET)).save(tmp_path / "ckpt")
    assert main(["transcribe", str(tmp_path / "ckpt"), str(not_wav)]) == 2
    assert f"{not_wav} is not a PCM WAV file" in capsys.readouterr().err


def _tiny_recognizer():
    from attnlab.models import ListenAttendSpell, ListenAttendSpellConfig

    size = CharTokenizer(ALPHABET).vocab_size
    return ListenAttendSpell(ListenAttendSpellConfig(size, size, n_mels=20, embed_dim=8, encoder_dim=8,
                                                     hidden_dim=16, attention_dim=8, listener_layers=2))
