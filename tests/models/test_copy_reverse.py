"""Tiny encoder-decoders really learn to copy and to reverse sequences (seeded training runs):
the Transformer, Bahdanau's attention GRU and Cho's fixed-context GRU.

Held-out sequences never appear in training; greedy decoding through each model's cache must
then reproduce them: every one for the attention models; Cho's model, which squeezes the
sequence into one vector, at least 95 % of them.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.models import (
    AttentionSeq2Seq,
    AttentionSeq2SeqConfig,
    RNNSeq2Seq,
    RNNSeq2SeqConfig,
    Transformer,
    TransformerConfig,
)

PAD, BOS, EOS, FIRST, VOCAB = 0, 1, 2, 3, 13  # symbols 3..12
MIN_LEN, MAX_LEN = 3, 8


def random_sequences(n: int, gen: torch.Generator) -> list[list[int]]:
    lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (n,), generator=gen).tolist()
    return [torch.randint(FIRST, VOCAB, (k,), generator=gen).tolist() for k in lengths]


def pad(rows: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), PAD)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out  # (B, n)


def target(seq: list[int], task: str) -> list[int]:
    return seq if task == "copy" else seq[::-1]


MODELS = {
    "transformer": lambda: Transformer(TransformerConfig(
        src_vocab_size=VOCAB, d_model=64, num_heads=4, num_encoder_layers=2,
        num_decoder_layers=2, d_ff=128, dropout=0.0, pad_id=PAD, max_len=16,
    )),
    "attention_seq2seq": lambda: AttentionSeq2Seq(AttentionSeq2SeqConfig(
        VOCAB, embed_dim=32, encoder_dim=32, hidden_dim=64, attention_dim=32, dropout=0.0, pad_id=PAD,
    )),
    "rnn_seq2seq": lambda: RNNSeq2Seq(RNNSeq2SeqConfig(
        VOCAB, embed_dim=32, hidden_dim=128, dropout=0.0, pad_id=PAD,
    )),
}
# Cho's one context vector needs more steps to pack a sequence in; measured: 3 and 1 of 200
# wrong (copy, reverse) after 1,000 steps.
STEPS = {"transformer": 400, "attention_seq2seq": 400, "rnn_seq2seq": 1000}
SOLVED = {"transformer": 1.0, "attention_seq2seq": 1.0, "rnn_seq2seq": 0.95}  # held-out fraction exact


def train(kind: str, task: str, held_out: set[tuple[int, ...]], gen: torch.Generator) -> torch.nn.Module:
    model, steps = MODELS[kind](), STEPS[kind]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    # linear warm-up over 20 steps, then linear decay to 0: stable convergence in few steps
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / 20, 1.0) * (1 - s / steps)
    )
    for _ in range(steps):
        seqs = [s for s in random_sequences(64, gen) if tuple(s) not in held_out]
        src = pad(seqs)
        tgt = pad([[BOS, *target(s, task), EOS] for s in seqs])  # (B, T + 2)
        logits = model(src, tgt[:, :-1])  # teacher forcing: (B, T + 1, V)
        loss = F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        schedule.step()
    return model.eval()


@torch.no_grad()
def greedy(model: torch.nn.Module, src: torch.Tensor, max_steps: int) -> list[list[int]]:
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    token = torch.full((src.shape[0], 1), BOS)
    out = []
    for _ in range(max_steps):
        token = model.decode(token, memory, src_mask, cache=cache)[:, -1].argmax(-1, keepdim=True)
        out.append(token)
    rows = torch.cat(out, dim=1).tolist()
    return [row[: row.index(EOS)] if EOS in row else row for row in rows]


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_tiny_model_learns_task(kind, task):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    test_seqs = random_sequences(200, gen)
    model = train(kind, task, {tuple(s) for s in test_seqs}, gen)
    predictions = greedy(model, pad(test_seqs), MAX_LEN + 1)
    wrong = [(s, p) for s, p in zip(test_seqs, predictions, strict=True) if p != target(s, task)]
    assert len(wrong) <= (1 - SOLVED[kind]) * 200, (
        f"{kind}: {len(wrong)}/200 held-out sequences wrong, e.g. {wrong[:3]}"
    )
