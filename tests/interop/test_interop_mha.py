"""attnlab.interop.from_torch(nn.MultiheadAttention) against PyTorch itself (issue 2, "Must show").

Every expected value comes from ``torch.nn.MultiheadAttention`` with the weights we copied;
masks for PyTorch are built independently, in PyTorch's own polarity (True = blocked).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from attnlab.attention import MultiHeadAttention, lengths_to_mask
from attnlab.interop import from_torch, from_torch_masks, from_torch_mha


@pytest.fixture(autouse=True)
def _seed_everything():
    """Unseeded draws (torch.randn without a generator) are reproducible too."""
    torch.manual_seed(0)


TOL = 1e-5  # relative error, issue 2


def rel_err(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got - expected).norm() / expected.norm().clamp_min(1e-30))


@dataclass(frozen=True)
class Case:
    batch: int
    n_q: int
    n_k: int
    d_model: int
    heads: int
    kdim: int | None = None
    vdim: int | None = None
    mode: str = "self"  # "self": mha(x); "cross": mha(x, memory); "cross_kv": separate values

    def __str__(self) -> str:
        return (
            f"{self.mode}-B{self.batch}-q{self.n_q}-k{self.n_k}-d{self.d_model}-h{self.heads}"
            f"-kd{self.kdim}-vd{self.vdim}"
        )


CASES = [
    Case(2, 5, 5, 16, 4),
    Case(1, 9, 9, 32, 8),
    Case(3, 4, 7, 16, 2, mode="cross"),
    Case(2, 6, 6, 12, 3, mode="cross_kv"),
    Case(2, 3, 8, 12, 3, kdim=10, vdim=10, mode="cross"),
    Case(2, 3, 8, 8, 2, kdim=6, vdim=5, mode="cross_kv"),
    Case(2, 1, 4, 8, 1, kdim=8, vdim=3, mode="cross_kv"),
]


def make_torch_mha(
    case: Case, *, bias: bool, batch_first: bool, seed: int = 0
) -> nn.MultiheadAttention:
    """A PyTorch MHA with every parameter random (PyTorch initialises the biases to zero)."""
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(
        case.d_model, case.heads, bias=bias, kdim=case.kdim, vdim=case.vdim, batch_first=batch_first
    )
    with torch.no_grad():
        for p in mha.parameters():
            p.normal_(0.0, 0.5)
    return mha.eval()


def make_inputs(case: Case, seed: int = 1):
    """Batch-first ``x (B, n_q, d)``, ``key (B, n_k, kdim)``, ``value (B, n_k, vdim)``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case.batch, case.n_q, case.d_model, generator=g)
    if case.mode == "self":
        return x, x, x
    key = torch.randn(case.batch, case.n_k, case.kdim or case.d_model, generator=g)
    if case.mode == "cross":
        return x, key, key
    value = torch.randn(case.batch, case.n_k, case.vdim or case.d_model, generator=g)
    return x, key, value


def torch_masks(case: Case, masking: str):
    """PyTorch-polarity masks built without attnlab: key_padding (B, n_k), causal (n_q, n_k)."""
    kpm = attn = None
    if "padding" in masking:
        lengths = torch.randint(
            1, case.n_k + 1, (case.batch,), generator=torch.Generator().manual_seed(2)
        )
        lengths[0] = case.n_k  # one row without padding, one (or more) with
        kpm = torch.arange(case.n_k)[None, :] >= lengths[:, None]  # True = padding
    if "causal" in masking:  # bottom-right aligned: query i is position n_k - n_q + i
        attn = torch.ones(case.n_q, case.n_k, dtype=torch.bool).triu(1 + case.n_k - case.n_q)
    return kpm, attn


def run_torch(mha, case, x, key, value, kpm, attn, batch_first):
    if not batch_first:
        x, key, value = (t.transpose(0, 1) for t in (x, key, value))
    out, w = mha(
        x,
        key,
        value,
        key_padding_mask=kpm,
        attn_mask=attn,
        need_weights=True,
        average_attn_weights=False,
    )
    out_fast, _ = mha(x, key, value, key_padding_mask=kpm, attn_mask=attn, need_weights=False)
    if not batch_first:
        out, out_fast = out.transpose(0, 1), out_fast.transpose(0, 1)
    return out, out_fast, w  # (B, n_q, d), (B, n_q, d), (B, H, n_q, n_k)


def run_ours(mha: MultiHeadAttention, case, x, key, value, **kw):
    if case.mode == "self":
        args, extra = (x,), {}
    elif case.mode == "cross":
        args, extra = (x, key), {}
    else:
        args, extra = (x, key), {"value": value}
    out, w = mha(*args, **extra, return_weights=True, **kw)
    return out, mha(*args, **extra, **kw), w


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding+causal"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("batch_first", [True, False], ids=["bf", "seqfirst"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_from_torch_matches_pytorch(case, batch_first, bias, masking):
    torch_mha = make_torch_mha(case, bias=bias, batch_first=batch_first)
    ours = from_torch(torch_mha)
    assert isinstance(ours, MultiHeadAttention)
    x, key, value = make_inputs(case)
    kpm, attn = torch_masks(case, masking)
    with torch.no_grad():
        ref, ref_fast, ref_w = run_torch(torch_mha, case, x, key, value, kpm, attn, batch_first)
        # Route 1: attnlab's own mask helpers (True = allowed) and is_causal.
        mask = None if kpm is None else lengths_to_mask((~kpm).sum(-1), case.n_k)[:, None, None, :]
        out, out_fast, w = run_ours(
            ours, case, x, key, value, mask=mask, is_causal=attn is not None
        )
        # Route 2: PyTorch's masks converted by from_torch_masks.
        out2, out2_fast, w2 = run_ours(ours, case, x, key, value, mask=from_torch_masks(attn, kpm))
    assert out.shape == ref.shape and w.shape == (case.batch, case.heads, case.n_q, case.n_k)
    for got in (out, out_fast, out2, out2_fast):
        assert rel_err(got, ref) <= TOL
    assert rel_err(out_fast, ref_fast) <= TOL
    assert rel_err(w, ref_w) <= TOL and rel_err(w2, ref_w) <= TOL


def test_float_masks_match_pytorch():
    """PyTorch float masks are additive like ours: passed through from_torch_masks unchanged."""
    case = Case(3, 6, 6, 16, 4)
    torch_mha = make_torch_mha(case, bias=True, batch_first=True)
    ours = from_torch_mha(torch_mha)
    x, _, _ = make_inputs(case)
    attn = nn.Transformer.generate_square_subsequent_mask(case.n_q)  # 0 / -inf float
    attn = attn + 0.3 * torch.randn(case.n_q, case.n_q)  # plus a finite additive bias
    kpm = torch.zeros(case.batch, case.n_k)
    kpm[1, -2:] = float("-inf")
    with torch.no_grad():
        ref, ref_w = torch_mha(
            x, x, x, key_padding_mask=kpm, attn_mask=attn, average_attn_weights=False
        )
        out, w = ours(x, mask=from_torch_masks(attn, kpm), return_weights=True)
        out_fast = ours(x, mask=from_torch_masks(attn, kpm))
    assert rel_err(out, ref) <= TOL and rel_err(out_fast, ref) <= TOL and rel_err(w, ref_w) <= TOL


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
def test_three_dim_attn_mask_is_unfolded_per_head(dtype):
    """PyTorch's (B·H, n_q, n_k) attn_mask gives each batch row and head its own mask."""
    case = Case(2, 4, 5, 12, 3, mode="cross")
    torch_mha = make_torch_mha(case, bias=True, batch_first=True)
    ours = from_torch(torch_mha)
    x, key, _ = make_inputs(case)
    blocked = (
        torch.rand(
            case.batch * case.heads, case.n_q, case.n_k, generator=torch.Generator().manual_seed(3)
        )
        < 0.5
    )
    blocked[..., 0] = False  # every query keeps one key (PyTorch would give NaN otherwise)
    attn = (
        blocked
        if dtype == torch.bool
        else torch.zeros(blocked.shape).masked_fill(blocked, -torch.inf)
    )
    with torch.no_grad():
        ref, ref_w = torch_mha(x, key, key, attn_mask=attn, average_attn_weights=False)
        mask = from_torch_masks(attn, num_heads=case.heads)
        out, w = ours(x, key, mask=mask, return_weights=True)
    assert mask.shape == (case.batch, case.heads, case.n_q, case.n_k)
    assert rel_err(out, ref) <= TOL and rel_err(w, ref_w) <= TOL
    assert torch.equal(w == 0, blocked.view_as(w))


def test_gradients_match_pytorch():
    case = Case(2, 5, 7, 12, 3, kdim=6, vdim=4, mode="cross_kv")
    torch_mha = make_torch_mha(case, bias=True, batch_first=True)
    ours = from_torch(torch_mha)
    x, key, value = make_inputs(case)
    kpm, _ = torch_masks(case, "padding")
    grad_out = torch.randn(case.batch, case.n_q, case.d_model)
    inputs_t = [t.clone().requires_grad_() for t in (x, key, value)]
    inputs_o = [t.clone().requires_grad_() for t in (x, key, value)]
    torch_mha(*inputs_t, key_padding_mask=kpm, need_weights=False)[0].backward(grad_out)
    ours(inputs_o[0], inputs_o[1], value=inputs_o[2], mask=from_torch_masks(None, kpm)).backward(
        grad_out
    )
    for a, b in zip(inputs_o, inputs_t, strict=True):
        assert rel_err(a.grad, b.grad) <= TOL
    pairs = [
        (ours.q_proj.weight, torch_mha.q_proj_weight),
        (ours.k_proj.weight, torch_mha.k_proj_weight),
        (ours.v_proj.weight, torch_mha.v_proj_weight),
        (ours.out_proj.weight, torch_mha.out_proj.weight),
    ]
    for a, b in pairs:
        assert rel_err(a.grad, b.grad) <= TOL
    bias_grad = torch.cat([ours.q_proj.bias.grad, ours.k_proj.bias.grad, ours.v_proj.bias.grad])
    assert rel_err(bias_grad, torch_mha.in_proj_bias.grad) <= TOL


def test_copy_keeps_dtype_mode_and_dropout_and_is_independent():
    case = Case(2, 4, 4, 8, 2)
    torch_mha = nn.MultiheadAttention(8, 2, dropout=0.25, batch_first=True).double()
    ours = from_torch(torch_mha)  # torch_mha is in training mode
    assert ours.training and ours.dropout == 0.25
    assert all(p.dtype == torch.float64 for p in ours.parameters())
    x = make_inputs(case)[0].double()
    torch_mha.eval()
    ours.eval()
    with torch.no_grad():
        assert rel_err(ours(x), torch_mha(x, x, x)[0]) <= 1e-12
        torch_mha.out_proj.weight.add_(1.0)  # the copy does not share storage
    assert not torch.equal(ours.out_proj.weight, torch_mha.out_proj.weight)
    assert not from_torch(torch_mha.eval()).training


@pytest.mark.parametrize("option", ["add_bias_kv", "add_zero_attn"])
def test_unsupported_options_are_rejected(option):
    with pytest.raises(ValueError, match=f"{option}=True"):
        from_torch(nn.MultiheadAttention(8, 2, **{option: True}))


def test_unsupported_type_raises_type_error_naming_it():
    with pytest.raises(
        TypeError, match=r"cannot convert Linear; supported types: nn\.MultiheadAttention"
    ):
        from_torch(nn.Linear(3, 3))
    with pytest.raises(TypeError, match="got Linear"):
        from_torch_mha(nn.Linear(3, 3))


SMALL = {"d_model": 8, "nhead": 2, "dim_feedforward": 16, "batch_first": True}


@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.Transformer(**SMALL, num_encoder_layers=1, num_decoder_layers=1),
        lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(**SMALL), num_layers=1, enable_nested_tensor=False
        ),
        lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(**SMALL), num_layers=1),
        lambda: nn.TransformerEncoderLayer(**SMALL),
        lambda: nn.TransformerDecoderLayer(**SMALL),
    ],
    ids=["Transformer", "TransformerEncoder", "TransformerDecoder", "EncoderLayer", "DecoderLayer"],
)
def test_transformer_modules_dispatch_to_interop_transformer(make, monkeypatch):
    """nn.Transformer* go to attnlab.interop.transformer.from_torch_transformer, imported lazily."""
    seen = []
    fake = types.ModuleType("attnlab.interop.transformer")
    fake.from_torch_transformer = lambda module: seen.append(module) or "converted"
    monkeypatch.setitem(sys.modules, "attnlab.interop.transformer", fake)
    module = make()
    assert from_torch(module) == "converted" and seen == [module]


def test_from_torch_masks_polarity_and_shapes():
    kpm = torch.tensor([[False, False, True], [False, True, True]])  # PyTorch: True = padding
    attn = torch.tensor([[False, True, True], [False, False, True]])  # PyTorch: True = blocked
    assert from_torch_masks() is None
    assert torch.equal(
        from_torch_masks(key_padding_mask=kpm),
        torch.tensor([[[[True, True, False]]], [[[True, False, False]]]]),
    )
    assert torch.equal(  # (1, 1, n_q, n_k): in attnlab a 2-D mask would be key padding
        from_torch_masks(attn), torch.tensor([[[[True, False, False], [True, True, False]]]])
    )
    both = from_torch_masks(attn, kpm)
    assert both.shape == (2, 1, 2, 3)
    assert torch.equal(both[1, 0], torch.tensor([[True, False, False], [True, False, False]]))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            {"attn_mask": torch.zeros(6, 2, 3, dtype=torch.bool)},
            r"num_heads must be given.*got num_heads=None",
        ),
        (
            {"attn_mask": torch.zeros(6, 2, 3, dtype=torch.bool), "num_heads": 4},
            r"multiple of num_heads=4",
        ),
        (
            {
                "attn_mask": torch.zeros(2, 3, dtype=torch.bool),
                "key_padding_mask": torch.zeros(2, 4, dtype=torch.bool),
            },
            r"key_padding_mask has 4 keys but attn_mask has shape \(2, 3\)",
        ),
        (
            {
                "attn_mask": torch.zeros(6, 2, 3, dtype=torch.bool),
                "num_heads": 3,
                "key_padding_mask": torch.zeros(4, 3, dtype=torch.bool),
            },
            r"key_padding_mask has batch size 4",
        ),
        (
            {"attn_mask": torch.zeros(1, 1, 2, 3, dtype=torch.bool)},
            r"attn_mask must have 2 or 3 dimensions",
        ),
        (
            {"key_padding_mask": torch.zeros(3, dtype=torch.bool)},
            r"key_padding_mask must have 2 dimensions",
        ),
    ],
)
def test_from_torch_masks_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        from_torch_masks(**kwargs)
