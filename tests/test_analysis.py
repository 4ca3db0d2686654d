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

from attnlab.analysis import (
    LayerComplexity,
    attention_memory,
    convolution_flops,
    convolution_path_length,
    decoding_flops,
    flops,
    layer_complexity,
    recurrent_flops,
    training_flops,
)
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
        {"positional": "rope", "num_kv_heads": 2, "activation": "swiglu", "d_ff": 48},  # grouped-query
        {"num_kv_heads": 1},  # multi-query
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


# ------------------------------------------------------- training, decoding, recurrent, conv
def _count_training_step(model: torch.nn.Module, *inputs: torch.Tensor) -> int:
    """FLOPs of forward + backward of a summed output, counted (math SDPA backend)."""
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(*inputs).float().square().mean().backward()
    return counter.get_total_flops()


def test_training_flops_are_three_forward_passes_counted() -> None:
    torch.manual_seed(0)
    gpt_config = GPTConfig(vocab_size=61, block_size=32, d_model=32, num_heads=4, num_layers=2)
    gpt = GPT(gpt_config).train()
    assert _count_training_step(gpt, torch.randint(0, 61, (BATCH, 13))) == training_flops(
        gpt_config, 13, batch_size=BATCH)
    config = TransformerConfig(src_vocab_size=41, tgt_vocab_size=29, d_model=32, num_heads=4,
                               num_encoder_layers=2, num_decoder_layers=1, d_ff=48, dropout=0.0)
    model = Transformer(config).train()
    src, tgt = torch.randint(1, 41, (BATCH, 9)), torch.randint(1, 29, (BATCH, 6))
    assert _count_training_step(model, src, tgt) == training_flops(config, (9, 6), batch_size=BATCH)


@pytest.mark.parametrize("prompt_len", [1, 5])
def test_decoding_flops_equal_counted_greedy_search(prompt_len: int) -> None:
    """One forward a token: the prompt once then one token against the cache, or the whole
    prefix every step (Ba (CSC413 Lecture 8), "Computational Cost and Parallelism")."""
    from attnlab.generation import greedy_search

    torch.manual_seed(0)
    config = GPTConfig(vocab_size=37, block_size=24, d_model=32, num_heads=4, num_layers=2,
                       positional="rope", num_kv_heads=2)
    model = GPT(config).eval()
    prompt = torch.randint(0, 37, (BATCH, prompt_len))
    for use_cache in (True, False):
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            greedy_search(model, prompt=prompt, max_new_tokens=12, use_cache=use_cache)
        predicted = decoding_flops(config, prompt_len, 12, use_cache=use_cache, batch_size=BATCH)
        assert counter.get_total_flops() == predicted, use_cache
    assert decoding_flops(config, prompt_len, 12) < decoding_flops(config, prompt_len, 12, use_cache=False)
    # the uncached steps are whole forward passes over the prefix, the output layer on its last position
    last = flops(config, 1).lm_head
    assert decoding_flops(config, 3, 2, use_cache=False) == sum(
        flops(config, n).total - flops(config, n).lm_head + last for n in (3, 4))


def _lstm_stack(num_layers: int):
    """An LSTM stepped cell by cell: CPU ``nn.LSTM`` runs one fused kernel the counter does not see."""
    cells = [torch.nn.LSTMCell(12 if i == 0 else 20, 20) for i in range(num_layers)]

    def run(x: torch.Tensor) -> None:
        for cell in cells:
            state, outputs = None, []
            for t in range(x.shape[1]):
                state = cell(x[:, t], state)  # (h, c), each (B, 20)
                outputs.append(state[0])
            x = torch.stack(outputs, dim=1)  # (B, n, 20): the next layer's input

    return run


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_recurrent_flops_equal_counted_torch_rnn(cell: str, num_layers: int) -> None:
    modules = {"rnn": torch.nn.RNN, "gru": torch.nn.GRU}
    if cell in modules:
        rnn = modules[cell](12, 20, num_layers=num_layers, batch_first=True)
    else:
        rnn = _lstm_stack(num_layers)
    x = torch.randn(BATCH, 17, 12)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        rnn(x)
    expected = recurrent_flops(17, 12, 20, cell=cell, num_layers=num_layers, batch_size=BATCH)
    assert counter.get_total_flops() == expected


@pytest.mark.parametrize("kernel_size", [1, 3, 5])
def test_convolution_flops_equal_counted_conv1d(kernel_size: int) -> None:
    conv = torch.nn.Conv1d(12, 20, kernel_size, padding="same")
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = conv(torch.randn(BATCH, 12, 33))
    assert out.shape[-1] == 33
    assert counter.get_total_flops() == convolution_flops(33, 12, 20, kernel_size, batch_size=BATCH)


def test_layer_complexity_rows_are_the_hand_formulas() -> None:
    """Hasegawa-Johnson (ECE 417 Lecture 21), "Why Self-Attention?", at n = 1000, d = 64, k = 3."""
    n, d = 1000, 64
    recurrent = layer_complexity("recurrent", n, d)
    assert recurrent == LayerComplexity("recurrent", 2 * n * 3 * d * (d + d), n, n)  # GRU: 3 gates
    assert layer_complexity("recurrent", n, d, cell="lstm").flops == 2 * n * 4 * d * 2 * d
    conv = layer_complexity("convolutional", n, d, kernel_size=3)
    assert conv == LayerComplexity("convolutional", 2 * n * 3 * d * d, 1, 7)  # 3^6 = 729 < 1000 <= 3^7
    assert layer_complexity("convolutional", n, d, dilated=False).path_length == 500  # ⌈999 / 2⌉
    attention = layer_complexity("self-attention", n, d, num_heads=4)
    assert attention == LayerComplexity("self-attention", 8 * n * d * d + 4 * n * n * d, 4, 1)
    # Vaswani et al. 2017, section 4: self-attention is cheaper than recurrence while n < d. Exactly,
    # against a GRU: 8nd² + 4n²d against 12nd², equal at n = d.
    cost = {n: {kind: layer_complexity(kind, n, d).flops for kind in ("self-attention", "recurrent")}
            for n in (d - 1, d, d + 1)}
    assert cost[d - 1]["self-attention"] < cost[d - 1]["recurrent"]
    assert cost[d]["self-attention"] == cost[d]["recurrent"]
    assert cost[d + 1]["self-attention"] > cost[d + 1]["recurrent"]
    for k, lengths in ((2, {2: 1, 3: 2, 4: 2, 5: 3, 1024: 10, 1025: 11}), (3, {9: 2, 10: 3, 27: 3})):
        for length, layers in lengths.items():
            assert convolution_path_length(length, k) == layers, (k, length)
    assert convolution_path_length(9, 3, dilated=False) == 4


def test_new_analysis_bad_arguments() -> None:
    config = GPTConfig(vocab_size=10, block_size=8, d_model=16, num_heads=2, num_layers=1)
    with pytest.raises(ValueError, match="prompt_len \\+ new_tokens - 1 must be <= block_size=8"):
        decoding_flops(config, 4, 6)
    with pytest.raises(ValueError, match="new_tokens must be > 0"):
        decoding_flops(config, 4, 0)
    with pytest.raises(TypeError, match="config must be a GPTConfig"):
        decoding_flops(EncoderConfig(vocab_size=10, d_model=16, num_heads=2), 4, 2)
    with pytest.raises(ValueError, match="cell must be one of rnn, gru, lstm, got 'transformer'"):
        recurrent_flops(4, 8, 8, cell="transformer")
    with pytest.raises(ValueError, match="kernel_size must be > 0"):
        convolution_flops(4, 8, 8, 0)
    with pytest.raises(ValueError, match="layer must be one of recurrent, convolutional, self-attention"):
        layer_complexity("pooling", 4, 8)
    with pytest.raises(ValueError, match="kernel_size must be >= 2 to connect positions, got 1"):
        layer_complexity("convolutional", 4, 8, kernel_size=1)
