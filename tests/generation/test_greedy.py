"""Greedy decoding: against plain full-recompute loops written here, batched and cached."""

from __future__ import annotations

import pytest
import torch

from attnlab.generation import greedy_search, window_start
from attnlab.generation.state import make_state
from generation_toys import BOS, EOS, PAD, tiny_gpt, toy_translator


def reference_translate(model, src_row, max_new, eos=EOS):
    """Greedy by teacher-forced full forward passes on one unpadded sentence (no cache)."""
    src = src_row[src_row != PAD].unsqueeze(0)  # (1, S')
    tgt, out = torch.tensor([[BOS]]), []
    with torch.no_grad():
        for _ in range(max_new):
            logits = model(src, tgt)[0, -1]  # (V,)
            logits[[PAD, BOS]] = float("-inf")
            token = int(logits.argmax())
            if token == eos:
                break
            out.append(token)
            tgt = torch.cat([tgt, torch.tensor([[token]])], dim=1)
    return out


def reference_lm(model, prompt, max_new, block_size):
    """nanoGPT's loop: crop the context to the last block_size tokens, full forward, argmax."""
    idx = torch.tensor([prompt])
    with torch.no_grad():
        for _ in range(max_new):
            logits = model(idx[:, -block_size:])[:, -1]  # (1, V)
            idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
    return idx[0, len(prompt) :].tolist()


@pytest.mark.parametrize("use_cache", [True, False])
def test_translator_batch_equals_reference_per_sentence(translator, batch, use_cache):
    out = greedy_search(
        translator, batch, max_new_tokens=9, bos_id=BOS, eos_id=EOS, use_cache=use_cache
    )
    expected = [reference_translate(translator, row, 9) for row in batch]
    assert out == expected
    lengths = {len(o) for o in out}
    assert len(lengths) > 1 and min(lengths) < 9  # rows stopped at eos at different steps


def test_eos_truncates_at_its_first_occurrence(translator, batch):
    """With eos = some token the greedy path would emit later, each row stops right there."""
    base = greedy_search(translator, batch, max_new_tokens=9, bos_id=BOS, eos_id=EOS)
    new_eos = base[0][1]
    out = greedy_search(translator, batch, max_new_tokens=9, bos_id=BOS, eos_id=new_eos)
    for row, cut in zip(base, out, strict=True):
        if new_eos in row:
            assert cut == row[: row.index(new_eos)]
    assert out == [reference_translate(translator, row, 9, eos=new_eos) for row in batch]


def test_translator_never_emits_pad_or_bos(translator, batch):
    out = greedy_search(translator, batch, max_new_tokens=12, bos_id=BOS, eos_id=EOS)
    assert all(PAD not in row and BOS not in row and EOS not in row for row in out)


def test_learned_positions_cap_the_output(batch):
    model = toy_translator(steps=0, positional="learned", max_len=6)  # sources have 6 columns
    no_eos = torch.tensor([EOS])
    model.output.register_forward_hook(
        lambda m, args, out: out.index_fill(-1, no_eos, float("-inf"))
    )
    out = greedy_search(model, batch, max_new_tokens=50, bos_id=BOS, eos_id=EOS)
    assert [len(o) for o in out] == [6] * len(batch)  # a 7th token would need position 7


@pytest.mark.parametrize("positional", ["learned", "rope", "alibi"])
def test_lm_equals_nanogpt_loop_within_the_block(positional):
    model = tiny_gpt(positional)
    prompt = [3, 1, 4, 1, 5]
    out = greedy_search(model, prompt=prompt, max_new_tokens=11)
    assert out == [reference_lm(model, prompt, 11, block_size=16)]


@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
def test_window_keep_block_size_is_nanogpt_crop(positional):
    model = tiny_gpt(positional, block_size=8)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]  # longer than the block already
    out = greedy_search(model, prompt=prompt, max_new_tokens=20, window_keep=8)
    assert out == [reference_lm(model, prompt, 20, block_size=8)]


@pytest.mark.parametrize("positional", ["learned", "rope", "alibi"])
@pytest.mark.parametrize("keep", [None, 1, 5, 8])
def test_lm_sliding_window_cached_equals_recomputed(positional, keep):
    model = tiny_gpt(positional, block_size=8)
    prompt = torch.tensor([[3, 1, 4], [2, 7, 1]])
    kwargs = dict(prompt=prompt, max_new_tokens=30, window_keep=keep)
    assert greedy_search(model, **kwargs) == greedy_search(model, use_cache=False, **kwargs)


def test_sliding_window_feeds_what_the_rule_says():
    """Every call sees at most block_size tokens; after a slide exactly ``keep`` are re-encoded
    from position 0, otherwise one new token follows the cache."""
    block, keep, prompt_len, new = 8, 3, 5, 20
    model = tiny_gpt("learned", block_size=block)
    calls = []
    hook = model.register_forward_pre_hook(
        lambda m, args, kwargs: calls.append((kwargs["cache"].offset, args[0].shape[1])),
        with_kwargs=True,
    )
    try:
        greedy_search(model, prompt=list(range(prompt_len)), max_new_tokens=new, window_keep=keep)
    finally:
        hook.remove()
    assert len(calls) == new
    start = 0
    for step, (offset, n) in enumerate(calls):
        length = prompt_len + step  # tokens known before this call
        assert offset + n <= block
        new_start = window_start(length, start, block, keep)
        if step == 0 or new_start != start:
            assert (offset, n) == (0, length - new_start)
        else:
            assert (offset, n) == (length - 1 - start, 1)
        start = new_start
    assert sum(n == keep for _, n in calls) >= 2  # the window slid more than once


def test_restores_training_mode(translator, batch):
    translator.train()
    try:
        greedy_search(translator, batch, max_new_tokens=3, bos_id=BOS, eos_id=EOS)
        assert translator.training
    finally:
        translator.eval()


def test_restores_each_modules_mode_and_decodes_in_eval(translator, batch):
    translator.train()
    translator.decoder.layers[0].eval()  # mixed modes come back as they were
    before = {name: m.training for name, m in translator.named_modules()}
    seen = []
    hook = translator.decoder.register_forward_pre_hook(
        lambda module, args: seen.append(any(m.training for m in translator.modules()))
    )
    try:
        greedy_search(translator, batch, max_new_tokens=3, bos_id=BOS, eos_id=EOS)
        assert seen and not any(seen)  # every decoding step ran in eval mode
        assert {name: m.training for name, m in translator.named_modules()} == before
    finally:
        hook.remove()
        translator.eval()


def test_unpadded_sources_drop_the_mask(translator, batch):
    """Sources without padding decode with no mask (nothing to look at each step); padded ones
    keep theirs; both equal the per-sentence reference."""
    same = batch[:, :2].clone()  # every row's first 2 tokens: no padding
    assert bool((same != PAD).all())
    with torch.inference_mode():
        assert make_state(translator, same, None, bos_id=BOS, eos_id=EOS, use_cache=True)[0].src_mask is None
        padded = make_state(translator, batch, None, bos_id=BOS, eos_id=EOS, use_cache=True)[0]
        assert padded.src_mask is not None and not bool(padded.src_mask.all())
    out = greedy_search(translator, same, max_new_tokens=6, bos_id=BOS, eos_id=EOS)
    assert out == [reference_translate(translator, row, 6) for row in same]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(max_new_tokens=0, bos_id=BOS, eos_id=EOS), "max_new_tokens must be > 0, got 0"),
        (dict(max_new_tokens=-3, bos_id=BOS, eos_id=EOS), "max_new_tokens must be > 0, got -3"),
        (dict(max_new_tokens=2.5, bos_id=BOS, eos_id=EOS), "max_new_tokens must be a positive int"),
        (dict(max_new_tokens=4, eos_id=EOS), "needs bos_id and eos_id"),
        (dict(max_new_tokens=4, bos_id=BOS, eos_id=EOS, prompt=[3]), "exactly one of src"),
    ],
)
def test_translator_errors(translator, batch, kwargs, message):
    with pytest.raises(ValueError, match=message):
        greedy_search(translator, batch, **kwargs)


def test_lm_errors():
    model = tiny_gpt()
    with pytest.raises(ValueError, match=r"prompt must hold at least one token.*\(1, 0\)"):
        greedy_search(model, prompt=[], max_new_tokens=3)
    with pytest.raises(ValueError, match="src is for encoder-decoder models"):
        greedy_search(model, torch.tensor([[3, 4]]), max_new_tokens=3)
    with pytest.raises(
        ValueError, match="prompt must be token ids < vocab_size=17, got a maximum of 99"
    ):
        greedy_search(model, prompt=[3, 99], max_new_tokens=3)
    with pytest.raises(ValueError, match=r"window_keep must be in \[1, block_size=16\], got 17"):
        greedy_search(model, prompt=[3], max_new_tokens=3, window_keep=17)
