"""The captioning task (Xu et al. 2015, "Show, Attend and Tell"): :mod:`.task` trains, decodes and
scores; :mod:`.recipe` maps its TOML tables onto dataclasses; :mod:`.boxes` measures the attention
inside the digit each number word names; :mod:`.pictures` draws the samples and the mistakes."""

from attnlab.tasks.captioning.boxes import attention_on_digits, box_share, word_boxes
from attnlab.tasks.captioning.pictures import draw_samples_and_mistakes
from attnlab.tasks.captioning.recipe import CaptionData, CaptionEval, CaptionOptim, CaptionRecipe
from attnlab.tasks.captioning.task import CaptioningTask, caption_loss, split_folders, test_scores

__all__ = [
    "CaptionData",
    "CaptionEval",
    "CaptionOptim",
    "CaptionRecipe",
    "CaptioningTask",
    "attention_on_digits",
    "box_share",
    "caption_loss",
    "draw_samples_and_mistakes",
    "split_folders",
    "test_scores",
    "word_boxes",
]
