"""MNIST source digits, composed scenes and their caption grammar, and the folder-of-images
loader: the IDX reader against the published label counts, the split kept apart, scenes
deterministic per seed with boxes that stay on the canvas and apart, caption tokens that name
the right digit, and every bad input refused with the file named."""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import pytest
import torch
from PIL import Image

from attnlab.data.corpora import data_dir
from attnlab.data.image_captions import (
    ImageCaptions,
    load_image,
    load_image_captions,
    read_captions,
    write_scene_folder,
)
from attnlab.data.mnist import (
    IMAGES_FILE,
    LABELS_FILE,
    SPLITS,
    read_idx,
    read_mnist,
    source_digits,
    split_indices,
)
from attnlab.data.scenes import (
    NUMBER_WORDS,
    SIZE_WORDS,
    caption,
    caption_digits,
    caption_text,
    compose_scene,
    digit_slots,
    make_scenes,
    reading_order,
    split_caption,
)

REAL_MNIST = data_dir() / "mnist"
requires_mnist = pytest.mark.skipif(
    not (REAL_MNIST / IMAGES_FILE).is_file(),
    reason=f"the MNIST test set is not in {REAL_MNIST} (set ATTNLAB_DATA to a folder holding mnist/)",
)
README_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def idx_bytes(data: torch.Tensor) -> bytes:
    """An IDX file of unsigned bytes: magic 0x0000 08 ndim, then each dimension big-endian."""
    header = bytes([0, 0, 0x08, data.dim()]) + b"".join(int(n).to_bytes(4, "big") for n in data.shape)
    return header + data.to(torch.uint8).contiguous().numpy().tobytes()


@pytest.fixture(scope="module")
def fake_data(tmp_path_factory) -> Path:
    """A data dir whose mnist/ holds 10,000 synthetic digits: bars of random size and label i % 10."""
    root = tmp_path_factory.mktemp("data")
    gen = torch.Generator().manual_seed(0)
    images = torch.zeros(10_000, 28, 28, dtype=torch.uint8)
    hw = torch.randint(4, 21, (10_000, 2), generator=gen)
    for i, (h, w) in enumerate(hw.tolist()):
        images[i, 4:4 + h, 4:4 + w] = 255
    (root / "mnist").mkdir()
    (root / "mnist" / IMAGES_FILE).write_bytes(gzip.compress(idx_bytes(images), compresslevel=1))
    (root / "mnist" / LABELS_FILE).write_bytes(gzip.compress(idx_bytes(torch.arange(10_000) % 10)))
    return root


def boxes_apart(a, b, gap: int) -> bool:
    return a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1] or b[3] + gap <= a[1]


# --- MNIST and the split ------------------------------------------------------------------


@requires_mnist
def test_idx_reader_matches_the_readme_counts():
    images, labels = read_mnist()
    assert images.shape == (10_000, 28, 28) and images.dtype == torch.uint8
    assert labels.shape == (10_000,)
    assert torch.bincount(labels, minlength=10).tolist() == README_COUNTS
    assert int(images.max()) == 255 and int(images.min()) == 0


def test_splits_are_disjoint_cover_every_digit_and_take_both_halves():
    parts = {name: set(split_indices(name).tolist()) for name in SPLITS}
    assert sum(len(p) for p in parts.values()) == 10_000
    assert set().union(*parts.values()) == set(range(10_000))
    for name, part in parts.items():
        first = sum(i < 5000 for i in part)
        assert first == len(part) - first, f"{name} takes the two halves unequally"
    # the validation block stands between train and test in each half
    for lo in (0, 5000):
        train = max(i for i in parts["train"] if lo <= i < lo + 5000)
        test = min(i for i in parts["test"] if lo <= i < lo + 5000)
        assert test - train > 500


def test_source_digits_are_the_split_rows(fake_data):
    images, labels = read_mnist(fake_data)
    test = source_digits("test", fake_data)
    assert torch.equal(test.indices, split_indices("test"))
    assert torch.equal(test.images, images[test.indices]) and torch.equal(test.labels, labels[test.indices])
    with pytest.raises(ValueError, match="split must be one of train, validation, test, got 'dev'"):
        source_digits("dev", fake_data)


def test_missing_mnist_dir_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "mnist"))):
        read_mnist(tmp_path)
    (tmp_path / "mnist").mkdir()
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "mnist" / IMAGES_FILE))):
        read_mnist(tmp_path)


def test_corrupt_idx_files_name_the_file(tmp_path, fake_data):
    good = (fake_data / "mnist" / LABELS_FILE).read_bytes()
    cases = {
        "truncated.gz": good[: len(good) // 2],  # a cut gzip stream
        "short.gz": gzip.compress(gzip.decompress(good)[:-10]),  # fewer bytes than the header says
        "magic.gz": gzip.compress(b"\x01\x02\x08\x01" + gzip.decompress(good)[4:]),
        "type.gz": gzip.compress(b"\x00\x00\x0d\x01" + gzip.decompress(good)[4:]),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=name):
            read_idx(tmp_path / name)
    mnist = tmp_path / "data" / "mnist"
    mnist.mkdir(parents=True)
    (mnist / IMAGES_FILE).write_bytes((fake_data / "mnist" / IMAGES_FILE).read_bytes())
    (mnist / LABELS_FILE).write_bytes(gzip.compress(idx_bytes(torch.zeros(10, 28))))
    with pytest.raises(ValueError, match=LABELS_FILE):
        read_mnist(tmp_path / "data")


# --- scenes -------------------------------------------------------------------------------


def test_scenes_are_deterministic_per_seed(fake_data):
    a = make_scenes("train", 30, seed=7, data_dir=fake_data)
    b = make_scenes("train", 30, seed=7, data_dir=fake_data)
    assert [s.digits for s in a] == [s.digits for s in b]
    assert all(torch.equal(x.image, y.image) for x, y in zip(a, b, strict=True))
    c = make_scenes("train", 30, seed=8, data_dir=fake_data)
    assert [s.digits for s in a] != [s.digits for s in c]


@pytest.mark.parametrize("split", list(SPLITS))
def test_scenes_use_only_their_splits_digits(fake_data, split):
    own = set(split_indices(split).tolist())
    others = set(range(10_000)) - own
    images, labels = read_mnist(fake_data)
    for scene in make_scenes(split, 150, seed=0, data_dir=fake_data):
        sources = [d.source for d in scene.digits]
        assert set(sources) <= own and not set(sources) & others
        assert len(set(sources)) == len(sources)  # a digit appears once in a scene
        assert [d.label for d in scene.digits] == labels[sources].tolist()


@requires_mnist
def test_real_test_scenes_use_only_test_handwriting():
    test, train = set(split_indices("test").tolist()), set(split_indices("train").tolist())
    for scene in make_scenes("test", 40, seed=1):
        for d in scene.digits:
            assert d.source in test and d.source not in train
            x0, y0, x1, y1 = d.box
            assert scene.image[0, y0:y1, x0:x1].sum() > 0  # its ink is in its box


def test_boxes_stay_on_the_canvas_apart_and_hold_all_the_ink(fake_data):
    scenes = make_scenes("validation", 200, seed=3, data_dir=fake_data, canvas=64)
    assert {len(s.digits) for s in scenes} == {1, 2, 3, 4}
    for scene in scenes:
        assert scene.image.shape == (1, 64, 64) and scene.image.dtype == torch.float32
        assert 0.0 <= float(scene.image.min()) and float(scene.image.max()) <= 1.0
        outside = scene.image[0].clone()
        for i, d in enumerate(scene.digits):
            x0, y0, x1, y1 = d.box
            assert 0 <= x0 < x1 <= 64 and 0 <= y0 < y1 <= 64
            assert max(x1 - x0, y1 - y0) == (28 if d.size == "large" else 20)
            outside[y0:y1, x0:x1] = 0
            for e in scene.digits[i + 1:]:
                assert boxes_apart(d.box, e.box, gap=2), (d.box, e.box)
        assert float(outside.abs().max()) == 0.0


def test_caption_tokens_name_the_right_digit(fake_data):
    for scene in make_scenes("train", 200, seed=5, data_dir=fake_data):
        tokens, owners = caption(scene), caption_digits(scene)
        assert len(tokens) == len(owners)
        for i, d in enumerate(scene.digits):
            named = [t for t, o in zip(tokens, owners, strict=True) if o == i]
            assert [t for t in named if t in NUMBER_WORDS] == [NUMBER_WORDS[d.label]]
            sizes = [t for t in named if t in SIZE_WORDS]
            assert sizes == ([d.size] if len(scene.digits) <= 2 else [])
        order = reading_order(scene)
        centres = [scene.digits[i].centre for i in order]
        if "above" in tokens:
            assert centres[0][1] < centres[1][1]
        elif len(order) > 1:
            assert [x for x, _ in centres] == sorted(x for x, _ in centres)
        assert split_caption(caption_text(tokens)) == tokens


def test_caption_grammar_examples():
    gen = torch.Generator().manual_seed(0)
    digits = torch.zeros(4, 28, 28, dtype=torch.uint8)
    digits[:, 4:24, 10:18] = 255
    labels = torch.tensor([4, 9, 1, 7])
    one = compose_scene(digits[:1], labels[:1], 1, gen)
    assert caption_text(caption(one)) == f"a {one.digits[0].size} four"
    three = compose_scene(digits[:3], labels[:3], 3, gen)
    text = caption_text(caption(three))
    assert text.startswith("three digits: ") and text.endswith(", from left to right")
    assert sorted(text[len("three digits: "):-len(", from left to right")].replace(" and", ",")
                  .split(", ")) == ["four", "nine", "one"]
    # a generated caption is parsed by its structure: the count word names no digit
    assert digit_slots(split_caption("four digits: one, one, two and nine, from left to right")) == [
        -1, -1, -1, 0, -1, 1, -1, 2, -1, 3, -1, -1, -1, -1, -1]
    assert digit_slots("a small seven left of a large two".split()) == [-1, 0, 0, -1, -1, -1, 1, 1]


@pytest.mark.parametrize("kwargs, message", [
    ({"count": 5}, "count must be one of 1, 2, 3, 4, got 5"),
    ({"count": 0}, "count must be one of 1, 2, 3, 4, got 0"),
    ({"count": 4, "canvas": 50}, "canvas=50 is too small for 4 large digits"),
    ({"count": 1, "canvas": 24}, "canvas=24 is too small for a large digit"),
    ({"count": 2, "small": 28}, "small must be less than large, got small=28 and large=28"),
])
def test_impossible_scenes_are_refused(kwargs, message):
    args = {"count": 2, "canvas": 64, **kwargs}
    digits, labels = torch.full((8, 28, 28), 255, dtype=torch.uint8), torch.arange(8)
    count, canvas = args.pop("count"), args.pop("canvas")
    with pytest.raises(ValueError, match=message):
        compose_scene(digits, labels, count, torch.Generator(), canvas, **args)


def test_compose_scene_refuses_float_digits():
    with pytest.raises(ValueError, match="digits must be uint8"):
        compose_scene(torch.ones(4, 28, 28), torch.arange(4), 1, torch.Generator())


# --- a folder of images and its captions --------------------------------------------------


def test_flickr_style_folder_round_trips(tmp_path):
    colours = {"red.jpg": (255, 0, 0), "grey.png": (128, 128, 128)}
    for name, colour in colours.items():
        Image.new("RGB", (12, 8), colour).save(tmp_path / name, quality=100)
    lines = ["red.jpg#0\tA red square .", "red.jpg#1\tSomething red", "", "grey.png\tA grey one"]
    (tmp_path / "captions.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read_captions(tmp_path / "captions.txt") == [
        ("red.jpg", "A red square ."), ("red.jpg", "Something red"), ("grey.png", "A grey one")]
    pairs = load_image_captions(tmp_path, channels=3)
    assert [c for _, c in pairs] == ["A red square .", "Something red", "A grey one"]
    red, grey = pairs[0][0], pairs[2][0]
    assert red.shape == (3, 8, 12) and red.dtype == torch.float32
    assert torch.allclose(red.mean(dim=(1, 2)), torch.tensor([1.0, 0.0, 0.0]), atol=0.02)
    assert torch.allclose(grey, torch.full_like(grey, 128 / 255))
    small = ImageCaptions(tmp_path, channels=1, size=(5, 6))[2][0]
    assert small.shape == (1, 5, 6) and 0.0 <= float(small.min()) <= float(small.max()) <= 1.0


def test_scene_folder_loads_through_the_same_path(tmp_path, fake_data):
    scenes = make_scenes("test", 5, seed=2, data_dir=fake_data)
    folder = write_scene_folder(scenes, tmp_path / "scenes")
    data = ImageCaptions(folder, channels=1, size=64)
    assert len(data) == 5
    for scene, (image, text) in zip(scenes, (data[i] for i in range(5)), strict=True):
        assert image.shape == (1, 64, 64)
        assert torch.allclose(image, (scene.image * 255).round() / 255, atol=1e-6)
        assert split_caption(text) == caption(scene)


def test_bad_files_are_named(tmp_path):
    Image.new("L", (4, 4)).save(tmp_path / "ok.png")
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    (tmp_path / "notes.jpg").write_text("just text", encoding="utf-8")
    for name in ("broken.png", "notes.jpg"):
        with pytest.raises(ValueError, match=re.escape(f"{name}: not a readable image")):
            load_image(tmp_path / name)
    Image.new("I;16", (4, 4)).save(tmp_path / "deep.png")
    with pytest.raises(ValueError, match=re.escape("deep.png: image mode I;16")):
        load_image(tmp_path / "deep.png")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"captions file {empty} holds no captions")):
        ImageCaptions(tmp_path, empty)
    missing = tmp_path / "missing.txt"
    missing.write_text("ok.png\tfine\nghost.png\tnot there\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=re.escape(f"image {tmp_path / 'ghost.png'} not found")):
        ImageCaptions(tmp_path, missing)
    untabbed = tmp_path / "untabbed.txt"
    untabbed.write_text("ok.png a caption without a tab\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{untabbed}:1: expected IMAGE<TAB>CAPTION")):
        read_captions(untabbed)
    with pytest.raises(ValueError, match="channels must be one of 1, 3, got 4"):
        load_image(tmp_path / "ok.png", channels=4)
    bad = ImageCaptions(tmp_path, _write(tmp_path / "bad.txt", "broken.png\tx\n"))
    with pytest.raises(ValueError, match="broken.png"):
        bad[0]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_data_dir_env_is_what_the_reader_uses(monkeypatch, fake_data):
    monkeypatch.setenv("ATTNLAB_DATA", os.fspath(fake_data))
    assert read_mnist()[0].shape == (10_000, 28, 28)
