"""Show, Attend and Tell (Xu et al. 2015): decoder steps against a float64 recomputation of the
paper's equations, attention rows that sum to 1, the doubly stochastic penalty against a float64
hand computation, the grid's layout, step-by-step decoding equal to teacher forcing, greedy and
beam search through attnlab.generation (independent of the batch), a tiny model that overfits
eight images, the baseline without attention, and the errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.generation import beam_search, greedy_search
from attnlab.models import ShowAttendTell, ShowAttendTellConfig, load_pretrained

V, PAD, BOS, EOS = 12, 0, 1, 2
SIZE = 16  # tiny images: two conv stages → a 4 × 4 grid


def tiny(seed: int = 0, **overrides) -> ShowAttendTell:
    torch.manual_seed(seed)
    fields = dict(image_size=SIZE, conv_channels=(8, 16), feature_dim=16, embed_dim=16,
                  hidden_dim=32, attention_dim=16, dropout=0.0)
    return ShowAttendTell(ShowAttendTellConfig(V, **{**fields, **overrides})).eval()


def images(n: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 1, SIZE, SIZE, generator=torch.Generator().manual_seed(seed))


def captions(n: int = 8, seed: int = 0) -> tuple[list[list[int]], torch.Tensor]:
    """``n`` random captions of 2–5 content tokens and their targets ``(n, T)``: bos, caption,
    eos, right-padded."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 6, (n,), generator=g).tolist()
    caps = [torch.randint(3, V, (k,), generator=g).tolist() for k in lengths]
    tgt = torch.full((n, max(lengths) + 2), PAD)
    for i, cap in enumerate(caps):
        tgt[i, : len(cap) + 2] = torch.tensor([BOS, *cap, EOS])
    return caps, tgt


def train(model: ShowAttendTell, x: torch.Tensor, tgt: torch.Tensor, steps: int) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        logits = model(x, tgt[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return float(loss.detach())


@pytest.fixture(scope="module")
def trained():
    """A tiny captioner trained to overfit 8 random images with fixed captions (~1 s)."""
    model = tiny()
    caps, tgt = captions()
    loss = train(model, images(), tgt, steps=200)
    return model, caps, loss


# ----------------------------------------------------------------------------- the equations
def reference_decode(model: ShowAttendTell, a: torch.Tensor, tgt: torch.Tensor):
    """Xu et al. §3.1.2, §4.2 and eq. 7 written out in float64 from the model's weights:
    logits ``(B, T, V)`` and ``α`` ``(B, T, L)``."""
    p = {k: v.detach().double() for k, v in model.state_dict().items()}
    a = a.double()
    mean = a.mean(1)  # (B, D)
    h = torch.tanh(mean @ p["init_h.weight"].T + p["init_h.bias"])
    c = torch.tanh(mean @ p["init_c.weight"].T + p["init_c.bias"])
    logits, alphas = [], []
    for t in range(tgt.shape[1]):
        ey = p["embed.weight"][tgt[:, t]]  # (B, m)
        hidden = (h @ p["attention.score.w_q.weight"].T)[:, None] + a @ p["attention.score.w_k.weight"].T
        e = (torch.tanh(hidden) @ p["attention.score.w_v.weight"].T)[..., 0]  # (B, L), eq. 4
        alpha = e.exp() / e.exp().sum(1, keepdim=True)  # eq. 5
        beta = torch.sigmoid(h @ p["gate.weight"].T + p["gate.bias"])  # (B, 1)
        z = beta * (alpha[..., None] * a).sum(1)  # (B, D)
        gates = (torch.cat([ey, z], 1) @ p["cell.weight_ih"].T + p["cell.bias_ih"]
                 + h @ p["cell.weight_hh"].T + p["cell.bias_hh"])
        i, f, g, o = gates.chunk(4, dim=1)  # PyTorch's gate order
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        deep = ey + h @ p["out_h.weight"].T + z @ p["out_z.weight"].T
        logits.append(deep @ p["out.weight"].T + p["out.bias"])
        alphas.append(alpha)
    return torch.stack(logits, 1), torch.stack(alphas, 1)


def test_decoding_equals_a_float64_recomputation_of_the_paper():
    model = tiny(seed=3)
    with torch.no_grad():  # a sharper, non-uniform attention than the initial one
        model.attention.score.w_v.weight.mul_(10.0)
    _, tgt = captions(3)
    memory = 2 * torch.randn(3, model.num_locations, 16, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits, (weights,) = model.decode(tgt, memory, None, return_weights=True)
        ref_logits, ref_alphas = reference_decode(model, memory, tgt)
    torch.testing.assert_close(logits.double(), ref_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights[:, 0].double(), ref_alphas, atol=1e-6, rtol=1e-5)
    assert ref_alphas.max() > 0.2  # really not uniform (uniform is 1/16)


def test_attention_over_the_grid_sums_to_one_at_every_step():
    model = tiny(seed=1)
    _, tgt = captions(4, seed=1)
    logits, (weights,) = model(images(4), tgt, return_weights=True)  # (B, 1, T, L): one layer, one head
    alphas = weights[:, 0]
    assert logits.shape == (4, tgt.shape[1], V)
    assert alphas.shape == (4, tgt.shape[1], model.num_locations) and model.grid == (4, 4)
    assert (alphas >= 0).all()
    torch.testing.assert_close(alphas.sum(-1), torch.ones(alphas.shape[:2]))


def test_the_default_model_reads_64_pixels_into_an_8_by_8_grid():
    model = ShowAttendTell(ShowAttendTellConfig(V))
    assert model.grid == (8, 8) and model.num_locations == 64
    memory, mask = model.encode(torch.rand(2, 1, 64, 64))
    assert memory.shape == (2, 64, 128) and mask is None


def test_locations_are_row_major_cells_of_the_image():
    """Changing the top-right 8 × 8 cell changes location 7 (row 0, column 7) and never
    location 56 (row 7, column 0), whose receptive field (38 px) does not reach it."""
    model = ShowAttendTell(ShowAttendTellConfig(V)).eval()
    x = torch.rand(1, 1, 64, 64)
    changed = x.clone()
    changed[..., :8, 56:] = torch.rand(8, 8)
    with torch.no_grad():
        a, b = model.encode(x)[0][0], model.encode(changed)[0][0]  # (64, 128)
        moved = (a - b).abs().amax(-1)  # (64,)
    h, w = model.grid
    assert moved[0 * w + 7] > 0 and moved[7 * w + 0] == 0 and moved[h * w - 1] == 0


def test_doubly_stochastic_penalty_equals_a_float64_hand_computation():
    model = tiny(penalty=0.7)
    g = torch.Generator().manual_seed(5)
    alphas = torch.rand(3, 5, 16, generator=g).softmax(-1)  # (B, T, L)
    tgt_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    total = 0.0
    for b in range(3):
        for i in range(16):
            covered = sum(float(alphas[b, t, i]) for t in range(5) if tgt_mask[b, t])
            total += (1.0 - covered) ** 2
    expected = 0.7 * total / 3
    assert float(model.doubly_stochastic_penalty(alphas, tgt_mask)) == pytest.approx(expected, rel=1e-6)
    unmasked = 0.7 * ((1 - alphas.double().sum(1)) ** 2).sum(1).mean()
    assert float(model.doubly_stochastic_penalty(alphas)) == pytest.approx(float(unmasked), rel=1e-6)


def test_the_penalty_trains_through_the_attention():
    model = tiny(seed=2)
    _, tgt = captions(4)
    _, (weights,) = model(images(4), tgt[:, :-1], return_weights=True)
    model.doubly_stochastic_penalty(weights[:, 0], tgt[:, 1:] != PAD).backward()
    assert model.attention.score.w_q.weight.grad.abs().sum() > 0


# ----------------------------------------------------------------------------- decoding
@pytest.mark.parametrize("attention", [True, False])
def test_step_by_step_decoding_equals_teacher_forcing(attention):
    model = tiny(seed=4, attention=attention)
    x, (_, tgt) = images(4, seed=4), captions(4, seed=4)
    memory, mask = model.encode(x)
    full = model.decode(tgt, memory, mask)
    cache = model.new_cache()
    steps = [model.decode(tgt[:, i : i + 1], memory, mask, cache=cache) for i in range(tgt.shape[1])]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.offset == tgt.shape[1]
    torch.testing.assert_close(model(x, tgt), full)
    cached = greedy_search(model, x, max_new_tokens=6, bos_id=BOS, eos_id=EOS)
    assert cached == greedy_search(model, x, max_new_tokens=6, bos_id=BOS, eos_id=EOS, use_cache=False)


def test_a_tiny_model_overfits_eight_images(trained):
    model, caps, loss = trained
    assert loss < 0.05
    assert greedy_search(model, images(), max_new_tokens=8, bos_id=BOS, eos_id=EOS) == caps
    hyps = beam_search(model, images(), beam_size=3, max_new_tokens=8, bos_id=BOS, eos_id=EOS)
    assert [h[0].tokens for h in hyps] == caps


@pytest.mark.parametrize("early_stop", [True, False])
def test_beam_results_do_not_depend_on_the_batch(trained, early_stop):
    model, caps, _ = trained
    x = images()
    kwargs = dict(beam_size=4, n_best=3, max_new_tokens=8, bos_id=BOS, eos_id=EOS, early_stop=early_stop)
    together = beam_search(model, x, **kwargs)
    reversed_order = beam_search(model, x.flip(0), **kwargs)[::-1]
    for i in range(len(x)):
        (alone,) = beam_search(model, x[i : i + 1], **kwargs)
        for other in (alone, reversed_order[i]):
            assert [h.tokens for h in other] == [h.tokens for h in together[i]]
            torch.testing.assert_close(
                [h.score for h in other], [h.score for h in together[i]], rtol=1e-5, atol=1e-5
            )
    assert len({len(c) for c in caps}) > 1  # rows finished at different steps and left the batch


def test_beam_one_is_greedy(trained):
    model, _, _ = trained
    x = images(8, seed=9)  # unseen images: less certain outputs
    greedy = greedy_search(model, x, max_new_tokens=8, bos_id=BOS, eos_id=EOS)
    beam = beam_search(model, x, beam_size=1, max_new_tokens=8, bos_id=BOS, eos_id=EOS, length_penalty=0)
    assert [h[0].tokens for h in beam] == greedy


# ----------------------------------------------------------------------------- no attention
def test_without_attention_the_decoder_reads_only_the_mean_annotation():
    model = tiny(attention=False)
    assert not hasattr(model, "attention") and not hasattr(model, "gate")
    x, (_, tgt) = images(2), captions(2)
    logits, weights = model(x, tgt, return_weights=True)
    assert weights == [] and float(model.doubly_stochastic_penalty(None)) == 0.0
    memory, _ = model.encode(x)
    assert model.decode(tgt, memory, None, return_weights=True)[1] == []
    noise = torch.randn(memory.shape)
    same_mean = memory + noise - noise.mean(1, keepdim=True)  # other annotations, same ā
    torch.testing.assert_close(model.decode(tgt, same_mean, None), logits, atol=1e-5, rtol=1e-5)
    attending = tiny(attention=True)
    assert not torch.allclose(attending.decode(tgt, same_mean, None), attending.decode(tgt, memory, None))


def test_the_baseline_is_the_attention_model_with_uniform_ungated_attention():
    baseline, attending = tiny(seed=6, attention=False), tiny(seed=7)
    attending.load_state_dict(baseline.state_dict(), strict=False)
    with torch.no_grad():
        attending.attention.score.w_v.weight.zero_()  # equal scores: α = 1/L
        attending.gate.weight.zero_()
        attending.gate.bias.fill_(50.0)  # β = σ(50) = 1 in float32
    x, (_, tgt) = images(3), captions(3)
    torch.testing.assert_close(attending(x, tgt), baseline(x, tgt), atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- the seam
@pytest.mark.parametrize("attention", [True, False])
def test_save_and_load_by_model_type(attention, tmp_path):
    model = tiny(attention=attention)
    model.save_pretrained(tmp_path / "m")
    loaded = load_pretrained(tmp_path / "m")
    assert type(loaded) is ShowAttendTell and loaded.config == model.config
    x, (_, tgt) = images(2), captions(2)
    torch.testing.assert_close(loaded(x, tgt), model(x, tgt))


@pytest.mark.parametrize(
    "x, message",
    [
        (torch.rand(2, 3, SIZE, SIZE), r"images have 3 channels but the model takes in_channels=1: "
                                       r"expected shape \(B, 1, 16, 16\), got \(2, 3, 16, 16\)"),
        (torch.rand(2, 1, 28, 28), r"images are 28 × 28 but the model takes image_size=16: "
                                   r"expected shape \(B, 1, 16, 16\), got \(2, 1, 28, 28\)"),
        (torch.rand(1, SIZE, SIZE), r"images must have shape \(B, 1, 16, 16\) \(batch, channels, "
                                    r"height, width\), got shape \(1, 16, 16\)"),
        (torch.zeros(2, 1, SIZE, SIZE, dtype=torch.uint8), "images must be a floating-point tensor"),
    ],
)
def test_bad_images_are_refused_naming_expected_and_got(x, message):
    model = tiny()
    with pytest.raises(ValueError, match=message):
        model.encode(x)
    with pytest.raises(ValueError, match=message):
        greedy_search(model, x, max_new_tokens=3, bos_id=BOS, eos_id=EOS)


def test_teacher_forcing_checks_its_inputs_once_and_decode_checks_unless_told(monkeypatch):
    model = tiny()
    calls = []
    check = ShowAttendTell._check_decode
    monkeypatch.setattr(ShowAttendTell, "_check_decode", lambda self, *a: calls.append(1) or check(self, *a))
    _, tgt = captions(2)
    model(images(2), tgt)  # forward checks the images (encode) and tgt_in itself
    assert calls == []
    memory, _ = model.encode(images(2))
    model.decode(tgt, memory)
    model.decode(tgt, memory, check=False)  # a caller that made tgt itself
    assert calls == [1]
    with pytest.raises(ValueError, match=r"tgt_in must be token ids < vocab_size=12, got a maximum of 40"):
        model(images(1), torch.tensor([[BOS, 40]]))


def test_errors_name_the_bad_value():
    model = tiny()
    _, tgt = captions(2)
    with pytest.raises(ValueError, match=r"src must hold at least one input .* got shape \(0, 1, 16, 16\)"):
        beam_search(model, torch.rand(0, 1, SIZE, SIZE), max_new_tokens=3, bos_id=BOS, eos_id=EOS)
    with pytest.raises(ValueError, match="tgt_in has batch size 2 but images has batch size 3"):
        model(images(3), tgt)
    with pytest.raises(ValueError, match=r"tgt must be token ids < vocab_size=12, got a maximum of 40"):
        model.decode(torch.tensor([[40]]), model.encode(images(1))[0])
    with pytest.raises(ValueError, match=r"tgt_mask has shape \(2, 3\) but alphas has shape \(2, 4, 16\)"):
        model.doubly_stochastic_penalty(torch.rand(2, 4, 16), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"image_size must be divisible by 2 \*\* len\(conv_channels\) = 8"):
        ShowAttendTellConfig(V, image_size=20, conv_channels=(4, 4, 4))
    with pytest.raises(ValueError, match=r"pad_id must be a token id in \[0, 12\), got 12"):
        ShowAttendTellConfig(V, pad_id=12)
    with pytest.raises(ValueError, match="conv_channels must name at least one conv stage"):
        ShowAttendTellConfig(V, conv_channels=())
    with pytest.raises(ValueError, match="penalty must be >= 0, got -1.0"):
        ShowAttendTellConfig(V, penalty=-1.0)
    with pytest.raises(ValueError, match="dropout must be in"):
        ShowAttendTellConfig(V, dropout=1.0)
