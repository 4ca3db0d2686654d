"""eSpeak NG, the formant synthesizer that speaks the synthetic corpus (Debian's ``espeak-ng``).

No recorded speech corpus can be had here, so attnlab's speech task is synthetic: sentences
spoken by eSpeak NG in many voices. A voice is an English accent and a variant, written
``ACCENT+VARIANT`` as eSpeak NG takes it (``en-us+f2``: American English, the second female
variant); :data:`ACCENTS` × :data:`VARIANTS` give 84 voices. The variant sets the voice's
character (formants, breathiness, pitch range), so a variant held out of training is a
speaker the recognizer never heard. Each utterance also has its own rate (words a minute,
eSpeak NG's ``-s``) and pitch (0-99, ``-p``). eSpeak NG is deterministic: the same text, voice,
rate and pitch give the same samples (22,050 Hz, 16-bit mono).

attnlab never installs it: ``make data-speech`` does (as root). Without it, synthesizing
raises ``FileNotFoundError`` naming that target; a corpus already in the cache is read
without it.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np

from attnlab.data.speech.wav import parse_wav

ESPEAK = "espeak-ng"
INSTALL_COMMAND = "make data-speech"  # installs Debian's espeak-ng (as root) and the speech extra
ACCENTS = ("en", "en-us", "en-029", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd")
VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5")
ESPEAK_RATE = 22050  # eSpeak NG's output sample rate


def espeak_path() -> str:
    """The ``espeak-ng`` executable, else ``FileNotFoundError`` naming ``make data-speech``."""
    found = shutil.which(ESPEAK)
    if found is None:
        raise FileNotFoundError(
            f"{ESPEAK} is not installed: run `{INSTALL_COMMAND}` (as root; Debian's espeak-ng) to "
            "synthesize the speech corpus, or read your own WAV files (attnlab.data.speech.speech_folder)"
        )
    return found


def voice_name(accent: str, variant: str) -> str:
    """eSpeak NG's name of ``accent`` spoken in ``variant``: ``en-us+f2``."""
    return f"{accent}+{variant}"


def variant_of(voice: str) -> str:
    """The variant of an eSpeak NG voice name (``f2`` of ``en-us+f2``)."""
    return voice.partition("+")[2]


def speak(text: str, voice: str, rate: int, pitch: int) -> tuple[np.ndarray, int]:
    """``text`` spoken by eSpeak NG in ``voice`` at ``rate`` words a minute and ``pitch``
    (0-99): the waveform ``(samples,)`` float32 and its sample rate (22,050 Hz). The text goes
    in on standard input, so one that starts with ``-`` is spoken, not read as an option."""
    if not 80 <= rate <= 450:
        raise ValueError(f"rate must be 80-450 words a minute (eSpeak NG's range), got {rate}")
    if not 0 <= pitch <= 99:
        raise ValueError(f"pitch must be 0-99, got {pitch}")
    command = [espeak_path(), "-v", voice, "-s", str(int(rate)), "-p", str(int(pitch)), "--stdin", "--stdout"]
    done = subprocess.run(command, input=text.encode("utf-8"), capture_output=True, check=False)
    if done.returncode != 0 or not done.stdout:
        error = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
        raise RuntimeError(f"{ESPEAK} -v {voice} failed on {text[:40]!r}: {error}")
    return parse_wav(done.stdout, f"{ESPEAK}'s output for voice {voice}")
