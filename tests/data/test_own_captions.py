"""Captions as JSON lines (``{"image": PATH, "caption": TEXT}``, the path relative to the
``.jsonl``'s folder or absolute) read by the same loader as Flickr8k's ``captions.txt``; a
folder holding ``captions.jsonl`` instead; every bad record named by file and line."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import torch
from PIL import Image

from attnlab.data.caption_set import CaptionSet
from attnlab.data.image_captions import ImageCaptions, captions_file, read_captions


def jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def photos(tmp_path) -> Path:
    """``tmp_path/pics/{red,grey}.png`` and ``tmp_path/elsewhere/blue.png``."""
    (tmp_path / "pics").mkdir()
    (tmp_path / "elsewhere").mkdir()
    Image.new("RGB", (6, 4), (255, 0, 0)).save(tmp_path / "pics" / "red.png")
    Image.new("RGB", (6, 4), (128, 128, 128)).save(tmp_path / "pics" / "grey.png")
    Image.new("RGB", (6, 4), (0, 0, 255)).save(tmp_path / "elsewhere" / "blue.png")
    return tmp_path


def test_jsonl_names_images_relative_to_its_folder_or_absolute(photos):
    records = [{"image": "pics/red.png", "caption": " A red one "},
               {"image": "pics/red.png", "caption": "Red"},
               {"image": str(photos / "elsewhere" / "blue.png"), "caption": "A blue one", "extra": 1}]
    path = jsonl(photos / "captions.jsonl", records)
    assert read_captions(path) == [("pics/red.png", "A red one"), ("pics/red.png", "Red"),
                                   (str(photos / "elsewhere" / "blue.png"), "A blue one")]
    data = ImageCaptions(photos / "elsewhere", path, channels=3)  # the folder does not matter for a .jsonl
    red, blue = photos / "pics" / "red.png", photos / "elsewhere" / "blue.png"
    assert [p for p, _ in data.pairs] == [red, red, blue]
    image, text = data[2]
    assert text == "A blue one" and image.shape == (3, 4, 6)
    assert torch.allclose(image.mean(dim=(1, 2)), torch.tensor([0.0, 0.0, 1.0]))
    packed = photos / "captions.jsonl.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert ImageCaptions(photos, packed, channels=3).pairs == data.pairs


def test_a_folder_with_captions_jsonl_loads_by_default(photos):
    jsonl(photos / "captions.jsonl", [{"image": "pics/grey.png", "caption": "grey"}])
    assert captions_file(photos) == photos / "captions.jsonl"
    images, captions, digits = CaptionSet.read_folder(photos, channels=1, size=8)
    assert images.shape == (1, 1, 8, 8) and captions == ["grey"] and digits is None
    (photos / "captions.txt").write_text("pics/grey.png\tgrey\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds both captions.txt and captions.jsonl; keep one"):
        ImageCaptions(photos)
    with pytest.raises(FileNotFoundError, match=r"pics/captions.txt not found \(nor captions.jsonl\)"):
        ImageCaptions(photos / "pics")


@pytest.mark.parametrize(("record", "message"), [
    ({"caption": "no image"}, r"{path}:2: no field 'image' \(the record has: caption\)"),
    ({"image": "pics/red.png"}, r"{path}:2: no field 'caption' \(the record has: image\)"),
    ({"image": "pics/red.png", "caption": 7}, r"{path}:2: field 'caption' must be a string, got int"),
    ({"image": "pics/red.png", "caption": "  "}, r"{path}:2: the caption is empty"),
])
def test_bad_records_are_named_by_file_and_line(photos, record, message):
    path = jsonl(photos / "captions.jsonl", [{"image": "pics/red.png", "caption": "fine"}, record])
    with pytest.raises(ValueError, match=message.format(path=re.escape(str(path)))):
        ImageCaptions(photos)


def test_a_missing_image_is_named(photos):
    path = jsonl(photos / "captions.jsonl", [{"image": "pics/red.png", "caption": "fine"},
                                             {"image": "pics/ghost.png", "caption": "not there"}])
    expected = f"image {photos / 'pics' / 'ghost.png'} not found (named by {path}:2)"
    with pytest.raises(FileNotFoundError, match=re.escape(expected)):
        ImageCaptions(photos)
    (photos / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no captions"):
        read_captions(photos / "empty.jsonl")
