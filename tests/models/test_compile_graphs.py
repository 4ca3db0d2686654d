"""Under ``torch.compile`` the models trace into whole graphs: the eager-only host syncs
(skipping a no-op mask, the token-id range check) step aside, and the outputs still equal
eager mode. ``torch._dynamo.explain`` traces without generating code, so this stays fast."""

import pytest
import torch
import torch._dynamo

from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig


def _translator(positional: str = "sinusoidal") -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(
        src_vocab_size=50, d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2,
        d_ff=64, dropout=0.0, norm_first=True, positional=positional,
    )
    return Transformer(config).eval()


def _breaks(model: torch.nn.Module, *inputs: torch.Tensor) -> list[str]:
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(*inputs)
    return [f"{b.user_stack[-1].filename}:{b.user_stack[-1].lineno}" for b in explanation.break_reasons]


@pytest.mark.parametrize("padded", [False, True])
def test_translator_forward_has_no_graph_breaks(padded):
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    if padded:
        src[0, 5:] = 0  # pad id 0: the mask reaches the fused attention kernel
    assert _breaks(_translator(), src, tgt) == []


def test_gpt_forward_has_no_graph_breaks():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, num_layers=2, num_heads=4, d_model=32))
    assert _breaks(model.eval(), torch.randint(0, 50, (2, 9))) == []


def test_compiled_translator_equals_eager_with_padding():
    model = _translator()
    src, tgt = torch.randint(4, 50, (3, 7)), torch.randint(4, 50, (3, 5))
    src[0, 5:] = 0
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager")
    torch.testing.assert_close(compiled(src, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)


def test_eager_mode_still_checks_token_ids():
    src, tgt = torch.randint(4, 50, (2, 6)), torch.randint(4, 50, (2, 4))
    src[1, 2] = 50
    with pytest.raises(ValueError, match="src must be token ids < vocab_size=50, got a maximum of 50"):
        _translator()(src, tgt)
