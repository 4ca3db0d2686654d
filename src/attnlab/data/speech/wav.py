"""WAV files: 16-bit PCM mono read with Python's ``wave`` module, written atomically, resampled.

A waveform is a float32 array of shape ``(samples,)`` in [-1, 1) (16-bit PCM ``s`` read as
``s / 32768``). attnlab reads 16-bit PCM mono WAV only; any other sample width, channel count
or encoding is refused with a one-line error naming the file (convert first, e.g.
``sox in.wav -b 16 -c 1 out.wav``). A file at another sample rate is resampled to the rate
asked for by :func:`resample`: its spectrum cut (or padded with zeros) at the new Nyquist
frequency, the band-limited interpolation of the Fourier series (scipy's ``signal.resample``),
so a tone below both Nyquist frequencies comes out as that tone sampled at the new rate.
"""

from __future__ import annotations

import io
import wave
from pathlib import Path

import numpy as np

from attnlab.atomic import atomic_file
from attnlab.validation import counted

PCM_SCALE = 32768.0
READS = "attnlab reads 16-bit PCM mono WAV (convert with e.g. sox in.wav -b 16 -c 1 out.wav)"


def _open(source: str | Path | io.BytesIO, name: str, *, frames: bool) -> tuple[bytes, int]:
    """The PCM bytes (or ``b""`` without ``frames``) and sample rate of 16-bit mono WAV ``source``."""
    try:
        with wave.open(str(source) if isinstance(source, Path) else source) as w:
            channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
            data = w.readframes(w.getnframes()) if frames else b""
    except (wave.Error, EOFError) as err:
        raise ValueError(f"{name} is not a PCM WAV file ({err}); {READS}") from None
    if width != 2 or channels != 1:
        raise ValueError(f"{name} is {8 * width}-bit with {counted(channels, 'channel')}; {READS}")
    return data, rate


def parse_wav(data: bytes, name: str) -> tuple[np.ndarray, int]:
    """The waveform ``(samples,)`` float32 and the sample rate of WAV bytes; ``name`` names them
    in errors."""
    frames, rate = _open(io.BytesIO(data), name, frames=True)
    return np.frombuffer(frames, dtype="<i2").astype(np.float32) / PCM_SCALE, rate


def read_wav(path: str | Path, sample_rate: int | None = None) -> np.ndarray:
    """The waveform ``(samples,)`` float32 of the 16-bit PCM mono WAV file ``path``, resampled
    to ``sample_rate`` when given and different from the file's."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise FileNotFoundError(f"cannot read the WAV file {path}: {err.strerror}") from None
    samples, rate = parse_wav(data, str(path))
    return samples if sample_rate is None else resample(samples, rate, sample_rate)


def wav_rate(path: str | Path) -> int:
    """The sample rate of the WAV file ``path``, from its header alone; a file that is not
    16-bit PCM mono is refused as :func:`read_wav` refuses it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"WAV file {path} not found")
    return _open(path, str(path), frames=False)[1]


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """``samples`` in [-1, 1) as little-endian int16, rounded and clipped."""
    return np.clip(np.round(np.asarray(samples, np.float64) * PCM_SCALE), -32768, 32767).astype("<i2")


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """``samples`` ``(samples,)`` as the bytes of a 16-bit PCM mono WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(to_pcm16(samples).tobytes())
    return buffer.getvalue()


def write_wav(path: str | Path, samples: np.ndarray, sample_rate: int) -> Path:
    """Write ``samples`` to ``path`` as 16-bit PCM mono WAV, atomically; returns ``path``."""
    with atomic_file(path) as f:
        f.write(wav_bytes(samples, sample_rate))
    return Path(path)


def resample(samples: np.ndarray, rate: int, new_rate: int) -> np.ndarray:
    """``samples`` ``(n,)`` taken at ``rate`` Hz, resampled to ``new_rate`` Hz:
    ``round(n * new_rate / rate)`` samples from the discrete Fourier transform ``X`` of
    ``samples``, cut (or zero-padded) to the new length's bins and inverted, scaled by
    ``new_rate / rate``; an even length's Nyquist bin is doubled (downsampling, +f and -f
    folded) or halved (upsampling, split between them), as scipy's ``signal.resample`` does."""
    if rate <= 0 or new_rate <= 0:
        raise ValueError(f"sample rates must be > 0, got {rate} and {new_rate}")
    x = np.asarray(samples, np.float64)
    if rate == new_rate or len(x) == 0:
        return x.astype(np.float32)
    n = len(x)
    m = max(1, round(n * new_rate / rate))
    spectrum = np.fft.rfft(x)
    bins = m // 2 + 1
    out = np.zeros(bins, np.complex128)
    keep = min(bins, len(spectrum))
    out[:keep] = spectrum[:keep]
    if m < n and m % 2 == 0:  # the new Nyquist bin folds +f and -f together (its real part is kept)
        out[bins - 1] *= 2.0
    elif m > n and n % 2 == 0:  # the old Nyquist bin is split between +f and -f
        out[len(spectrum) - 1] *= 0.5
    return (np.fft.irfft(out, m) * (m / n)).astype(np.float32)
