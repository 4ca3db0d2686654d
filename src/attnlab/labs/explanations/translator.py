"""Explaining a translator's copied words, whose source is known.

A word written identically in the German source and the model's English translation, exactly
once in each (a name, a number, "in", "Frisbee"), came from that source word: a translator that
copies it reads it (the alignment Bahdanau et al. 2015 draw on their diagonal, Figure 3, known
here without annotators). German words spelled like an English word of another meaning
(:data:`FALSE_FRIENDS`: "an", "hat", "will", ...) are left out. Each such word of the model's
own greedy translation of the Multi30k test and validation sentences is one case: the output is
the log-probability of its first subword, the candidates the source subwords, the truth the
copied word's subwords. Names and numbers are rare there, so they are also gathered from the
training sentences whose reference translation repeats a name or a number of the source
(:func:`name_sentences`), and scored apart.

The methods, for a Transformer (``model_type`` ``transformer``) and for Bahdanau's RNN
translator (``attention_seq2seq``):

* **attention**: the cross-attention row that wrote the subword (the Transformer: its last
  decoder layer, heads averaged; the RNN: ``α_i``);
* **rollout**, **flow**: over :func:`~attnlab.explain.graphs.encoder_decoder_graph` (encoder
  self-, decoder self- and cross-attention) or the RNN decoder's
  :func:`~attnlab.explain.graphs.recurrent_graph`;
* **gradient × attention**: ``Σ A ⊙ ∂f/∂A`` per source position over the cross-attention row
  that wrote the subword (every layer and head; the RNN: its step), and, **all maps**, over
  every query row (every step);
* **integrated gradients**: over the source subwords' embeddings from zero embeddings, summed
  over the embedding width.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from attnlab.explain import (
    attention_flow,
    attention_rollout,
    encoder_decoder_graph,
    gradient_x_attention,
    integrated_gradients,
    per_key,
    recording_attention,
    recurrent_graph,
)
from attnlab.explain.gradients import Attribution
from attnlab.explain.scores import pointing_hit
from attnlab.labs.checkpoints import corpora_needed
from attnlab.labs.explanations.outputs import token_log_probs
from attnlab.labs.explanations.pictures import TranslationExample
from attnlab.labs.explanations.tally import Tally
from attnlab.labs.report import LabOptions
from attnlab.progress import progress_bar

MODEL_TYPES = ("transformer", "attention_seq2seq")
FALSE_FRIENDS = frozenset({"also", "an", "bin", "die", "fast", "hat", "war", "will"})
"""German words spelled like an English word of another meaning: a match is no copy."""


@dataclass(frozen=True)
class Copy:
    """A copied word: ``position`` of its first subword in the translation, ``sources`` the
    source subword positions of the same word, ``text`` the word, ``named`` whether it is a
    name or a number (a digit, or a capital away from both sentences' first word)."""

    position: int
    sources: tuple[int, ...]
    text: str
    named: bool


def _plain(piece: str) -> bool:
    """A piece with no letter or digit (punctuation, a space)."""
    return not any(ch.isalnum() for ch in piece)


def words(pieces: list[str]) -> list[tuple[str, list[int]]]:
    """Group subword strings into words ``(text, positions)``: a word starts at a piece that
    opens with a space or holds no letter or digit, and after such a piece."""
    grouped: list[tuple[str, list[int]]] = []
    for i, piece in enumerate(pieces):
        opens = not grouped or piece.startswith(" ") or _plain(piece) or _plain(grouped[-1][0])
        if opens:
            grouped.append((piece.strip(), [i]))
        else:
            text, positions = grouped[-1]
            grouped[-1] = (text + piece, positions + [i])
    return grouped


def copied_words(source: list[str], output: list[str]) -> list[Copy]:
    """The words of ``output`` (subword strings) written exactly once in it and exactly once,
    identically, in ``source``, that hold a letter or a digit and are no false friend."""
    src_words, out_words = words(source), words(output)
    src_count = Counter(text for text, _ in src_words)
    out_count = Counter(text for text, _ in out_words)
    where = {text: positions for text, positions in src_words}
    copies = []
    for k, (text, positions) in enumerate(out_words):
        if _plain(text) or src_count[text] != 1 or out_count[text] != 1 or text in FALSE_FRIENDS:
            continue
        first_in_source = where[text][0] == 0
        named = any(ch.isdigit() for ch in text) or (_is_name(text, k) and not first_in_source)
        copies.append(Copy(positions[0], tuple(where[text]), text, named))
    return copies


@contextmanager
def replacing_output(module: nn.Module, value: Tensor | None) -> Iterator[None]:
    """While active, ``module``'s output is ``value`` (nothing changes when ``None``)."""
    handle = None if value is None else module.register_forward_hook(lambda m, args, out: value)
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()


def _run(model: nn.Module, src: Tensor, tgt_in: Tensor, embedded: Tensor | None = None):
    """Teacher-forced logits ``(k, T, V)`` and the recorded maps: ``(encoder, decoder)`` stacks'
    weights for a Transformer, ``(alphas,)`` for the RNN. ``embedded`` ``(k, S, E)`` replaces the
    source embeddings (the batch widened to ``k``)."""
    k = 1 if embedded is None else embedded.shape[0]
    src, tgt_in = src.expand(k, -1), tgt_in.expand(k, -1)
    transformer = model.model_type == "transformer"
    modules = (model.stack.encoder, model.stack.decoder) if transformer else (model.alignment,)
    with recording_attention(*modules) as records:
        with replacing_output(model.src_embed, embedded):
            memory, mask = model.encode(src)
        logits = model.decode(tgt_in, memory, mask)
    if transformer:
        (encoder,), (decoder,) = records
        return logits, (encoder, [s for s, _ in decoder], [c for _, c in decoder])
    return logits, (records[0],)


def _graph_methods(
    model: nn.Module, maps: tuple, position: int, sources: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Raw attention, rollout and flow of output ``position`` over the ``sources`` positions."""
    if model.model_type == "transformer":
        encoder, own, cross = (torch.cat(m).detach() for m in maps)  # (L, H, ·, ·)
        raw = cross[-1, :, position].mean(0)
        graph = encoder_decoder_graph(encoder, own, cross)
        row = sources + position
    else:
        alphas = torch.cat(maps[0]).detach()  # (T, S)
        raw = alphas[position]
        graph = recurrent_graph(alphas[:position + 1])
        row = sources
    rollout = attention_rollout(graph)[row, :sources]
    flow = attention_flow(graph, [row], range(sources))[0, :sources]
    return raw.double(), torch.from_numpy(rollout), torch.from_numpy(np.ascontiguousarray(flow))


def _own_row(terms: list[Tensor], position: int) -> list[Tensor]:
    """The terms of the row that wrote output ``position``: of each ``(B, H, T, S)`` layer its
    row, of a recurrent decoder's ``(B, S)`` steps the step."""
    if terms[0].ndim == 4:
        return [t[:, :, position:position + 1] for t in terms]
    return terms[position:position + 1]


def explain_sentence(model: nn.Module, src: list[int], out: list[int], bos: int, eos: int,
                     positions: list[int], steps: int) -> tuple[list[dict[str, Tensor]], Attribution]:
    """Each method's relevance ``(S,)`` for the output subwords at ``positions`` of ``out``
    (the model's translation of ``src``, teacher-forced after ``bos``), and the integrated
    gradients' :class:`~attnlab.explain.Attribution`."""
    src_t = torch.tensor([src])
    tgt_in, targets = torch.tensor([[bos, *out]]), torch.tensor([*out, eos])
    with torch.enable_grad():
        logits, maps = _run(model, src_t, tgt_in)
        outputs = token_log_probs(logits, targets, positions)[0]  # (m,)
        attended = maps[-1]  # the cross-attention maps (Transformer) / the steps' alphas (RNN)
        terms = [gradient_x_attention(outputs[k], attended, retain_graph=k + 1 < len(positions))
                 for k in range(len(positions))]
    embedding = model.src_embed.weight[src_t[0]].detach()  # (S, E)
    ig = integrated_gradients(lambda e: token_log_probs(_run(model, src_t, tgt_in, e)[0], targets, positions),
                              embedding, steps=steps)
    found = []
    for k, p in enumerate(positions):
        raw, rollout, flow = _graph_methods(model, maps, p, len(src))
        found.append({"attention": raw, "rollout": rollout, "flow": flow,
                      "gradient × attention": per_key(_own_row(terms[k], p))[0].double(),
                      "gradient × attention, all maps": per_key(terms[k])[0].double(),
                      "integrated gradients": ig.attributions[k].sum(-1).double()})
    return found, ig


SPLITS = ("test_2016_flickr", "val")  # Multi30k's 2016 test split, then validation


def _is_name(word: str, index: int) -> bool:
    return any(ch.isdigit() for ch in word) or (word[:1].isupper() and index > 0)


def name_sentences(pairs: list[tuple[str, str]]) -> list[str]:
    """The sources of ``pairs`` whose reference repeats one of their names or numbers (a word
    with a digit, or capitalised and not first; once on each side, not first in the reference)."""
    chosen = []
    for source, reference in pairs:
        src, ref = re.findall(r"\w+", source), re.findall(r"\w+", reference)
        if any(_is_name(w, i) and src.count(w) == 1 and ref.count(w) == 1 and ref.index(w) > 0
               for i, w in enumerate(src)):
            chosen.append(source)
    return chosen


def explain_translator(checkpoint: Path, options: LabOptions, tallies: tuple[Tally, Tally], steps: int,
                       sentences: int | None) -> TranslationExample | None:
    """Translate the Multi30k test and validation sources greedily (the first ``sentences``
    only, when given: then no training sentence), score every method on every copied word
    (``tallies``: all copied words, names and numbers), and on the names and numbers of the
    training sentences of :func:`name_sentences`; as the example, the first copied word of the
    test split whose raw attention points elsewhere (else the first copied word)."""
    from attnlab.data import load_multi30k
    from attnlab.pipelines import TranslationPipeline

    translator = TranslationPipeline.from_checkpoint(checkpoint, device="cpu")
    model, data = translator.model.eval(), translator.recipe.get("data", {})
    with corpora_needed("explanations"):
        languages = (data.get("src_lang", "de"), data.get("tgt_lang", "en"), options.data_dir)
        sources = [s for split in SPLITS for s, _ in load_multi30k(split, *languages)][:sentences]
        train = [] if sentences is not None else name_sentences(load_multi30k("train", *languages))
    decoding, example = translator.settings(beam_size=1), None
    total = len(sources) + len(train)
    with progress_bar(total, unit="sentence", desc=model.model_type, enabled=options.progress) as bar:
        for text in sources:
            for found in _explain_text(translator, checkpoint, text, decoding, tallies, steps):
                if example is None or (_attention_hits(example) and not _attention_hits(found)):
                    example = found
            bar.update(1)
        for text in train:
            _explain_text(translator, checkpoint, text, decoding, (None, tallies[1]), steps)
            bar.update(1)
    return example


def _attention_hits(example: TranslationExample) -> bool:
    return pointing_hit(example.relevances["attention"], example.truth) == 1.0


def _explain_text(translator, checkpoint: Path, text: str, decoding, tallies: tuple[Tally | None, Tally],
                  steps: int) -> list[TranslationExample]:
    """Translate one source greedily, score every method on its copied words (all of them
    into the first tally, when there is one; the names and numbers into the second); each of
    them as a possible example."""
    from attnlab.pipelines.decoding import search

    model, bos, eos = translator.model, translator.tgt_tok.bos_id, translator.tgt_tok.eos_id
    src = translator.src_tok.encode(text)
    out = search(model, torch.tensor([src]), decoding, decoding.limit(len(src)), bos_id=bos, eos_id=eos)[0]
    pieces = translator.src_tok.token_strings(src)
    copies = copied_words(pieces, translator.tgt_tok.token_strings(out))
    if tallies[0] is None:
        copies = [c for c in copies if c.named]
    if not copies:
        return []
    found, ig = explain_sentence(model, src, out, bos, eos, [c.position for c in copies], steps)
    _score(copies, found, ig, len(src), tallies)
    translation = translator.tgt_tok.decode(out)
    return [TranslationExample(checkpoint, pieces, text, translation, c.text, relevances, _truth(c, len(src)))
            for c, relevances in zip(copies, found, strict=True)]


def _truth(copy: Copy, sources: int) -> Tensor:
    truth = torch.zeros(sources, dtype=torch.bool)
    truth[list(copy.sources)] = True
    return truth


def _score(copies: list[Copy], found: list[dict[str, Tensor]], ig: Attribution, sources: int,
           tallies: tuple[Tally | None, Tally]) -> None:
    """Score each copied word into the first tally (when there is one), and into the second
    when it is a name or a number."""
    every, named = tallies
    (every or named).completeness(ig)
    for copy, relevances in zip(copies, found, strict=True):
        if every is not None:
            every.add(relevances, _truth(copy, sources), label=copy.text)
        if copy.named:
            named.add(relevances, _truth(copy, sources), label=copy.text)
