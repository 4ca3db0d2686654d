"""Which sentence pairs a translation recipe reads: the ``multi30k`` preset's files or the
user's own (:mod:`attnlab.data.pair_corpus` prepares them)."""

from __future__ import annotations

from pathlib import Path

from attnlab.data.pair_corpus import PairSources, PreparedPairs, prepare_pairs
from attnlab.data.prepared import cache_dir
from attnlab.data.presets import PAIR_PRESETS, pair_preset
from attnlab.data.sources import pair_files
from attnlab.data.tokenizers import AnyTokenizer, load_tokenizer
from attnlab.tasks.translation.recipe import TranslationData


def pair_sources(data: TranslationData, test_split: str, data_dir: str | None) -> PairSources:
    """The files of ``data.corpus`` (the preset's ``train``, ``val`` and ``test_split``, or the
    user's pairs and their named ``val`` / ``test``)."""
    d = data
    if isinstance(d.corpus, str) and d.corpus in PAIR_PRESETS:
        def files(split: str) -> tuple[Path, ...]:
            return tuple(pair_preset(d.corpus, split, d.src_lang, d.tgt_lang, data_dir))

        return PairSources(files("train"), d.src_lang, d.tgt_lang, val=files("val"), test=files(test_split),
                           train_limit=d.train_limit, errors=d.errors)

    def named(spec: str | list[str], what: str) -> tuple[Path, ...]:
        return tuple(pair_files(spec, d.src_lang, d.tgt_lang, what)) if spec else ()

    return PairSources(named(d.corpus, "data.corpus"), d.src_lang, d.tgt_lang, val=named(d.val, "data.val"),
                       test=named(d.test, "data.test"), held_out=d.held_out, train_limit=d.train_limit,
                       errors=d.errors)


def prepare_translation(
    data: TranslationData, test_split: str, data_dir: str | None,
    tokenizers: tuple[AnyTokenizer, AnyTokenizer] | None = None, *, progress: bool = True,
) -> PreparedPairs:
    """The prepared pairs of ``data``, tokenized by ``tokenizers``, else by
    ``data.tokenizer_file`` (both sides), else by BPE learned on them."""
    if tokenizers is None and data.tokenizer_file:
        given = load_tokenizer(Path(data.tokenizer_file).parent, Path(data.tokenizer_file).name)
        tokenizers = given, given
    sources = pair_sources(data, test_split, data_dir)
    return prepare_pairs(sources, vocab_size=data.vocab_size, joint=data.joint_vocab, tokenizers=tokenizers,
                         cache=cache_dir(), progress=progress)
