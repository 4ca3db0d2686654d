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

from collections.abc import Callable
from typing import Any

from attnlab.explorer import views
from attnlab.explorer.errors import too_long
from attnlab.explorer.requests import MAX_OUTPUT_TOKENS, MAX_SENTENCE_TOKENS, MAX_SOURCE_TOKENS
from attnlab.pipelines import DecodeConfig, EncoderPipeline, TranslationPipeline


def check_sentence_length(encoder: EncoderPipeline, text: str, limit: int = MAX_SENTENCE_TOKENS) -> None:
    """413 when ``text`` has more than ``limit`` word pieces (``[CLS]``, ``[SEP]`` included)."""
    count = int(encoder.tokenize([text])["attention_mask"].sum())
    if count > limit:
        raise too_long(f"text has {count} word pieces; the limit is {limit}")


def source_length(translator: TranslationPipeline, text: str, limit: int = MAX_SOURCE_TOKENS) -> int:
    """The subwords of ``text`` as the translator encodes it; 413 over ``limit``."""
    count = len(translator.src_tok.encode(text.strip()))
    if count > limit:
        raise too_long(f"text has {count} subwords; the limit is {limit}")
    return count


def output_limit(decoding: DecodeConfig, source_tokens: int, cap: int = MAX_OUTPUT_TOKENS) -> int:
    """The most subwords a translation of ``source_tokens`` may have: the checkpoint's own
    limit (``max_len``, else ``max_len_a · S + max_len_b``, at least 1), at most ``cap``."""
    return min(decoding.limit(source_tokens), cap)


def translation(
    translator: TranslationPipeline, text: str, beam: int | None,
    before_step: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """:func:`.views.translation_view` of ``text`` within the caps (``before_step``: called
    before every decoding step)."""
    max_len = output_limit(translator.decoding, source_length(translator, text))
    return views.translation_view(translator, text, beam=beam, max_len=max_len, before_step=before_step)


def heads(encoder: EncoderPipeline, text: str) -> dict[str, Any]:
    """:func:`.views.head_view` of ``text`` within the cap on word pieces."""
    check_sentence_length(encoder, text)
    return views.head_view(encoder, text)
