"""attnlab's translator ↔ Hugging Face ``MarianMTModel`` (post-LN) and
``PegasusForConditionalGeneration`` (pre-LN) folders: exported and loaded back by
``transformers`` itself (logits equal on a padded batch, greedy and beam ``generate`` equal to
attnlab's search), random ``transformers`` models read into attnlab (logits equal), the tokenizer
read by ``AutoTokenizer`` (the same ids), and every option neither class has refused by name."""

import gzip

import pytest
import torch

from attnlab.data import Tokenizer
from attnlab.generation import beam_search, greedy_search
from attnlab.interop.marian import load_marian, model_order, save_marian, sinusoids
from attnlab.models import Transformer, TransformerConfig
from attnlab.modules.positional import SinusoidalPositionalEncoding

transformers = pytest.importorskip("transformers", reason="transformers: the test extras (make test)")

TINY = dict(src_vocab_size=53, d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=48,
            dropout=0.0, activation="gelu", max_len=40)
PAD, BOS, EOS = 0, 1, 2


def jitter(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial norms and biases (their initial 1s and 0s would hide a misplaced one)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    return model


def padded_batch(src_vocab: int, tgt_vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(4, src_vocab, (3, 9))
    src[1, 6:], src[2, 3:] = PAD, PAD  # right padding, as attnlab batches it
    tgt = torch.randint(4, tgt_vocab, (3, 7))
    tgt[:, 0] = BOS
    return src, tgt


def their_logits(model, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt).logits


CASES = [(False, True, True), (False, True, False), (False, False, True), (False, False, False),
         (True, True, True), (True, True, False)]  # (norm_first, share_embeddings, tie_output)


@pytest.mark.parametrize("norm_first, share, tie", CASES)
def test_an_exported_translator_is_the_same_model_in_transformers(tmp_path, norm_first, share, tie):
    torch.manual_seed(0)
    config = TransformerConfig(**TINY, tgt_vocab_size=53 if share else 41, norm_first=norm_first,
                               share_embeddings=share, tie_output=tie)
    ours = jitter(Transformer(config)).eval()
    save_marian(ours, tmp_path / "hf")
    theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
    expected = "PegasusForConditionalGeneration" if norm_first else "MarianMTModel"
    assert type(theirs).__name__ == expected
    src, tgt = padded_batch(53, config.tgt_vocab_size)
    with torch.no_grad():
        logits = ours(src, tgt)
    assert (logits - their_logits(theirs, src, tgt)).abs().max() <= 1e-5
    back = load_marian(tmp_path / "hf")
    assert (back.config.share_embeddings, back.config.tie_output) == (share, tie)
    with torch.no_grad():
        assert (back(src, tgt) - logits).abs().max() <= 1e-5


def test_without_biases_the_export_writes_zero_biases(tmp_path):
    torch.manual_seed(1)
    ours = Transformer(TransformerConfig(**TINY, bias=False, share_embeddings=True)).eval()
    save_marian(ours, tmp_path / "hf")
    theirs = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    assert theirs.model.encoder.layers[0].fc1.bias.abs().max() == 0
    src, tgt = padded_batch(53, 53)
    with torch.no_grad():
        assert (ours(src, tgt) - their_logits(theirs, src, tgt)).abs().max() <= 1e-5


def test_the_default_special_ids_are_attnlabs_tokenizers():
    from attnlab.data.tokenizers import SPECIAL_TOKENS
    from attnlab.interop.hf_folders import BOS_ID, EOS_ID, PAD_ID

    assert [SPECIAL_TOKENS[i] for i in (PAD_ID, BOS_ID, EOS_ID)] == ["<pad>", "<bos>", "<eos>"]


def test_the_reordered_table_is_transformers_own():
    """attnlab's interleaved sinusoids, columns in model_order, are Marian's sines-then-cosines:
    checked against transformers' own table, for an even and an odd width."""
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    for d in (32, 33):
        theirs = MarianSinusoidalPositionalEmbedding(50, d).create_weight()
        ours = SinusoidalPositionalEncoding(d).table(50).float()[:, model_order(d)]
        assert (ours - theirs).abs().max() <= 1e-6
        assert (sinusoids(50, d) - theirs).abs().max() <= 1e-6


HF_RANDOM = dict(vocab_size=60, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=40, decoder_ffn_dim=40,
                 activation_function="relu", scale_embedding=True, max_position_embeddings=64,
                 pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS, decoder_start_token_id=BOS,
                 forced_eos_token_id=None, dropout=0.0)


@pytest.mark.parametrize("name, extra", [("Marian", {}),
                                         ("Marian", {"share_encoder_decoder_embeddings": False,
                                                     "decoder_vocab_size": 45}),
                                         ("Pegasus", {})])
def test_a_translator_made_by_transformers_reads_into_attnlab_with_the_same_logits(tmp_path, name, extra):
    torch.manual_seed(2)
    config_class = getattr(transformers, f"{name}Config")
    class_name = "MarianMTModel" if name == "Marian" else "PegasusForConditionalGeneration"
    model_class = getattr(transformers, class_name)
    theirs = jitter(model_class(config_class(**HF_RANDOM, **extra))).eval()
    theirs.save_pretrained(tmp_path / "hf")
    ours = load_marian(tmp_path / "hf")
    assert ours.config.norm_first == (name == "Pegasus")
    src, tgt = padded_batch(60, extra.get("decoder_vocab_size", 60))
    with torch.no_grad():
        assert (ours(src, tgt) - their_logits(theirs, src, tgt)).abs().max() <= 1e-5


@pytest.mark.parametrize("option, value", [("positional", "learned"), ("positional", "rope"),
                                           ("norm", "rmsnorm"), ("norm_eps", 1e-6), ("activation", "swiglu"),
                                           ("num_kv_heads", 2)])
def test_an_option_neither_class_has_is_refused_by_name(tmp_path, option, value):
    for norm_first in (False, True):
        model = Transformer(TransformerConfig(**{**TINY, "norm_first": norm_first, option: value}))
        with pytest.raises(ValueError) as err:
            save_marian(model, tmp_path / "out")
        for name in ("MarianMTModel", "PegasusForConditionalGeneration"):
            assert f"{name} has no counterpart for " in str(err.value)
        assert f"no counterpart for {option} = {value!r}" in str(err.value)
        assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_pre_ln_with_two_vocabularies_is_refused_naming_share_embeddings(tmp_path):
    model = Transformer(TransformerConfig(**TINY, tgt_vocab_size=41, norm_first=True))
    with pytest.raises(ValueError, match="PegasusForConditionalGeneration has no counterpart for "
                                         "share_embeddings = False"):
        save_marian(model, tmp_path / "out")


@pytest.mark.parametrize("change, named", [({"activation_function": "swish"}, "activation_function 'swish'"),
                                           ({"scale_embedding": False}, "scale_embedding false")])
def test_a_folder_attnlab_cannot_be_is_refused_on_reading(tmp_path, change, named):
    transformers.MarianMTModel(transformers.MarianConfig(**{**HF_RANDOM, **change})).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=f"translator has no counterpart for {named}"):
        load_marian(tmp_path)


def strip(rows: list[list[int]]) -> list[list[int]]:
    """transformers' outputs as attnlab's: no start token, cut at eos, no padding."""
    out = []
    for row in rows:
        row = row[1:]
        out.append([t for t in (row[: row.index(EOS)] if EOS in row else row) if t != PAD])
    return out


@pytest.mark.parametrize("norm_first", [False, True])
def test_generate_in_transformers_gives_attnlabs_greedy_and_beam_outputs(tmp_path, norm_first):
    """A translator trained a little to reverse its source (outputs of varied lengths): greedy
    with the folder's own generation config, and beam search with attnlab's "simple" length
    penalty L^α, which is transformers' length_penalty (early stopping as attnlab's)."""
    from generation_toys import reversal_batch, toy_translator

    ours = toy_translator(norm_first=norm_first, share_embeddings=True)
    save_marian(ours, tmp_path / "hf")
    theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
    src, _ = reversal_batch(16, torch.Generator().manual_seed(5))
    mask = (src != PAD).long()
    greedy = greedy_search(ours, src, max_new_tokens=9, bos_id=BOS, eos_id=EOS)
    assert len({len(g) for g in greedy}) > 2  # outputs end at varied lengths
    assert strip(theirs.generate(input_ids=src, attention_mask=mask, max_new_tokens=9).tolist()) == greedy
    for alpha in (0.0, 1.0):
        best = beam_search(ours, src, beam_size=4, max_new_tokens=9, bos_id=BOS, eos_id=EOS,
                           length_penalty=alpha, penalty_form="simple")
        out = theirs.generate(input_ids=src, attention_mask=mask, max_new_tokens=9, num_beams=4,
                              length_penalty=alpha, early_stopping=True)
        assert strip(out.tolist()) == [hyps[0].tokens for hyps in best]


@pytest.fixture(scope="module")
def multi30k_bpe() -> Tokenizer:
    from attnlab.data.corpora import data_dir

    lines = []
    for lang in ("de", "en"):
        with gzip.open(data_dir() / "multi30k" / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            lines += [next(f) for _ in range(2000)]
    return Tokenizer.train(lines, 500)


LINES = ["Ein Mann fährt Fahrrad.", "A dog , runs . <eos> isn't <pad>", "  spaces  ", "Ünïcödé 東京", ""]


def test_autotokenizer_reads_the_folders_tokenizer_with_attnlabs_ids(tmp_path, multi30k_bpe):
    tok = multi30k_bpe
    config = TransformerConfig(**{**TINY, "src_vocab_size": tok.vocab_size}, share_embeddings=True)
    model = Transformer(config)
    save_marian(model, tmp_path / "hf", tokenizer_json=tok.to_json())
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert (theirs.pad_token_id, theirs.bos_token_id, theirs.eos_token_id) == (PAD, BOS, EOS)
    for line in LINES:
        assert theirs(line)["input_ids"] == tok.encode(line)  # sources: no <bos>/<eos>, as attnlab's
        ids = [*tok.encode(line), EOS, PAD]
        assert theirs.decode(ids, skip_special_tokens=True) == tok.decode(ids)


def test_two_vocabularies_write_the_target_tokenizer_in_its_subfolder(tmp_path, multi30k_bpe):
    src_tok = multi30k_bpe
    tgt_tok = Tokenizer.train(["A dog runs on the grass.", "Two men play football."] * 5, 300)
    config = TransformerConfig(**{**TINY, "src_vocab_size": src_tok.vocab_size},
                               tgt_vocab_size=tgt_tok.vocab_size)
    save_marian(Transformer(config), tmp_path / "hf", tokenizer_json=src_tok.to_json(),
                target_tokenizer_json=tgt_tok.to_json())
    source = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    target = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf" / "target_tokenizer")
    assert source(LINES[0])["input_ids"] == src_tok.encode(LINES[0])
    ids = tgt_tok.encode("A dog runs.") + [EOS]
    assert target.decode(ids, skip_special_tokens=True) == tgt_tok.decode(ids) == "A dog runs."
