"""The speech recognition task (Chorowski et al. 2015, "Attention-Based Models for Speech
Recognition"; Hasegawa-Johnson, ECE 417 Lecture 21): :mod:`.task` trains, decodes and scores
by CER and WER; :mod:`.recipe` maps its TOML tables onto dataclasses."""

from attnlab.tasks.speech.recipe import SpeechData, SpeechEval, SpeechOptim, SpeechRecipe
from attnlab.tasks.speech.task import ALPHABET, SpeechTask, error_rates, speech_corpus, speech_loss

__all__ = [
    "ALPHABET",
    "SpeechData",
    "SpeechEval",
    "SpeechOptim",
    "SpeechRecipe",
    "SpeechTask",
    "error_rates",
    "speech_corpus",
    "speech_loss",
]
