"""Optimizers: the paper's Adam settings and AdamW decay / no-decay parameter groups."""

import copy

import pytest
import torch
from torch import nn

from attnlab.training.optim import (
    adamw,
    fused_kernel,
    make_optimizer,
    no_decay_names,
    param_groups,
    translation_adam,
)


class RMSNormLike(nn.Module):  # a custom norm class, recognised by its name
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))


class LearnedPositionalEmbedding(nn.Module):  # a custom embedding holding a 2-D table
    def __init__(self, n, d):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(n, d))


class TinyGPT(nn.Module):
    def __init__(self, vocab=11, d=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = LearnedPositionalEmbedding(5, d)
        self.ln = nn.LayerNorm(d)
        self.rms = RMSNormLike(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d, bias=False)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied input / output embedding
        self.frozen = nn.Linear(d, d)
        self.frozen.requires_grad_(False)


def test_no_decay_for_biases_norms_and_embeddings_including_tied_head():
    model = TinyGPT()
    assert no_decay_names(model) == {
        "tok.weight",
        "pos.table",
        "ln.weight",
        "ln.bias",
        "rms.weight",
        "fc.bias",
        "frozen.bias",
    }
    groups = param_groups(model, 0.1)
    decay = {id(p) for p in groups[0]["params"]}
    no_decay = {id(p) for p in groups[1]["params"]}
    assert decay == {id(model.fc.weight), id(model.out.weight)}
    assert id(model.tok.weight) in no_decay and id(model.head.weight) in no_decay
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert decay | no_decay == trainable and not decay & no_decay
    assert sum(len(g["params"]) for g in groups) == len(trainable)  # tied weight listed once


def test_nanogpt_rule_decays_embedding_tables_too():
    model = TinyGPT()
    assert no_decay_names(model, decay_embeddings=True) == {
        "ln.weight", "ln.bias", "rms.weight", "fc.bias", "frozen.bias"
    }
    groups = param_groups(model, 0.1, decay_embeddings=True)
    decay = {id(p) for p in groups[0]["params"]}
    assert decay == {id(model.tok.weight), id(model.pos.table), id(model.fc.weight), id(model.out.weight)}


def test_adamw_decays_only_the_decay_group():
    model = TinyGPT()
    opt = adamw(model, lr=0.1, weight_decay=0.5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # zero gradient: only weight decay moves parameters
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt.step()
    for name, p in model.named_parameters():
        if name in ("fc.weight", "out.weight"):
            torch.testing.assert_close(p, before[name] * (1 - 0.1 * 0.5))
        else:
            torch.testing.assert_close(p, before[name], rtol=0, atol=0)


def test_translation_adam_uses_the_paper_hyperparameters():
    opt = translation_adam(nn.Linear(3, 3))
    group = opt.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9 and group["weight_decay"] == 0
    assert isinstance(opt, torch.optim.Adam)


def test_make_optimizer_by_name_and_errors():
    model = TinyGPT()
    assert make_optimizer(model, "adam", lr=1e-3).param_groups[0]["betas"] == (0.9, 0.98)
    w = make_optimizer(model, "adamw", lr=1e-3, weight_decay=0.1, betas=(0.9, 0.99))
    assert isinstance(w, torch.optim.AdamW) and w.param_groups[0]["betas"] == (0.9, 0.99)
    with pytest.raises(ValueError, match="optimizer name must be 'adam' or 'adamw', got 'sgd'"):
        make_optimizer(model, "sgd", lr=1e-3)
    with pytest.raises(ValueError, match="weight_decay must be 0 for 'adam'"):
        make_optimizer(model, "adam", lr=1e-3, weight_decay=0.1)
    with pytest.raises(ValueError, match="weight_decay must be >= 0, got -1"):
        param_groups(model, -1)



@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_fused_kernel_updates_like_the_reference_loop(name):
    """The optimizers use PyTorch's fused kernel on the CPU; five steps of it equal the
    single-tensor loop of the same optimizer class and groups (float32 rounding apart)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.LayerNorm(7), nn.Linear(7, 3))
    twin = copy.deepcopy(model)
    ours = make_optimizer(model, name, lr=1e-2, **({"weight_decay": 0.1} if name == "adamw" else {}))
    assert all(g["fused"] for g in ours.param_groups)
    twin_of = dict(zip(map(id, model.parameters()), twin.parameters(), strict=True))
    groups = [
        {**{k: v for k, v in g.items() if k not in ("params", "fused", "foreach")},
         "params": [twin_of[id(p)] for p in g["params"]]}
        for g in ours.param_groups
    ]
    reference = type(ours)(groups, fused=False, foreach=False)
    x = torch.randn(16, 5)
    for _ in range(5):
        for m, opt in ((model, ours), (twin, reference)):
            opt.zero_grad()
            m(x).pow(2).sum().backward()
            opt.step()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert not fused_kernel([torch.zeros(2, dtype=torch.long)])
