"""The views under the API's caps on work, counted in tokens after tokenization.

Characters are a poor measure of work: 400 characters may be 1,600 byte-level subwords. So a
translation is refused (413) when its source has more than ``MAX_SOURCE_TOKENS`` subwords and
its output is cut at ``MAX_OUTPUT_TOKENS`` subwords (or the checkpoint's own, shorter limit
``max_len_a · S + max_len_b``): a beam search of beam ``K`` runs at most ``K × 160``
hypothesis steps. A head-view sentence is refused over ``MAX_SENTENCE_TOKENS`` word pieces.
The server (:mod:`.app`, on the model's worker thread) and ``attnlab export-html``
(:mod:`.export`) both call these, so a file holds only what the API would answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from attnlab.explorer import views
from attnlab.explorer.errors import too_long
from attnlab.explorer.requests import MAX_OUTPUT_TOKENS, MAX_SENTENCE_TOKENS, MAX_SOURCE_TOKENS
from attnlab.tasks.translation import checkpoint_decoding
from attnlab.tasks.translator import Translator


def check_sentence_length(encoder: Any, text: str, limit: int = MAX_SENTENCE_TOKENS) -> None:
    """413 when ``text`` has more than ``limit`` word pieces (``[CLS]``, ``[SEP]`` included)."""
    count = int(encoder.tokenize([text])["attention_mask"].sum())
    if count > limit:
        raise too_long(f"text has {count} word pieces; the limit is {limit}")


def source_length(translator: Translator, text: str, limit: int = MAX_SOURCE_TOKENS) -> int:
    """The subwords of ``text`` as the translator encodes it; 413 over ``limit``."""
    count = len(translator.src_tok.encode(text.strip()))
    if count > limit:
        raise too_long(f"text has {count} subwords; the limit is {limit}")
    return count


def output_limit(recipe: Mapping[str, Any], source_tokens: int, cap: int = MAX_OUTPUT_TOKENS) -> int:
    """The most subwords a translation of ``source_tokens`` may have: the recipe's own limit
    (``max_len``, else ``max_len_a · S + max_len_b``, at least 1), at most ``cap``."""
    decoding = checkpoint_decoding(recipe)
    natural = decoding.max_len or int(decoding.max_len_a * source_tokens + decoding.max_len_b)
    return max(1, min(natural, cap))


def translation(
    translator: Translator, recipe: Mapping[str, Any], text: str, beam: int | None,
    before_step: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """:func:`.views.translation_view` of ``text`` within the caps (``before_step``: called
    before every decoding step)."""
    max_len = output_limit(recipe, source_length(translator, text))
    return views.translation_view(translator, recipe, text, beam=beam, max_len=max_len,
                                  before_step=before_step)


def heads(encoder: Any, text: str) -> dict[str, Any]:
    """:func:`.views.head_view` of ``text`` within the cap on word pieces."""
    check_sentence_length(encoder, text)
    return views.head_view(encoder, text)
