"""Corpora, tokenizers and batching.

* :mod:`~attnlab.data.corpora` — data directory, line-aligned text and TSV readers, tinyshakespeare
* :mod:`~attnlab.data.download` — download with sha256 check, atomic write, progress bar
* :mod:`~attnlab.data.multi30k` — the Multi30k registry (splits, languages, checksums)
* :mod:`~attnlab.data.tokenizers` — byte-level BPE (Hugging Face ``tokenizers``) and characters
* :mod:`~attnlab.data.batching` — token-budget batches for translation, windows for LMs
"""

from attnlab.data.batching import (
    Batch,
    LMDataset,
    TokenBatchSampler,
    TranslationDataset,
    collate,
    token_batches,
)
from attnlab.data.corpora import data_dir, load_tinyshakespeare, read_lines, read_parallel, read_tsv
from attnlab.data.download import ChecksumError, download, file_sha256
from attnlab.data.multi30k import LANGUAGES, SPLITS, load_multi30k, multi30k_file
from attnlab.data.tokenizers import (
    SPECIAL_TOKENS,
    CharTokenizer,
    Tokenizer,
    load_tokenizer,
    load_tokenizers,
    save_tokenizers,
    train_bpe,
)

__all__ = [
    "Batch",
    "CharTokenizer",
    "ChecksumError",
    "LANGUAGES",
    "LMDataset",
    "SPECIAL_TOKENS",
    "SPLITS",
    "TokenBatchSampler",
    "Tokenizer",
    "TranslationDataset",
    "collate",
    "data_dir",
    "download",
    "file_sha256",
    "load_multi30k",
    "load_tinyshakespeare",
    "load_tokenizer",
    "load_tokenizers",
    "multi30k_file",
    "read_lines",
    "read_parallel",
    "read_tsv",
    "save_tokenizers",
    "token_batches",
    "train_bpe",
]

# The King James Bible (sword-text-kjv) and the Shakespeare-vs-KJV classification task.
from attnlab.data.classification import (  # noqa: E402
    ShakespeareKJVConfig,
    TextClassificationData,
    load_shakespeare_vs_kjv,
    shakespeare_vs_kjv,
)
from attnlab.data.kjv import find_kjv_module, load_kjv_verses  # noqa: E402

__all__ += [
    "ShakespeareKJVConfig",
    "TextClassificationData",
    "find_kjv_module",
    "load_kjv_verses",
    "load_shakespeare_vs_kjv",
    "shakespeare_vs_kjv",
]
