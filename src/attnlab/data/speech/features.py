"""Log-mel spectrograms with ``torch.stft``: what the listener hears.

Chorowski, Bahdanau, Serdyuk, Cho & Bengio (2015), "Attention-Based Models for Speech
Recognition", feed their encoder 40 mel-scale filterbank energies a 10 ms frame;
Hasegawa-Johnson's ECE 417 Lecture 21 uses the same front end. For a waveform ``x`` of
``T`` samples at ``sample_rate`` Hz:

1. short-time Fourier transform, window ``w`` (periodic Hann, ``win_length`` samples,
   25 ms at 16 kHz), hop ``hop_length`` (10 ms), ``n_fft`` bins, the signal zero-padded by
   ``n_fft // 2`` at both ends (``center``)::

       X[t, k] = Σ_n x[t·hop + n] w[n] e^{-2πi k n / n_fft},   F = 1 + T // hop frames

2. power ``P[t, k] = |X[t, k]|²`` for ``k = 0 .. n_fft // 2``;
3. mel energies ``M[t, m] = Σ_k H[m, k] P[t, k]`` with the triangular filterbank ``H``
   (:func:`mel_filterbank`, ``n_mels`` × ``n_fft // 2 + 1``);
4. ``log(max(M, floor))``: the floor keeps silence finite.

Shapes: waveform ``(T,)`` or ``(B, T)`` → features ``(F, n_mels)`` or ``(B, F, n_mels)``
(time first, as the encoder reads them).

The mel scale is **Slaney's** (the Auditory Toolbox's, librosa's default): linear below 1 kHz,
``mel(f) = 3 f / 200``, logarithmic above, ``mel(f) = 15 + 27 ln(f / 1000) / ln 6.4``; each
triangle is scaled to unit area (``2 / (f_{m+2} - f_m)``, Slaney's normalisation). ``htk=True``
gives HTK's scale, ``mel(f) = 2595 log10(1 + f / 700)``, with the same triangles. Both agree
with librosa's ``filters.mel`` (tested where ``make data-speech`` installed librosa).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from attnlab.validation import check_rank

_LINEAR_STEP = 200.0 / 3  # Hz a mel below 1 kHz (Slaney)
_BREAK_HZ = 1000.0
_BREAK_MEL = _BREAK_HZ / _LINEAR_STEP  # 15 mels
_LOG_STEP = math.log(6.4) / 27.0  # ln(Hz ratio) a mel above 1 kHz (Slaney)


def hz_to_mel(f: Tensor, htk: bool = False) -> Tensor:
    """Frequencies ``f`` (Hz) in mels: Slaney's scale, or HTK's with ``htk``."""
    if htk:
        return 2595.0 * torch.log10(1.0 + f / 700.0)
    linear = f / _LINEAR_STEP
    log = _BREAK_MEL + torch.log(torch.clamp_min(f, _BREAK_HZ) / _BREAK_HZ) / _LOG_STEP
    return torch.where(f >= _BREAK_HZ, log, linear)


def mel_to_hz(m: Tensor, htk: bool = False) -> Tensor:
    """Mels ``m`` in Hz, the inverse of :func:`hz_to_mel`."""
    if htk:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    linear = m * _LINEAR_STEP
    log = _BREAK_HZ * torch.exp(_LOG_STEP * (m - _BREAK_MEL))
    return torch.where(m >= _BREAK_MEL, log, linear)


def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int = 80, f_min: float = 0.0,
                   f_max: float | None = None, htk: bool = False,
                   dtype: torch.dtype = torch.float32) -> Tensor:
    """The triangular mel filterbank ``H`` ``(n_mels, n_fft // 2 + 1)``.

    ``n_mels + 2`` edges ``f_0 < … < f_{n_mels+1}`` are equally spaced in mels from ``f_min``
    to ``f_max`` (default ``sample_rate / 2``); filter ``m`` rises from ``f_m`` to ``f_{m+1}``
    and falls to ``f_{m+2}``, ``H[m, k] = max(0, min((f_k - f_m) / (f_{m+1} - f_m),
    (f_{m+2} - f_k) / (f_{m+2} - f_{m+1})))`` at bin frequency ``f_k = k · sample_rate / n_fft``,
    times ``2 / (f_{m+2} - f_m)`` (unit area). Computed in float64, returned in ``dtype``."""
    f_max = sample_rate / 2 if f_max is None else f_max
    if not 0 <= f_min < f_max <= sample_rate / 2:
        raise ValueError(f"need 0 <= f_min < f_max <= sample_rate / 2 = {sample_rate / 2}, "
                         f"got f_min={f_min}, f_max={f_max}")
    if n_mels < 1 or n_fft < 2:
        raise ValueError(f"n_mels must be >= 1 and n_fft >= 2, got {n_mels} and {n_fft}")
    bins = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    lo, hi = hz_to_mel(torch.tensor([f_min, f_max], dtype=torch.float64), htk)
    edges = mel_to_hz(torch.linspace(float(lo), float(hi), n_mels + 2, dtype=torch.float64), htk)
    widths = edges.diff()  # (n_mels + 1,)
    ramps = edges[:, None] - bins[None, :]  # (n_mels + 2, n_bins)
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    weights = torch.clamp_min(torch.minimum(rising, falling), 0.0)
    weights = weights * (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.to(dtype)


@dataclass(frozen=True)
class LogMel:
    """Log-mel features of ``sample_rate`` audio: ``n_mels`` filters, a ``win_length`` Hann
    window every ``hop_length`` samples, ``n_fft`` bins, ``log(max(M, floor))``. The defaults are
    80 mels, 25 ms windows, a 10 ms hop at 16 kHz."""

    sample_rate: int = 16000
    n_fft: int = 400
    win_length: int = 400
    hop_length: int = 160
    n_mels: int = 80
    f_min: float = 0.0
    f_max: float | None = None
    htk: bool = False
    floor: float = 1e-10

    def __post_init__(self) -> None:
        if not 0 < self.win_length <= self.n_fft or self.hop_length < 1:
            raise ValueError(f"need 0 < win_length <= n_fft and hop_length >= 1, got win_length="
                             f"{self.win_length}, n_fft={self.n_fft}, hop_length={self.hop_length}")
        if self.floor <= 0:
            raise ValueError(f"floor must be > 0 (it comes before the log), got {self.floor}")

    def frames(self, samples: int) -> int:
        """The frames ``F = 1 + T // hop_length`` of ``samples`` samples (centred windows)."""
        return 1 + samples // self.hop_length

    def filterbank(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """This front end's mel filterbank ``(n_mels, n_fft // 2 + 1)``."""
        return mel_filterbank(self.sample_rate, self.n_fft, self.n_mels, self.f_min, self.f_max,
                              self.htk, dtype)

    def power(self, waveform: Tensor) -> Tensor:
        """``|STFT|²`` of ``waveform`` ``(…, T)``: ``(…, F, n_fft // 2 + 1)``."""
        window = torch.hann_window(self.win_length, periodic=True, dtype=waveform.dtype,
                                   device=waveform.device)
        spectrum = torch.stft(waveform, self.n_fft, self.hop_length, self.win_length, window,
                              center=True, pad_mode="constant", return_complex=True)
        return spectrum.abs().square().transpose(-1, -2)

    def mel(self, waveform: Tensor) -> Tensor:
        """Mel energies ``M`` ``(…, F, n_mels)`` of ``waveform`` ``(…, T)``, before the log."""
        return self.power(waveform) @ self.filterbank(waveform.dtype).to(waveform.device).T

    def __call__(self, waveform: Tensor) -> Tensor:
        """Log-mel features ``(F, n_mels)`` of a waveform ``(T,)``, ``(B, F, n_mels)`` of a batch
        ``(B, T)``, in the waveform's floating dtype."""
        check_rank("waveform", waveform, (1, 2), "(T,) or (B, T)")
        if not waveform.is_floating_point():
            raise TypeError(f"waveform must be floating point, got {waveform.dtype}")
        return torch.clamp_min(self.mel(waveform), self.floor).log()
