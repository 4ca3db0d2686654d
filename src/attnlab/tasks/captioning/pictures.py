"""The captioner's pictures after training: the deck's figure for the first test scenes and a
"mistakes" page (Xu et al. 2015, "Show, Attend and Tell", Figures 3 and 5: where the model
looked when it was right, and when it was wrong)."""

from __future__ import annotations

from pathlib import Path

from attnlab.data.caption_set import CaptionSet
from attnlab.pipelines import CaptioningPipeline
from attnlab.tasks.captioning.boxes import word_boxes
from attnlab.tasks.captioning.recipe import CaptionEval
from attnlab.visualize.captions import CaptionAttention, plot_caption_attention

SAMPLE_ROWS = 4


def caption_row(
    captioner: CaptioningPipeline, data: CaptionSet, index: int, ids: list[int], title: str
) -> CaptionAttention:
    """One figure row: test image ``index``, its generated caption ``ids`` and their maps."""
    words, maps = captioner.attention(data.images[index], ids)
    boxes = word_boxes(words, data.digits[index]) if data.digits is not None else None
    return CaptionAttention(data.images[index], words, maps, title, boxes)


def draw_samples_and_mistakes(
    captioner: CaptioningPipeline, data: CaptionSet, hyps: list[list[int]], run_dir: Path, ev: CaptionEval
) -> list[Path]:
    """``attention.png`` (the first test scenes) and ``mistakes.png`` (up to ``ev.mistakes``
    wrong captions, the ones with most digits first) in ``run_dir``; none for a model without
    attention."""
    if not captioner.draws_attention:
        return []
    tok = captioner.tokenizer
    rows = [caption_row(captioner, data, i, hyps[i], f"caption: {tok.decode(hyps[i])}")
            for i in range(min(SAMPLE_ROWS, len(hyps)))]
    pictures = [plot_caption_attention(rows, run_dir / "attention.png", title="where it looks, word by word")]
    wrong = [i for i, h in enumerate(hyps) if h != data.ids[i]]
    if data.digits is not None:
        wrong.sort(key=lambda i: -len(data.digits[i]))
    wrong = wrong[: ev.mistakes]
    if wrong:
        rows = [caption_row(captioner, data, i, hyps[i],
                            f"wrote: {tok.decode(hyps[i])}\ntruth: {data.captions[i]}") for i in wrong]
        pictures.append(plot_caption_attention(rows, run_dir / "mistakes.png",
                                               title=f"{len(wrong)} wrong test captions"))
    return pictures
