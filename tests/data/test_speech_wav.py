"""WAV files: a round trip through 16-bit PCM, other formats refused naming the file, and the
resampler against the band-limited tone it must reproduce (and scipy's ``signal.resample``
where ``make data-speech`` installed it with librosa)."""

from __future__ import annotations

import wave

import numpy as np
import pytest

from attnlab.data.speech.wav import read_wav, resample, wav_rate, write_wav


def tone(freq: float, rate: int, seconds: float = 0.5) -> np.ndarray:
    t = np.arange(round(rate * seconds)) / rate
    return 0.5 * np.sin(2 * np.pi * freq * t)


def test_a_written_wav_reads_back_to_the_nearest_16_bit_step(tmp_path):
    x = np.random.default_rng(0).uniform(-0.9, 0.9, 1000).astype(np.float32)
    path = write_wav(tmp_path / "a.wav", x, 16000)
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (1, 2, 16000, 1000)
    y = read_wav(path)
    assert y.dtype == np.float32 and y.shape == (1000,)
    assert np.abs(y - x).max() <= 0.5 / 32768 + 1e-7
    assert wav_rate(path) == 16000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_file_at_another_rate_is_resampled_on_reading(tmp_path):
    path = write_wav(tmp_path / "a.wav", tone(440, 22050), 22050)
    y = read_wav(path, sample_rate=16000)
    assert len(y) == 8000
    middle = slice(2000, 6000)  # away from the ends, where the periodic extension wraps
    assert np.abs(y[middle] - tone(440, 16000)[middle]).max() < 2e-3


@pytest.mark.parametrize("channels,width", [(2, 2), (1, 1), (1, 3)])
def test_other_formats_are_refused_naming_the_file(tmp_path, channels, width):
    path = tmp_path / "odd.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(16000)
        w.writeframes(b"\x00" * channels * width * 10)
    for read in (read_wav, wav_rate):
        with pytest.raises(ValueError, match=f"{path}.*16-bit PCM mono"):
            read(path)


def test_a_file_that_is_not_wav_is_refused_naming_it(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("not audio")
    with pytest.raises(ValueError, match=f"{path} is not a PCM WAV file"):
        read_wav(path)


@pytest.mark.parametrize("rate,new_rate", [(22050, 16000), (16000, 22050), (16000, 8000), (8000, 16000)])
def test_a_tone_below_both_nyquists_comes_out_as_that_tone(rate, new_rate):
    y = resample(tone(1000, rate), rate, new_rate)
    expected = tone(1000, new_rate)
    assert len(y) == len(expected)
    assert np.abs(y - expected).max() < 1e-4  # 0.5 s of 1 kHz is whole periods: no edge effect


@pytest.mark.parametrize("n", [100, 101, 2205, 2206])
@pytest.mark.parametrize("rate,new_rate", [(22050, 16000), (16000, 22050), (16000, 8000), (44100, 16000)])
def test_resample_equals_scipy(n, rate, new_rate):
    signal = pytest.importorskip("scipy.signal", reason="scipy comes with librosa: run `make data-speech`")
    x = np.random.default_rng(n).standard_normal(n)
    expected = signal.resample(x, round(n * new_rate / rate))
    np.testing.assert_allclose(resample(x, rate, new_rate), expected, atol=1e-5)
