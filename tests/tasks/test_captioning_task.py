"""The captioning task end to end at a tiny size: scenes composed, written and read back as a
folder, trained, scored (exact match, sacreBLEU, attention on the named digit), drawn,
evaluated again from the checkpoint and used by ``attnlab caption``; a user's folder of photos
through the same path; the attention-in-box measure against a hand computation."""

from __future__ import annotations

import argparse
import json
import math

import pytest
import torch
from PIL import Image

from attnlab.cli.commands import caption as caption_command
from attnlab.data import make_scenes
from attnlab.data.scenes import caption, caption_digits
from attnlab.tasks import EvaluateRequest, train
from attnlab.tasks.captioning import CaptioningTask
from attnlab.tasks.captioning.boxes import box_share, word_boxes
from attnlab.tasks.captioning.recipe import CaptionRecipe
from trained_toys import CAPTION_SCENES, requires_mnist, train_captioner
from trained_toys import caption_recipe as recipe


@requires_mnist
def test_scenes_run_trains_scores_draws_and_evaluates_again(tmp_path, capsys):
    run = train_captioner(tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    assert results["captions"] == CAPTION_SCENES["test_scenes"] and 0.0 <= results["exact_match"] <= 1.0
    assert set(results["exact_match_by_digits"]) <= {"1", "2", "3", "4"}
    assert results["steps"] == 6 and results["attention"] is True
    for picture in results["pictures"]:
        assert Image.open(picture).size[0] > 100
    written = (run / "data" / "test" / "captions.txt").read_text().splitlines()
    assert len(written) == 12
    again = CaptioningTask.evaluate(run / "final", EvaluateRequest())
    for key in ("exact_match", "bleu", "box_attention", "box_area"):
        if isinstance(results.get(key), float) and math.isnan(results[key]):
            assert math.isnan(again[key])
        else:
            assert again[key] == pytest.approx(results[key], abs=1e-9), key  # the same scenes again
    # attnlab caption: a PNG of a test scene and an RGB photo of another size, converted
    rgb = tmp_path / "photo.png"
    Image.new("RGB", (100, 80), (200, 10, 10)).save(rgb)
    scene = run / "data" / "test" / written[0].split("\t")[0]
    args = argparse.Namespace(checkpoint=str(run / "final"), images=[str(scene), str(rgb)],
                              attention=str(tmp_path / "att.png"), beam=1, device="cpu")
    capsys.readouterr()
    assert caption_command(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{scene}\t") and lines[1].startswith(f"{rgb}\t")
    assert (tmp_path / "att.png").is_file()
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    with pytest.raises(ValueError, match="broken.png"):
        caption_command(argparse.Namespace(**{**vars(args), "images": [str(broken)], "attention": None}))


@pytest.mark.parametrize("captions", ["captions.txt", "captions.jsonl"])
def test_a_folder_of_photos_trains_through_the_same_path(tmp_path, captions):
    """A folder of photos with Flickr8k's captions.txt, or captions.jsonl naming images in a
    subfolder; evaluated again from the checkpoint (its recipe's folder, made absolute)."""
    gen = torch.Generator().manual_seed(0)
    words = ["a red square", "a blue square", "two green dots"]
    for split, n in (("train", 12), ("val", 4), ("test", 4)):
        folder = tmp_path / "photos" / split
        (folder / "pics").mkdir(parents=True)
        lines = []
        for i in range(n):
            pixels = (torch.rand(24, 20, 3, generator=gen) * 255).to(torch.uint8).numpy()
            if captions == "captions.txt":
                Image.fromarray(pixels).save(folder / f"img{i}.jpg")
                lines.append(f"img{i}.jpg#0\t{words[i % 3]}\n")
            else:
                Image.fromarray(pixels).save(folder / "pics" / f"img{i}.jpg")
                lines.append(json.dumps({"image": f"pics/img{i}.jpg", "caption": words[i % 3]}) + "\n")
        (folder / captions).write_text("".join(lines))
    run = train(recipe(source="folder", folder=str(tmp_path / "photos"), channels=3, size=32),
                run_dir=tmp_path / "run")
    results = json.loads((run / "results.json").read_text())
    assert results["captions"] == 4 and "exact_match_by_digits" not in results
    assert "box_attention" not in results  # photos have no digit boxes
    again = CaptioningTask.evaluate(run / "final", EvaluateRequest())
    assert again["captions"] == 4 and again["exact_match"] == pytest.approx(results["exact_match"])


def test_box_share_is_the_mass_over_the_box_pixels():
    weights = torch.rand(4, 4, dtype=torch.float64)
    weights /= weights.sum()
    box = (5, 3, 27, 19)  # pixels of a 32 x 32 image; cells are 8 x 8
    expected = 0.0
    for y in range(3, 19):
        for x in range(5, 27):
            expected += float(weights[y // 8, x // 8]) / 64
    assert box_share(weights, box, (32, 32)) == pytest.approx(expected, rel=1e-6)
    uniform = torch.full((4, 4), 1 / 16)
    assert box_share(uniform, box, (32, 32)) == pytest.approx(22 * 16 / 1024)
    assert box_share(uniform, (0, 0, 32, 32), (32, 32)) == pytest.approx(1.0)


@requires_mnist
def test_number_words_map_to_their_digits_boxes():
    for scene in make_scenes("test", 20, seed=3):
        words = caption(scene)
        digits = [{"box": d.box} for d in scene.digits]
        boxes = word_boxes([*words, "<eos>"], digits)
        for t, index in enumerate(caption_digits(scene)):
            assert boxes[t] == (None if index < 0 else scene.digits[index].box)


@pytest.mark.parametrize("data, message", [
    ({"source": "web"}, "data.source"),
    ({"counts": [1, 5]}, "data.counts"),
    ({"source": "folder"}, "data.folder"),
    ({"channels": 3}, "data.channels = 1"),
])
def test_bad_recipes_are_named(data, message):
    with pytest.raises(ValueError, match=message):
        CaptionRecipe.from_dict(recipe(**data))


@requires_mnist
def test_a_tiny_captioner_overfits_eight_scenes():
    from attnlab.data.caption_set import CaptionSet
    from attnlab.data.scenes import caption_text
    from attnlab.data.tokenizers import WordTokenizer
    from attnlab.models import ShowAttendTell, ShowAttendTellConfig
    from attnlab.pipelines import CaptioningPipeline
    from attnlab.tasks.captioning import caption_loss

    torch.manual_seed(0)
    scenes = make_scenes("train", 8, seed=5, counts=(1, 2, 3))
    texts = [caption_text(caption(s)) for s in scenes]
    tok = WordTokenizer.train(texts)
    data = CaptionSet(torch.stack([s.image for s in scenes]), texts, tok)
    model = ShowAttendTell(ShowAttendTellConfig(
        vocab_size=tok.vocab_size, conv_channels=(8, 16, 16), feature_dim=32, embed_dim=16,
        hidden_dim=64, attention_dim=32, dropout=0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch = data.collate(range(8))
    for _ in range(150):
        loss, words = caption_loss(model, batch, tok.pad_id)
        optimizer.zero_grad()
        (loss / words).backward()
        optimizer.step()
    model.eval()
    captioner = CaptioningPipeline(model, tok)
    assert captioner.caption(data.images, captioner.settings(beam_size=1)) == texts


@requires_mnist
def test_the_scenes_preset_and_its_folder_named_as_your_own_give_the_same_batches(tmp_path):
    """The MNIST scenes preset is a folder of images + captions.txt read by the folder reader:
    naming that folder as a user's (``data.source = "folder"``) gives the same tokenizer and
    the same training batches."""
    preset = CaptioningTask(CaptionRecipe.from_dict(recipe(**CAPTION_SCENES)), tmp_path / "preset")
    preset.prepare(None)
    folder = recipe(source="folder", folder=str(tmp_path / "preset" / "data"), channels=1, size=64)
    own = CaptioningTask(CaptionRecipe.from_dict(folder), tmp_path / "own")
    own.prepare(None)
    assert own.tok.to_json() == preset.tok.to_json()
    batches = list(zip(preset.train_data()(3), own.train_data()(3), strict=True))
    assert len(batches) == 48 // 8
    for a, b in batches:
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
