"""Sentences in, vectors out: a BERT-style encoder with its word-piece tokenizer.

:meth:`EncoderPipeline.embed` is the sentence-transformers recipe: tokenize (truncating at
``config.sequence_limit``), run the :class:`~attnlab.models.Encoder`, pool the token states
over the real tokens with ``config.pooling`` and L2-normalise when ``config.normalize``.
:meth:`EncoderPipeline.attention` runs one sentence and keeps what Steinert-Threlkeld
(Transformers I), "Attention visualisation", looks at: the word pieces, every layer's output and
every layer's weights ``softmax(QKᵀ/√d_k)``.

:meth:`EncoderPipeline.from_checkpoint` reads an attnlab ``encoder`` checkpoint or a Hugging
Face BERT directory (all-MiniLM-L6-v2: :func:`attnlab.interop.bert.load_bert` converts the
weights), each with its Hugging Face ``tokenizer.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.checkpoint import CONFIG_NAME, load_config
from attnlab.generation.state import inference
from attnlab.models.encoder import Encoder
from attnlab.pipelines.base import Pipeline
from attnlab.validation import check_positive

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["EncodedSentence", "EncoderPipeline", "find_token"]

TOKENIZER_NAME = "tokenizer.json"


@dataclass
class EncodedSentence:
    """One sentence through the encoder: its word pieces and every layer's states and weights."""

    sentence: str
    tokens: list[str]  # n word pieces, [CLS] first, [SEP] last
    input_ids: Tensor  # (n,)
    hidden: list[Tensor]  # num_layers + 1 of (n, d); 0 = embedding output
    attention: list[Tensor]  # num_layers of (H, n, n); rows are queries

    def index(self, token: str) -> int:
        """Position of the word piece ``token`` (it must occur exactly once)."""
        return find_token(self.tokens, token)


def find_token(tokens: list[str], token: str) -> int:
    """The one position of ``token`` in ``tokens``; ``ValueError`` when absent or repeated."""
    hits = [i for i, t in enumerate(tokens) if t == token]
    if len(hits) != 1:
        raise ValueError(f"token must occur once in {tokens}, got {token!r} {len(hits)} times")
    return hits[0]


class EncoderPipeline(Pipeline):
    """A BERT-style :class:`~attnlab.models.Encoder` and its Hugging Face ``tokenizers.Tokenizer``,
    which the pipeline configures (in place) to truncate at ``config.sequence_limit`` tokens and
    to pad each batch to its longest sequence with ``config.pad_id``."""

    model_types = ("encoder",)  # no task trains an encoder: it registers without one
    family = "an encoder"
    model: Encoder

    def __init__(self, model: Encoder, tokenizer: Tokenizer, *, recipe: dict[str, Any] | None = None) -> None:
        config = model.config
        pad_token = tokenizer.id_to_token(config.pad_id)
        if pad_token is None:
            raise ValueError(f"pad_id {config.pad_id} is not in the tokenizer's vocabulary")
        tokenizer.enable_truncation(max_length=config.sequence_limit)
        tokenizer.enable_padding(pad_id=config.pad_id, pad_token=pad_token)
        self.model, self.tokenizer, self.recipe = model, tokenizer, recipe or {}

    @classmethod
    def from_checkpoint(
        cls, checkpoint: str | Path, *, device: str | torch.device = "cpu"
    ) -> EncoderPipeline:
        """An attnlab ``encoder`` checkpoint, or a Hugging Face BERT directory (its weights,
        tokenizer and sentence-transformers settings; ``ValueError`` naming what attnlab's
        encoder cannot reproduce), in eval mode on ``device``."""
        checkpoint = Path(checkpoint)
        if (checkpoint / CONFIG_NAME).is_file() and load_config(checkpoint).get("model_type") == "encoder":
            return super().from_checkpoint(checkpoint, device=device)
        from attnlab.interop.bert import load_bert

        return cls.from_files(load_bert(checkpoint).to(device), checkpoint, {})

    @classmethod
    def from_files(cls, model: Encoder, checkpoint: Path, recipe: dict[str, Any]) -> EncoderPipeline:
        from tokenizers import Tokenizer

        file = checkpoint / TOKENIZER_NAME
        if not file.is_file():
            raise FileNotFoundError(f"BERT directory {checkpoint} has no {TOKENIZER_NAME}")
        return cls(model, Tokenizer.from_file(str(file)), recipe=recipe)

    def tokenizer_files(self) -> dict[str, str]:
        return {TOKENIZER_NAME: self.tokenizer.to_str()}

    def tokenize(self, sentences: Sequence[str]) -> dict[str, Tensor]:
        """``input_ids``, ``attention_mask``, ``token_type_ids``, each ``(B, n)`` int64 (the
        text lower-cased first when ``config.lowercase``)."""
        texts = [s.lower() if self.model.config.lowercase else s for s in _check_sentences(sentences)]
        encodings = self.tokenizer.encode_batch(texts)
        return {
            "input_ids": torch.tensor([e.ids for e in encodings], dtype=torch.long),
            "attention_mask": torch.tensor([e.attention_mask for e in encodings], dtype=torch.long),
            "token_type_ids": torch.tensor([e.type_ids for e in encodings], dtype=torch.long),
        }

    def embed(self, sentences: Sequence[str], batch_size: int = 32) -> Tensor:
        """Sentence embeddings ``(N, d)`` float32 for ``N`` strings.

        Tokenizes, runs the encoder in eval mode without autograd, pools with
        ``config.pooling`` and L2-normalises when ``config.normalize``. Sentences are batched by
        length (longest first) so batches carry little padding; the output keeps the input order.
        """
        check_positive("batch_size", batch_size)
        sentences = _check_sentences(sentences)
        order = sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))
        chunks = []
        with inference(self.model):
            for start in range(0, len(order), batch_size):
                batch = self._batch([sentences[i] for i in order[start:start + batch_size]])
                hidden = self.model(**batch)  # (b, n, d)
                chunks.append(self.model.pool(hidden, batch["attention_mask"]).float())  # (b, d)
        if not chunks:
            return torch.empty(0, self.model.config.d_model)
        out = torch.cat(chunks)  # (N, d) in length order
        if self.model.config.normalize:
            out = F.normalize(out, p=2, dim=-1)
        return out[torch.argsort(torch.tensor(order))].cpu()  # (N, d) in input order

    def attention(self, sentence: str) -> EncodedSentence:
        """Run ``sentence`` (no padding) through the encoder in eval mode and keep each layer's
        output and attention weights (see :class:`EncodedSentence`), float32 on the CPU. The
        layer outputs are read with forward hooks on the encoder's own layers, so they are
        exactly the states its forward pass computes."""
        if not isinstance(sentence, str) or not sentence.strip():
            raise ValueError(f"sentence must be a non-empty string, got {sentence!r}")
        model, batch, outputs = self.model, self._batch([sentence]), []
        hooks = [layer.register_forward_hook(lambda _m, _i, out: outputs.append(out[0]))
                 for layer in model.encoder.layers]
        try:
            with inference(model):
                embedded = model.embed(batch["input_ids"], batch["token_type_ids"])  # (1, n, d)
                _, weights = model(**batch, return_weights=True)  # per layer (1, H, n, n)
        finally:
            for hook in hooks:
                hook.remove()
        ids = batch["input_ids"][0].cpu()  # (n,)
        return EncodedSentence(
            sentence=sentence, tokens=[self.tokenizer.id_to_token(int(i)) for i in ids], input_ids=ids,
            hidden=[h[0].float().cpu() for h in [embedded, *outputs]],  # (n, d) each
            attention=[w[0].float().cpu() for w in weights],  # (H, n, n) each
        )

    def _batch(self, sentences: list[str]) -> dict[str, Tensor]:
        return {k: v.to(self.device) for k, v in self.tokenize(sentences).items()}


def _check_sentences(sentences: Sequence[str]) -> list[str]:
    if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences):
        raise TypeError("sentences must be a list of str (wrap a single sentence in a list)")
    return list(sentences)
