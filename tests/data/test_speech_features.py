"""Log-mel features: the filterbank and the features against librosa (``make data-speech``),
the whole pipeline against a float64 recomputation with an explicit DFT (no ``torch.stft``),
the mel scales' anchor points, shapes, and mean/variance normalisation's properties."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.data.speech.espeak import INSTALL_COMMAND
from attnlab.data.speech.features import LogMel, hz_to_mel, mel_filterbank, mel_to_hz
from attnlab.data.speech.normalize import FeatureStats, utterance_normalize


def librosa():
    return pytest.importorskip("librosa", reason=f"librosa is not installed: run `{INSTALL_COMMAND}`")


def waveform(seconds: float = 1.0, rate: int = 16000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * rate)) / rate
    return 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(len(t))


@pytest.mark.parametrize("htk", [False, True])
@pytest.mark.parametrize("rate,n_fft,n_mels,f_min,f_max", [
    (16000, 400, 80, 0.0, None), (16000, 512, 40, 0.0, None), (22050, 1024, 128, 50.0, 8000.0)])
def test_the_filterbank_equals_librosas(htk, rate, n_fft, n_mels, f_min, f_max):
    expected = librosa().filters.mel(sr=rate, n_fft=n_fft, n_mels=n_mels, fmin=f_min, fmax=f_max,
                                     htk=htk, norm="slaney", dtype=np.float64)
    got = mel_filterbank(rate, n_fft, n_mels, f_min, f_max, htk, torch.float64).numpy()
    assert got.shape == (n_mels, n_fft // 2 + 1)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("htk", [False, True])
def test_log_mel_equals_librosas_melspectrogram(htk):
    x = waveform()
    front = LogMel(htk=htk)
    mel = librosa().feature.melspectrogram(y=x, sr=16000, n_fft=400, hop_length=160, win_length=400,
                                           window="hann", center=True, pad_mode="constant", power=2.0,
                                           n_mels=80, htk=htk)
    expected = np.log(np.maximum(mel, front.floor)).T
    got = front(torch.from_numpy(x).float()).numpy()
    assert got.shape == expected.shape == (101, 80)
    np.testing.assert_allclose(got, expected, atol=2e-3)


def log_mel_float64(x: np.ndarray, front: LogMel) -> np.ndarray:
    """The module docstring's equations in float64 numpy: frames, Hann window, a DFT matrix."""
    half = front.n_fft // 2
    padded = np.concatenate([np.zeros(half), x, np.zeros(half)])
    n = np.arange(front.win_length)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * n / front.win_length)  # periodic Hann
    offset = (front.n_fft - front.win_length) // 2
    frames = np.stack([padded[t * front.hop_length: t * front.hop_length + front.n_fft]
                       for t in range(front.frames(len(x)))])
    windowed = frames[:, offset: offset + front.win_length] * window
    k = np.arange(half + 1)
    dft = np.exp(-2j * np.pi * np.outer(n + offset, k) / front.n_fft)
    power = np.abs(windowed @ dft) ** 2
    mel = power @ front.filterbank(torch.float64).numpy().T
    return np.log(np.maximum(mel, front.floor))


@pytest.mark.parametrize("front", [LogMel(), LogMel(n_fft=512, win_length=400, n_mels=40, htk=True)])
def test_log_mel_equals_its_float64_recomputation(front):
    x = waveform(0.5, seed=1)
    expected = log_mel_float64(x, front)
    np.testing.assert_allclose(front(torch.from_numpy(x)).numpy(), expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(front(torch.from_numpy(x).float()).numpy(), expected, atol=1e-3)


def test_shapes_batch_and_floor():
    front = LogMel()
    x = torch.from_numpy(waveform(0.37)).float()
    single = front(x)
    assert single.shape == (front.frames(len(x)), 80) == (1 + len(x) // 160, 80)
    batch = front(torch.stack([x, 0.5 * x]))
    assert batch.shape == (2, *single.shape)
    torch.testing.assert_close(batch[0], single, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(batch[1], single + 2 * np.log(0.5), rtol=1e-5, atol=1e-3)  # power scales
    assert torch.equal(front(torch.zeros(1600)), torch.full((11, 80), np.log(front.floor)))
    with pytest.raises(ValueError, match="waveform must have 1 or 2 dimensions"):
        front(torch.zeros(1, 1, 1600))
    with pytest.raises(ValueError, match="floor must be > 0"):
        LogMel(floor=0.0)


def test_the_mel_scales_anchor_points():
    f = torch.tensor([0.0, 500.0, 1000.0, 6400.0, 8000.0], dtype=torch.float64)
    slaney = hz_to_mel(f)
    torch.testing.assert_close(slaney[:4], torch.tensor([0.0, 7.5, 15.0, 42.0], dtype=torch.float64))
    torch.testing.assert_close(hz_to_mel(torch.tensor([700.0], dtype=torch.float64), htk=True),
                               torch.tensor([2595 * np.log10(2)], dtype=torch.float64))
    for htk in (False, True):
        torch.testing.assert_close(mel_to_hz(hz_to_mel(f, htk), htk), f)


def test_utterance_normalisation_gives_mean_zero_variance_one():
    x = torch.randn(50, 8, dtype=torch.float64) * 3 + 5
    y = utterance_normalize(x, eps=0.0)
    torch.testing.assert_close(y.mean(0), torch.zeros(8, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(y.var(0, unbiased=False), torch.ones(8, dtype=torch.float64))
    torch.testing.assert_close(utterance_normalize(torch.stack([x, 2 * x]))[1], utterance_normalize(2 * x))


def test_global_statistics_are_those_of_all_frames_in_any_order():
    parts = [torch.randn(n, 6) * 2 + 1 for n in (7, 30, 1)]
    stats = FeatureStats.fit(parts)
    every = torch.cat(parts).double()
    torch.testing.assert_close(stats.mean, every.mean(0))
    torch.testing.assert_close(stats.var, every.var(0, unbiased=False))
    assert stats.frames == 38
    reordered = FeatureStats.fit(reversed(parts))
    torch.testing.assert_close(reordered.mean, stats.mean)
    torch.testing.assert_close(FeatureStats.from_state_dict(stats.state_dict()).var, stats.var)
    y = stats(torch.cat(parts), eps=0.0).double()
    torch.testing.assert_close(y.mean(0), torch.zeros(6, dtype=torch.float64), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="features have 5 channels but the statistics have 6"):
        stats(torch.zeros(3, 5))
    with pytest.raises(ValueError, match="at least one frame"):
        FeatureStats.fit([])
