"""Corpora, tokenizers and batching.

* :mod:`~attnlab.data.corpora` — data directory, line-aligned text and TSV readers, tinyshakespeare
* :mod:`~attnlab.data.download` — download with sha256 check, atomic write, progress bar
* :mod:`~attnlab.data.multi30k` — the Multi30k registry (splits, languages, checksums)
* :mod:`~attnlab.data.tokenizers` — byte-level BPE (Hugging Face ``tokenizers``) and characters
* :mod:`~attnlab.data.batching` — token-budget batches for translation, windows for LMs
* :mod:`~attnlab.data.mnist` — the MNIST test set's 10,000 digits and their fixed split
* :mod:`~attnlab.data.scenes` — seeded scenes of those digits, with boxes and captions
* :mod:`~attnlab.data.image_captions` — a folder of images + a captions file (Flickr8k layout)
* :mod:`~attnlab.data.speech` — a synthetic speech corpus (eSpeak NG), your WAV files, log-mel features
"""

from attnlab.data.batching import (
    Batch,
    LMDataset,
    TokenBatchSampler,
    TranslationDataset,
    collate,
    token_batches,
)
from attnlab.data.corpora import data_dir, load_tinyshakespeare, read_lines
from attnlab.data.download import ChecksumError, download, file_sha256
from attnlab.data.multi30k import LANGUAGES, SPLITS, load_multi30k, multi30k_file
from attnlab.data.sources import read_pairs, read_parallel, read_tsv
from attnlab.data.tokenizers import (
    SPECIAL_TOKENS,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
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
    "WordTokenizer",
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
    "read_pairs",
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

# Image captioning: MNIST source digits, composed scenes, a folder of images and its captions.
from attnlab.data.image_captions import (  # noqa: E402
    ImageCaptions,
    load_image,
    load_image_captions,
    read_captions,
    write_scene_folder,
)
from attnlab.data.mnist import SPLITS as MNIST_SPLITS  # noqa: E402
from attnlab.data.mnist import SourceDigits, read_mnist, source_digits  # noqa: E402
from attnlab.data.scenes import (  # noqa: E402
    PlacedDigit,
    Scene,
    caption,
    caption_digits,
    caption_text,
    compose_scene,
    make_scenes,
    split_caption,
)

__all__ += [
    "ImageCaptions",
    "MNIST_SPLITS",
    "PlacedDigit",
    "Scene",
    "SourceDigits",
    "caption",
    "caption_digits",
    "caption_text",
    "compose_scene",
    "load_image",
    "load_image_captions",
    "make_scenes",
    "read_captions",
    "read_mnist",
    "source_digits",
    "split_caption",
    "write_scene_folder",
]

# Speech: the synthetic corpus spoken by eSpeak NG (make data-speech), your own WAV files, log-mel.
from attnlab.data.speech import (  # noqa: E402
    FeatureStats,
    LogMel,
    SpeechCorpus,
    SyntheticSpeechConfig,
    Utterance,
    speech_folder,
    synthetic_speech,
)

__all__ += [
    "FeatureStats",
    "LogMel",
    "SpeechCorpus",
    "SyntheticSpeechConfig",
    "Utterance",
    "speech_folder",
    "synthetic_speech",
]
