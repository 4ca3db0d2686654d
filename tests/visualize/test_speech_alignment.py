"""The recognizer's alignment picture: the spectrogram above, each character's weights below
stretched to the frames its keys cover, beside a translation's alignment; a weight matrix of
another shape is refused."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from attnlab.visualize import plot_speech_alignment, plot_speech_beside_translation
from attnlab.visualize.speech import speech_alignment_figure


def test_the_weights_are_stretched_to_the_frames_under_the_spectrogram(tmp_path):
    features = np.random.default_rng(0).standard_normal((37, 10))
    weights = np.eye(3, 5)  # character t on key t
    fig = speech_alignment_figure(features, weights, ["a", " ", "<eos>"], reduction=8)
    top, bottom = fig.axes
    assert top.images[0].get_array().shape == (10, 37)  # channels up, frames across
    stretched = np.asarray(bottom.images[0].get_array())
    assert stretched.shape == (3, 37)
    assert stretched[1, 8:16].tolist() == [1.0] * 8 and stretched[1, :8].sum() == 0
    assert [t.get_text() for t in bottom.get_yticklabels()] == ["a", "␣", "<eos>"]
    path = plot_speech_alignment(features, weights, ["a", " ", "<eos>"], tmp_path / "a.png", reduction=8)
    assert Image.open(path).size[0] > 100


def test_weights_of_another_shape_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"weights must be \(T=2, S\)"):
        plot_speech_alignment(np.zeros((8, 4)), np.zeros((3, 2)), ["a", "b"], tmp_path / "a.png", reduction=4)


def test_the_speech_alignment_is_drawn_beside_a_translation(tmp_path):
    features = np.random.default_rng(1).standard_normal((24, 6))
    translation = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])  # 3 target words over 2 source words
    path = plot_speech_beside_translation(features, np.eye(2, 3), ["a", "<eos>"], reduction=8,
                                          translation=translation, source=["x", "y"],
                                          target=["p", "q", "<eos>"], path=tmp_path / "both.png",
                                          titles=("speech", "translation"))
    image = Image.open(path)
    assert image.size[0] > image.size[1] > 100
    with pytest.raises(ValueError, match=r"weights must be \(T=3, S\)"):
        plot_speech_beside_translation(features, np.eye(2, 3), ["a", "b", "c"], reduction=8,
                                       translation=translation, source=["x", "y"], target=["p", "q", "r"],
                                       path=tmp_path / "bad.png")
