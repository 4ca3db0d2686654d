"""``attnlab export CKPT OUT`` (:func:`attnlab.interop.export.save_hf`) on each model it takes —
a translator, a GPT with a character tokenizer, a BERT-style encoder — each folder loaded back by
``transformers`` (the same outputs, ``AutoTokenizer`` giving attnlab's ids), and a model with no
Hugging Face class refused in one line."""

import pytest
import torch

from attnlab.cli import main
from attnlab.data import CharTokenizer, Tokenizer
from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig
from attnlab.pipelines import LanguageModelPipeline, TranslationPipeline

transformers = pytest.importorskip("transformers", reason="transformers: the test extras (make test)")

GERMAN = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball im Park.",
          "Eine Frau liest ein Buch."]
ENGLISH = ["A dog runs across the grass.", "Two men play soccer in the park.", "A woman reads a book."]


def export(capsys, checkpoint, out) -> str:
    assert main(["export", str(checkpoint), str(out), "--format", "hf"]) == 0
    return capsys.readouterr().out.strip()


@pytest.mark.parametrize("joint", [True, False])
def test_a_translator_checkpoint_exports_with_its_tokenizers(tmp_path, capsys, joint):
    src_tok = Tokenizer.train(GERMAN + ENGLISH, 300)  # byte-level BPE, as the translation task learns
    tgt_tok = src_tok if joint else Tokenizer.train(ENGLISH, 280)
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size,
                               d_model=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=2, d_ff=64,
                               dropout=0.0, share_embeddings=joint)
    model = Transformer(config).eval()
    TranslationPipeline(model, src_tok, tgt_tok).save(tmp_path / "ckpt")
    said = export(capsys, tmp_path / "ckpt", tmp_path / "hf")
    assert said == f"{tmp_path / 'hf'}: MarianMTModel and its tokenizer"
    theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
    source = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    target = transformers.AutoTokenizer.from_pretrained(tmp_path / ("hf" if joint else "hf/target_tokenizer"))
    batch = source(GERMAN, padding=True, return_tensors="pt")
    assert batch["input_ids"][0, : len(src_tok.encode(GERMAN[0]))].tolist() == src_tok.encode(GERMAN[0])
    tgt = torch.tensor([[1, *tgt_tok.encode(e)[:4]] for e in ENGLISH])
    with torch.no_grad():
        expected = model(batch["input_ids"], tgt)
        got = theirs(**batch, decoder_input_ids=tgt).logits
    assert (expected - got).abs().max() <= 1e-5
    ids = tgt_tok.encode(ENGLISH[1]) + [2]
    assert target.decode(ids, skip_special_tokens=True) == tgt_tok.decode(ids)


def test_a_character_gpt_exports_with_a_tokenizer_transformers_reads(tmp_path, capsys):
    """The character tokenizer becomes a BPE without merges: one token a character."""
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
    tok = CharTokenizer.train(text)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=64, d_model=32, num_heads=4, num_layers=2,
                          positional="learned", activation="gelu", norm_first=True, bias=True)).eval()
    LanguageModelPipeline(model, tok).save(tmp_path / "ckpt")
    assert export(capsys, tmp_path / "ckpt", tmp_path / "hf").endswith("and its tokenizer")
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert theirs(text)["input_ids"] == tok.encode(text)
    assert theirs.decode(tok.encode(text)) == text
    assert theirs("Z")["input_ids"] == [tok.unk_id]  # attnlab refuses the character; transformers: <unk>
    idx = torch.tensor([tok.encode(text)])
    gpt2 = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        assert (model(idx) - gpt2(idx).logits).abs().max() <= 1e-5


def test_a_bert_style_encoder_exports_as_bertmodel(tmp_path, capsys):
    from explorer_toys import tiny_encoder

    pipeline = tiny_encoder()
    pipeline.save(tmp_path / "ckpt")
    said = export(capsys, tmp_path / "ckpt", tmp_path / "hf")
    assert said == f"{tmp_path / 'hf'}: BertModel and its tokenizer"
    theirs = transformers.AutoModel.from_pretrained(tmp_path / "hf").eval()
    their_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    sentence = "The animal did n't cross the street ."
    batch = pipeline.tokenize([sentence])
    assert their_tok(sentence)["input_ids"] == batch["input_ids"][0].tolist()
    with torch.no_grad():
        expected = pipeline.model(**batch)
        got = theirs(**batch).last_hidden_state
    assert (expected - got).abs().max() <= 1e-5


def test_a_model_without_a_hugging_face_class_is_refused_in_one_line(tmp_path, capsys):
    from attnlab.models.lstmn import LSTMLM, LSTMConfig

    tok = CharTokenizer.train("abc")
    LanguageModelPipeline(LSTMLM(LSTMConfig(vocab_size=tok.vocab_size, embed_dim=8, hidden_dim=8)), tok).save(
        tmp_path / "ckpt")
    assert main(["export", str(tmp_path / "ckpt"), str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert "model_type 'lstm'; export takes gpt, transformer and encoder checkpoints" in err
    assert "\n" not in err and not (tmp_path / "hf").exists()
