"""tiktoken encodes attnlab's byte-level BPE with the same ids as Hugging Face ``tokenizers``
(on real and adversarial text), and is refused for every tokenizer where that is not certain."""

import gzip
import json
import random

import pytest
import tokenizers as hf
from tokenizers import normalizers

from attnlab.data import Tokenizer, WordTokenizer
from attnlab.data.fast_bpe import byte_alphabet, tiktoken_twin
from repo_paths import SHARED_DATA

SHAKESPEARE = (SHARED_DATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")


def _random_texts(seed, n, alphabet="ab c\n\t  é漢'sS1.!"):
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(n)]


@pytest.fixture(scope="module")
def trained():
    """A vocabulary learned on Shakespeare and on noise over a tiny alphabet (many competing
    merges: the case where merge order and rank order could part)."""
    noise = _random_texts(1, 3000, "abc ab\n")
    return Tokenizer.train([*SHAKESPEARE.splitlines(keepends=True), *noise], 3000)


def test_the_twin_gives_the_same_ids_on_real_and_adversarial_text(trained):
    twin = tiktoken_twin(trained.hf)
    assert twin is not None
    german = gzip.decompress((SHARED_DATA / "multi30k" / "train.de.gz").read_bytes()).decode().splitlines()
    texts = [*german[:5000], *_random_texts(2, 3000), *_random_texts(3, 3000, "abc ab\n"),
             SHAKESPEARE[:200_000], "<eos> is text, not a special"]
    for text in texts:
        assert twin.encode_ordinary(text) == trained.hf.encode(text).ids, text[:80]


def test_encode_arrays_is_encode_through_either_engine(trained):
    texts = [SHAKESPEARE[:5000], "a  \n\nb", "", "Grüße, 漢字!"]
    assert trained.encode_arrays([]) == []
    fast = [list(a) for a in trained.encode_arrays(texts)]
    assert fast == [trained.encode(t) for t in texts]
    word = WordTokenizer.train(SHAKESPEARE.splitlines()[:500])
    assert [list(a) for a in word.encode_arrays(["First Citizen:"])] == [word.encode("First Citizen:")]


def test_every_tokenizer_it_cannot_vouch_for_gets_no_twin(trained):
    word = WordTokenizer.train(["a b c"])
    assert tiktoken_twin(word.hf) is None  # not BPE
    state = json.loads(trained.hf.to_str())
    with_normalizer = hf.Tokenizer.from_str(trained.hf.to_str())
    with_normalizer.normalizer = normalizers.NFKC()
    assert tiktoken_twin(with_normalizer) is None
    swapped = json.loads(json.dumps(state))  # two merged tokens' ids exchanged: merge order ≠ rank order
    vocab, (a, b) = swapped["model"]["vocab"], [m if isinstance(m, str) else " ".join(m)
                                               for m in swapped["model"]["merges"][10:12]]
    first, second = (x.replace(" ", "") for x in (a, b))
    vocab[first], vocab[second] = vocab[second], vocab[first]
    assert tiktoken_twin(hf.Tokenizer.from_str(json.dumps(swapped))) is None
    unmade = json.loads(json.dumps(state))  # a token no merge makes
    unmade["model"]["merges"] = unmade["model"]["merges"][:-1]
    assert tiktoken_twin(hf.Tokenizer.from_str(json.dumps(unmade))) is None


def test_the_byte_alphabet_is_every_byte_once():
    table = byte_alphabet()
    assert sorted(table.values()) == list(range(256)) and len(table) == 256
    assert table["Ġ"] == ord(" ") and table["Ċ"] == ord("\n")
