"""attnlab.analysis.flops against an independent count of the matmuls a real forward pass runs.

Reference: ``torch.utils.flop_counter.FlopCounterMode`` (2 FLOPs per multiply-add over
mm/addmm/bmm), with PyTorch's math SDPA backend so that ``QKᵀ`` and ``softmax(S)·V`` run as
counted ``bmm`` calls (the fused CPU kernel is not counted by FlopCounterMode). Totals must
match exactly, and so must each layer's parts, read from the counter's per-module table.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from attnlab.analysis import attention_memory, flops
from attnlab.models import GPT, Encoder, GPTConfig, Transformer, TransformerConfig
from attnlab.models.encoder import EncoderConfig

BATCH = 2


def _count(model: torch.nn.Module, *inputs: torch.Tensor) -> dict[str, int]:
    """Per-module FLOPs of ``model(*inputs)``: ``{"GPT.layers.0.ffn": ..., "Global": ...}``."""
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, torch.no_grad():
        model(*inputs)
    return {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}


def _check_layers(report, counts: dict[str, int], root: str) -> None:
    assert report.total == counts["Global"]
    for layer in report.layers:
        path = f"{root}.{layer.name}"
        assert layer.total == counts[path], path
        assert layer.ffn == counts[f"{path}.ffn"], path
        attn = layer.self_attn
        assert attn.total == counts[f"{path}.self_attn"], path
        assert attn.qkv == counts[f"{path}.self_attn.in_proj"], path
        assert attn.out_proj == counts[f"{path}.self_attn.out_proj"], path
        if layer.cross_attn is not None:
            assert layer.cross_attn.total == counts[f"{path}.cross_attn"], path


@pytest.mark.parametrize("seq_len", [1, 7, 33])
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"activation": "swiglu", "d_ff": 48, "positional": "alibi"},
        {"positional": "rope", "norm_first": False},
    ],
)
def test_gpt_flops_equal_counted_matmuls(seq_len: int, overrides: dict) -> None:
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=67, block_size=64, d_model=32, num_heads=4, num_layers=2, **overrides
    )
    model = GPT(config).eval()
    counts = _count(model, torch.randint(0, 67, (BATCH, seq_len)))
    report = flops(config, seq_len, batch_size=BATCH)
    _check_layers(report, counts, "GPT")
    assert report.lm_head == counts["GPT.head"]


@pytest.mark.parametrize("lengths", [(5, 5), (11, 4), (3, 17)])
def test_transformer_flops_equal_counted_matmuls(lengths: tuple[int, int]) -> None:
    torch.manual_seed(0)
    src_len, tgt_len = lengths
    config = TransformerConfig(
        src_vocab_size=41, tgt_vocab_size=29, d_model=32, num_heads=4, num_encoder_layers=2,
        num_decoder_layers=3, d_ff=64, activation="gelu",
    )
    model = Transformer(config).eval()
    src = torch.randint(1, 41, (BATCH, src_len))
    src[1, -2:] = config.pad_id  # padding changes masks, not FLOPs
    counts = _count(model, src, torch.randint(1, 29, (BATCH, tgt_len)))
    report = flops(config, lengths, batch_size=BATCH)
    _check_layers(report, counts, "Transformer")
    assert report.lm_head == counts["Transformer.output"]
    assert [layer.cross_attn is not None for layer in report.layers] == [False] * 2 + [True] * 3


def test_encoder_flops_equal_counted_matmuls() -> None:
    torch.manual_seed(0)
    config = EncoderConfig(vocab_size=53, d_model=48, num_heads=6, num_layers=3, d_ff=80)
    model = Encoder(config).eval()
    ids = torch.randint(0, 53, (BATCH, 19))
    counts = _count(model, ids, torch.ones_like(ids))
    report = flops(config, 19, batch_size=BATCH)
    _check_layers(report, counts, "Encoder")
    assert report.lm_head == 0


def test_attention_terms_scale_as_the_complexity_tables() -> None:
    """Doubling n: attention's QKᵀ and A·V grow 4× (O(n²d)); projections and FFN 2× (O(nd²))."""
    config = GPTConfig(vocab_size=100, block_size=1024, d_model=64, num_heads=4, num_layers=1)
    small, large = flops(config, 128).by_part(), flops(config, 256).by_part()
    for part in ("scores", "weighted_values"):
        assert large[part] == 4 * small[part], part
    for part in ("qkv", "out_proj", "ffn", "lm_head"):
        assert large[part] == 2 * small[part], part
    # Li (Transformer Part I): QKᵀ costs n² d — here 2 FLOPs per multiply-add.
    assert small["scores"] == 2 * 128 * 128 * 64


def test_attention_memory_is_heads_times_n_squared() -> None:
    config = TransformerConfig(src_vocab_size=10, d_model=32, num_heads=4, num_encoder_layers=1,
                               num_decoder_layers=1)
    assert attention_memory(config, (50, 20), batch_size=3) == 3 * 4 * 50 * 50 * 4
    assert attention_memory(config, (10, 20), bytes_per_element=2) == 4 * 20 * 20 * 2


def test_flops_bad_arguments() -> None:
    config = GPTConfig(vocab_size=10, d_model=16, num_heads=2, num_layers=1)
    with pytest.raises(ValueError, match="seq_len must be a positive int"):
        flops(config, 0)
    with pytest.raises(ValueError, match="seq_len must be an int for GPTConfig"):
        flops(config, (3, 4))
    with pytest.raises(ValueError, match="batch_size must be > 0"):
        flops(config, 3, batch_size=0)
    with pytest.raises(TypeError, match="config must be a TransformerConfig"):
        flops(object(), 3)
