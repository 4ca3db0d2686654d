"""Tokenizers: byte-level BPE and words (Hugging Face ``tokenizers``) and characters, one
interface.

Both map text to ids and back, reserve the same special ids (``<pad>`` = 0, ``<bos>`` = 1,
``<eos>`` = 2, ``<unk>`` = 3), and save to a JSON file beside a checkpoint.

Subword tokenization is where Steinert-Threlkeld (Transformers I) ("Next Time: Subword
tokenization") leaves off. BPE (Sennrich et al., 2016) here is byte-level, as in GPT-2: text is
split into words by the GPT-2 regex, each word is read as UTF-8 bytes, and merges are learned
over bytes. Every string is representable (no ``<unk>``), and ``decode(encode(s)) == s`` exactly
— spaces, umlauts and punctuation included — so decoded output is detokenized plain text, ready
for sacreBLEU. Special-token strings typed in the text (``"<eos>"``) are encoded as plain text.

>>> src_tok, tgt_tok = train_bpe(de_sentences, en_sentences, vocab_size=8000)  # joint
>>> ids = tgt_tok.encode("A dog runs.", add_bos=True, add_eos=True)
>>> tgt_tok.decode(ids)
'A dog runs.'
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import tokenizers as hf
from tokenizers import decoders, models, pre_tokenizers, trainers

from attnlab.atomic import write_atomic
from attnlab.data.chat import Message, render_chat, split_specials
from attnlab.data.fast_bpe import encode_on_cores, tiktoken_twin
from attnlab.memory import Need, check_fits, sized
from attnlab.parsing import read_json
from attnlab.validation import counted

SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")  # ids 0, 1, 2, 3
PAD_ID = SPECIAL_TOKENS.index("<pad>")  # every tokenizer's padding id
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"  # a pretrained tokenizer's roles and chat template
SRC_TOKENIZER_FILE = "src_tokenizer.json"
TGT_TOKENIZER_FILE = "tgt_tokenizer.json"
CHAR_FORMAT = "attnlab.CharTokenizer"
SMALLEST_BPE = len(pre_tokenizers.ByteLevel.alphabet()) + len(SPECIAL_TOKENS)  # bytes + specials
SMALLEST_VOCABULARY = len(SPECIAL_TOKENS) + 1  # a character or word tokenizer: specials + one symbol

UNICODE_SIZE = 0x110000  # code points
Ids = Sequence[int]


def _as_list(ids: Ids) -> list[int]:
    """Accept a list/tuple of ints or a 1-D tensor/array (anything with ``tolist``)."""
    return [int(i) for i in (ids.tolist() if hasattr(ids, "tolist") else ids)]


class _Specials:
    """Special ids, bos/eos wrapping and id checks shared by both tokenizers.

    ``roles``: the tokens that pad, begin, end and stand for an unknown. attnlab's own
    (:data:`SPECIAL_TOKENS`) never occur in plain text, so sampling never draws them
    (:attr:`never_drawn`) and nothing stops it; a pretrained model's (SmolLM2's ``<|im_end|>``)
    are drawn like any token and its end token stops generation (:attr:`stop_ids`)."""

    vocab_size: int
    roles: tuple[str, ...] = SPECIAL_TOKENS
    pad_id = 0
    bos_id = 1
    eos_id = 2
    unk_id = 3
    chat_template: str | None = None

    @property
    def own_specials(self) -> bool:
        return self.roles == SPECIAL_TOKENS

    @property
    def never_drawn(self) -> tuple[int, ...]:
        """The ids sampling masks out: attnlab's own specials, none of a pretrained tokenizer."""
        return self.special_ids if self.own_specials else ()

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """The ids that end generation: none for attnlab's own, the end token of a pretrained one."""
        return () if self.own_specials else (self.eos_id,)

    def _wrap(self, ids: list[int], add_bos: bool, add_eos: bool) -> list[int]:
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    @property
    def special_ids(self) -> tuple[int, int, int, int]:
        """The ids of ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``."""
        return self.pad_id, self.bos_id, self.eos_id, self.unk_id

    def _content_ids(self, ids: Ids, skip_special: bool) -> list[int]:
        """Check ids are in range; with ``skip_special`` cut at the first eos, drop specials."""
        ids = _as_list(ids)
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must be in [0, vocab_size={self.vocab_size}), got {bad[:5]}")
        if not skip_special:
            return ids
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        specials = self.special_ids
        return [i for i in ids if i not in specials]

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The ids of each text as an int64 array (no specials added)."""
        return [np.asarray(ids, dtype=np.int64) for ids in self.encode_batch(texts)]

    def encode_batch(self, texts: Iterable[str], *, add_bos: bool = False,
                     add_eos: bool = False) -> list[list[int]]:
        return [self.encode(t, add_bos=add_bos, add_eos=add_eos) for t in texts]

    def decode_batch(self, batch: Iterable[Ids], *, skip_special: bool = True) -> list[str]:
        return [self.decode(ids, skip_special=skip_special) for ids in batch]

    def files(self, name: str = TOKENIZER_FILE) -> dict[str, str]:
        """The files that hold this tokenizer, file name → text (``name``: its own file's)."""
        return {name: self.to_json()}

    def save(self, directory: str | os.PathLike[str], name: str = TOKENIZER_FILE) -> Path:
        """Write :meth:`files` into ``directory`` atomically; the path of ``directory/name``."""
        for file, text in self.files(name).items():
            write_atomic(Path(directory) / file, text)
        return Path(directory) / name


class Tokenizer(_Specials):
    """Byte-level BPE tokenizer wrapping a Hugging Face ``tokenizers.Tokenizer``."""

    def __init__(self, tokenizer: hf.Tokenizer, *, roles: Sequence[str] = SPECIAL_TOKENS,
                 chat_template: str | None = None) -> None:
        """``roles``: the pad, begin, end and unknown tokens (:class:`_Specials`); attnlab's own
        are appended to a tokenizer that lacks them, a pretrained model's must be in its vocabulary.
        ``chat_template``: the Jinja template of an instruction-tuned model (:mod:`attnlab.data.chat`)."""
        self.roles, self.chat_template = tuple(roles), chat_template
        found = [tokenizer.token_to_id(t) for t in self.roles]
        if None in found and self.own_specials:  # another project's file: its vocabulary, then ours
            tokenizer.add_special_tokens([t for t, i in zip(SPECIAL_TOKENS, found, strict=True) if i is None])
            found = [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
        if None in found:
            raise ValueError(f"special token {self.roles[found.index(None)]!r} is not in the vocabulary")
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = found
        tokenizer.encode_special_tokens = True  # "<eos>" typed in text is text, not a special
        self.hf = tokenizer

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8000, *, min_frequency: int = 2):
        """Learn BPE merges on ``texts`` until the vocabulary has ``vocab_size`` entries.

        ``vocab_size`` counts the 4 special tokens and the 256 byte symbols; ``min_frequency``
        is the fewest occurrences a pair needs to be merged.
        """
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        if vocab_size < SMALLEST_BPE:
            raise ValueError(
                f"vocab_size must be >= {SMALLEST_BPE} (bytes + specials), got {vocab_size}"
            )
        check_fits([bpe_need(vocab_size)])
        tok = hf.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=alphabet,
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer)
        return cls(tok)

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Token ids of ``text``, optionally wrapped as ``<bos> ... <eos>``."""
        return self._wrap(self.hf.encode(text).ids, add_bos, add_eos)

    def encode_batch(self, texts: Iterable[str], *, add_bos: bool = False,
                     add_eos: bool = False) -> list[list[int]]:
        """``encode`` for many texts at once (parallel, in Rust)."""
        return [self._wrap(e.ids, add_bos, add_eos) for e in self.hf.encode_batch(list(texts))]

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The ids of each text as an int64 array, all texts at once on every core: through
        tiktoken where it gives the same ids (:mod:`attnlab.data.fast_bpe`), else ``tokenizers``."""
        if not hasattr(self, "_twin"):
            self._twin = tiktoken_twin(self.hf)
        if self._twin is None or not texts:
            return [np.asarray(e.ids, dtype=np.int64) for e in self.hf.encode_batch(list(texts))]
        return encode_on_cores(self._twin, texts)

    def decode(self, ids: Ids, *, skip_special: bool = True) -> str:
        """Plain text of ``ids``. With ``skip_special`` (default) decoding stops at the first
        ``<eos>`` and drops the other special tokens."""
        return self.hf.decode(self._content_ids(ids, skip_special), skip_special_tokens=skip_special)

    def chat_ids(self, messages: Sequence[Message]) -> list[int]:
        """The ids of the conversation ``messages`` written by the chat template, ending where the
        assistant's answer begins; its markers are special tokens, the messages plain text."""
        if self.chat_template is None:
            raise ValueError("this tokenizer has no chat template (an instruction-tuned model's has one)")
        text = render_chat(self.chat_template, messages, bos_token=self.roles[1], eos_token=self.roles[2])
        specials = [t.content for t in self.hf.get_added_tokens_decoder().values() if t.special]
        return [i for piece, special in split_specials(text, specials)
                for i in ([self.hf.token_to_id(piece)] if special else self.hf.encode(piece).ids)]

    def config(self) -> dict[str, str]:
        """``tokenizer_config.json``: the roles (and chat template) that ``transformers``'
        ``AutoTokenizer`` and :func:`load_tokenizer` read beside ``tokenizer.json``."""
        pad, bos, eos, unk = self.roles
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": eos,
                  "pad_token": pad, "unk_token": unk}
        return config | ({"chat_template": self.chat_template} if self.chat_template else {})

    def files(self, name: str = TOKENIZER_FILE) -> dict[str, str]:
        """A pretrained model's tokenizer needs its roles beside it: ``tokenizer_config.json``."""
        extra = {} if self.own_specials else {TOKENIZER_CONFIG_FILE: json.dumps(self.config(), indent=2)}
        return super().files(name) | extra

    def token_strings(self, ids: Ids) -> list[str]:
        """Each id decoded on its own (labels for attention heatmaps)."""
        return [self.hf.decode([i], skip_special_tokens=False) for i in _as_list(ids)]

    def to_json(self) -> str:
        """The file :meth:`save` writes: Hugging Face's ``tokenizer.json`` format."""
        return self.hf.to_str(pretty=True)

    @classmethod
    def load(cls, directory: str | os.PathLike[str], name: str = TOKENIZER_FILE) -> Tokenizer:
        """``directory/name``, with the roles of ``tokenizer_config.json`` beside a ``tokenizer.json``."""
        path = Path(directory) / TOKENIZER_CONFIG_FILE
        config = read_json(path, "tokenizer config") if name == TOKENIZER_FILE and path.is_file() else {}
        roles = tuple(config.get(f"{role}_token") for role in ("pad", "bos", "eos", "unk"))
        roles = SPECIAL_TOKENS if None in roles else roles
        return cls(hf.Tokenizer.from_file(str(Path(directory) / name)), roles=roles,
                   chat_template=config.get("chat_template"))


class WordTokenizer(Tokenizer):
    """One id per word of a closed vocabulary (captions of a small grammar): Hugging Face's
    ``WordLevel`` model over words and punctuation marks (its ``Whitespace`` pre-tokenizer);
    a word not seen in training is ``<unk>``. Decoding joins words with spaces and attaches
    ``, . : ; ! ?`` to the word before them."""

    PUNCTUATION = re.compile(r" ([,.:;!?])")

    @classmethod
    def train(cls, texts: Iterable[str], *, min_frequency: int = 1) -> WordTokenizer:
        """The vocabulary of every word (and punctuation mark) of ``texts`` seen at least
        ``min_frequency`` times, after the 4 special tokens."""
        tok = hf.Tokenizer(models.WordLevel(unk_token=SPECIAL_TOKENS[3]))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(
            min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS), show_progress=False
        )
        tok.train_from_iterator(texts, trainer)
        return cls(tok)

    def decode(self, ids: Ids, *, skip_special: bool = True) -> str:
        return self.PUNCTUATION.sub(r"\1", super().decode(ids, skip_special=skip_special))


class CharTokenizer(_Specials):
    """One id per character (nanoGPT's tinyshakespeare tokenizer), plus the 4 special ids.

    The vocabulary is the sorted set of characters of the training text; encoding a
    character outside it raises ``ValueError`` naming the unknown characters.
    """

    def __init__(self, chars: Iterable[str]) -> None:
        self.chars = sorted(set(chars))
        if any(len(c) != 1 for c in self.chars):
            raise ValueError(f"chars must be single characters, got {self.chars[:5]}")
        self.itos = [*SPECIAL_TOKENS, *self.chars]
        self.stoi = {c: i for i, c in enumerate(self.itos) if i >= len(SPECIAL_TOKENS)}

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        return cls(text)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        try:
            ids = [self.stoi[c] for c in text]
        except KeyError:
            unknown = sorted(set(text) - self.stoi.keys())
            shown = ", ".join(repr(c) for c in unknown[:20])
            raise ValueError(
                f"text has {counted(len(unknown), 'character')} not in the vocabulary of "
                f"{counted(len(self.chars), 'character')}: {shown}"
            ) from None
        return self._wrap(ids, add_bos, add_eos)

    def encode_arrays(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The ids of each text as an int64 array, through a table indexed by code point."""
        if not hasattr(self, "_table"):
            self._table = np.full(UNICODE_SIZE, -1, np.int64)
            self._table[[ord(c) for c in self.chars]] = np.arange(len(SPECIAL_TOKENS), self.vocab_size)
        out = []
        for text in texts:
            ids = self._table[np.frombuffer(text.encode("utf-32-le"), np.uint32)]
            if ids.size and ids.min() < 0:
                self.encode(text)  # raises, naming the characters outside the vocabulary
            out.append(ids)
        return out

    def decode(self, ids: Ids, *, skip_special: bool = True) -> str:
        return "".join(self.itos[i] for i in self._content_ids(ids, skip_special))

    def token_strings(self, ids: Ids) -> list[str]:
        return [self.itos[i] for i in self._content_ids(ids, skip_special=False)]

    def to_json(self) -> str:
        """The file :meth:`save` writes: attnlab's character-tokenizer JSON."""
        state = {"type": CHAR_FORMAT, "special_tokens": list(SPECIAL_TOKENS), "chars": self.chars}
        return json.dumps(state, ensure_ascii=False)

    @classmethod
    def load(cls, directory: str | os.PathLike[str], name: str = TOKENIZER_FILE) -> CharTokenizer:
        state = read_json(Path(directory) / name, "tokenizer file")
        if state.get("type") != CHAR_FORMAT:
            raise ValueError(f"{Path(directory) / name} is not a {CHAR_FORMAT} file")
        return cls(state["chars"])


AnyTokenizer = Tokenizer | CharTokenizer


def _tokenizer_class(state: dict) -> type[AnyTokenizer]:
    """Which class wrote a saved tokenizer file (parsed JSON ``state``)."""
    if state.get("type") == CHAR_FORMAT:
        return CharTokenizer
    model = state.get("model")
    return WordTokenizer if isinstance(model, dict) and model.get("type") == "WordLevel" else Tokenizer


def load_tokenizer(directory: str | os.PathLike[str], name: str = TOKENIZER_FILE) -> AnyTokenizer:
    """Load ``directory/name`` as whichever tokenizer wrote it; a file that is not a tokenizer
    raises ``ValueError`` naming it."""
    path = Path(directory) / name
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file {path} not found")
    state = read_json(path, "tokenizer file")
    try:
        return _tokenizer_class(state).load(directory, name)
    except Exception as err:  # Hugging Face's own (untyped) parse errors
        raise ValueError(f"tokenizer file {path} is not a valid tokenizer: {err}") from None


def bpe_need(vocab_size: int, name: str = "vocab_size") -> Need:
    """What learning BPE needs at least (:mod:`attnlab.memory`): the trainer of Hugging Face
    ``tokenizers`` reserves a token table of ``vocab_size`` entries before it reads a word (a
    list and a hash map of strings: at least 48 bytes an entry); ``name`` is the setting."""
    return sized("the BPE trainer's token table", {name: vocab_size}, 48, "entries of 48 bytes", host=True)


def train_bpe(src_texts: Iterable[str], tgt_texts: Iterable[str], vocab_size: int = 8000, *,
              joint: bool = True, min_frequency: int = 2) -> tuple[Tokenizer, Tokenizer]:
    """BPE for a translation pair: ``(src_tokenizer, tgt_tokenizer)``.

    ``joint=True`` learns one vocabulary on both sides and returns the same object twice
    (needed to tie source and target embeddings); ``joint=False`` learns two vocabularies
    of ``vocab_size`` each.
    """
    if joint:
        tok = Tokenizer.train(itertools.chain(src_texts, tgt_texts), vocab_size, min_frequency=min_frequency)
        return tok, tok
    return tuple(Tokenizer.train(t, vocab_size, min_frequency=min_frequency) for t in (src_texts, tgt_texts))


def tokenizer_files(src: AnyTokenizer, tgt: AnyTokenizer) -> dict[str, str]:
    """A translation pair's tokenizer files, name → text: ``tokenizer.json`` if ``src is tgt``
    (joint), else ``src_tokenizer.json`` and ``tgt_tokenizer.json``."""
    if src is tgt:
        return {TOKENIZER_FILE: src.to_json()}
    return {SRC_TOKENIZER_FILE: src.to_json(), TGT_TOKENIZER_FILE: tgt.to_json()}


def save_tokenizers(directory: str | os.PathLike[str], src: AnyTokenizer, tgt: AnyTokenizer) -> list[Path]:
    """Save :func:`tokenizer_files` beside a checkpoint, each atomically."""
    return [write_atomic(Path(directory) / name, text) for name, text in tokenizer_files(src, tgt).items()]


def load_tokenizers(directory: str | os.PathLike[str]) -> tuple[AnyTokenizer, AnyTokenizer]:
    """Inverse of :func:`save_tokenizers`: ``(src, tgt)``, the same object when joint."""
    if (Path(directory) / TOKENIZER_FILE).is_file():
        tok = load_tokenizer(directory, TOKENIZER_FILE)
        return tok, tok
    src = load_tokenizer(directory, SRC_TOKENIZER_FILE)
    return src, load_tokenizer(directory, TGT_TOKENIZER_FILE)
