"""The mask contract (docs/design.md, "Masks") at every public attention entry point: a
``(B, n_k)`` key-padding mask and its explicit 4-D form ``(B, 1, 1, n_k)`` give equal outputs,
with ``B = n_q`` — where a 2-D mask could also be read as ``(n_q, n_k)``. (GPT takes no mask:
its only one is causal.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from attnlab.attention import AdditiveAttention, MultiHeadAttention, scaled_dot_product_attention
from attnlab.models import Encoder, EncoderConfig, Transformer, TransformerConfig
from attnlab.modules import (
    BlockConfig,
    DecoderLayer,
    EncoderDecoderStack,
    EncoderLayer,
    TransformerDecoderStack,
    TransformerEncoderStack,
)

B = N = 4  # batch = queries
S, D, H, V = 6, 16, 2, 11


def key_padding(n: int) -> torch.Tensor:
    """``(B, n)``: sentence 0 has two real tokens, sentence 2 three."""
    real = torch.ones(B, n, dtype=torch.bool)
    real[0, 2:], real[2, 3:] = False, False
    return real


def explicit(mask: torch.Tensor) -> torch.Tensor:
    return mask[:, None, None, :]  # (B, 1, 1, n_k)


def block() -> BlockConfig:
    return BlockConfig(d_model=D, num_heads=H, d_ff=32, dropout=0.0)


def _transformer_decode(form: Callable) -> torch.Tensor:
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=V, d_model=D, num_heads=H, d_ff=32,
                                          num_encoder_layers=1, num_decoder_layers=2)).eval()
    memory, _ = model.encode(torch.randint(1, V, (B, S)))
    return model.decode(torch.randint(1, V, (B, N)), memory, form(key_padding(S)))


def _encoder(form: Callable) -> torch.Tensor:
    torch.manual_seed(0)
    model = Encoder(EncoderConfig(vocab_size=V, d_model=D, num_heads=H, d_ff=32, num_layers=2)).eval()
    return model(torch.randint(1, V, (B, N)), form(key_padding(N)))


def _seeded(build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return build().eval()


def x(n: int = N) -> torch.Tensor:
    return torch.randn(B, n, D, generator=torch.Generator().manual_seed(1))


ENTRY_POINTS: dict[str, Callable[[Callable], torch.Tensor]] = {
    "scaled_dot_product_attention": lambda form: scaled_dot_product_attention(
        x().view(B, N, H, D // H).transpose(1, 2), x(S).view(B, S, H, D // H).transpose(1, 2),
        x(S).view(B, S, H, D // H).transpose(1, 2), form(key_padding(S))),
    "MultiHeadAttention": lambda form: _seeded(lambda: MultiHeadAttention(D, H))(
        x(), mask=form(key_padding(N))),
    "MultiHeadAttention cross": lambda form: _seeded(lambda: MultiHeadAttention(D, H))(
        x(), x(S), mask=form(key_padding(S))),
    "EncoderLayer": lambda form: _seeded(lambda: EncoderLayer(block()))(x(), form(key_padding(N))),
    "DecoderLayer self_mask": lambda form: _seeded(lambda: DecoderLayer(block()))(
        x(), x(S), self_mask=form(key_padding(N))),
    "DecoderLayer memory_mask": lambda form: _seeded(lambda: DecoderLayer(block()))(
        x(), x(S), memory_mask=form(key_padding(S))),
    "TransformerEncoderStack": lambda form: _seeded(
        lambda: TransformerEncoderStack.from_config(block(), 2))(x(), form(key_padding(N))),
    "TransformerDecoderStack": lambda form: _seeded(
        lambda: TransformerDecoderStack.from_config(block(), 2))(
        x(), x(S), self_mask=form(key_padding(N)), memory_mask=form(key_padding(S))),
    "EncoderDecoderStack": lambda form: _seeded(lambda: EncoderDecoderStack.from_config(block(), 1, 2))(
        x(S), x(), form(key_padding(S)), form(key_padding(N))),
    "EncoderDecoderStack.encode": lambda form: _seeded(lambda: EncoderDecoderStack.from_config(block(), 2, 1))
    .encode(x(), form(key_padding(N))),
    "EncoderDecoderStack.decode": lambda form: _seeded(lambda: EncoderDecoderStack.from_config(block(), 1, 2))
    .decode(x(), x(S), form(key_padding(S))),
    "AdditiveAttention": lambda form: _seeded(lambda: AdditiveAttention(D, D, 8))(
        x(), x(S), x(S), form(key_padding(S))),
    "Transformer.decode": _transformer_decode,
    "Encoder.forward": _encoder,
}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_key_padding_equals_its_explicit_4d_form(name):
    call = ENTRY_POINTS[name]
    with torch.no_grad():
        padded, full = call(lambda m: m), call(explicit)
        unmasked = call(lambda m: None)
    torch.testing.assert_close(padded, full, rtol=0, atol=0)
    assert (padded - unmasked).abs().max() > 1e-3  # the mask reached the attention


@pytest.mark.parametrize("name", ["MultiHeadAttention", "EncoderLayer", "TransformerEncoderStack",
                                  "Encoder.forward", "AdditiveAttention"])
def test_a_2d_mask_of_another_shape_is_refused_naming_both_shapes(name):
    with pytest.raises(ValueError, match=r"has shape \(4, 3\) but a 2-D mask is a key-padding mask "
                       r"\(B, n_k\) = \(4, [46]\)|attention_mask has shape \(4, 3\) but input_ids"):
        ENTRY_POINTS[name](lambda m: m[:, :3])
