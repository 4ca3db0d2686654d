"""The tokenizer stored in SmolLM2's GGUF file, built by attnlab (:func:`load_gguf_tokenizer`),
against ``transformers``' reading of the same file: identical ids over more than 1,000 lines of
text (English verse, German and Czech captions, code, digits, emoji), identical chat-template ids,
the roles and chat template surviving a save. Skips without the ``llm`` extra (``make llm``)."""

import gzip
import os
from pathlib import Path

import pytest

from attnlab.data.tokenizers import load_tokenizer
from smollm2_fixtures import needs_llm

pytestmark = needs_llm

EDGES = ["x1 12 345 6789 3.14 -0.5e10", "  two spaces\tand a tab  ", "trailing newline\n", "\n\n\nlines",
         "émoji 😀 and 中文 and Ελληνικά", "def f(x):\n    return x ** 2  # ok", "A" * 300, "",
         "<|im_start|> is typed here as text", "don't won't y'all's", "https://example.com/a?b=c&d=e"]


def _lines() -> list[str]:
    data = Path(os.environ["ATTNLAB_DATA"])
    verse = (data / "tinyshakespeare" / "input.txt").read_text().splitlines()[:700]
    captions = []
    for lang in ("de", "cs"):
        with gzip.open(data / "multi30k" / f"val.{lang}.gz", "rt", encoding="utf-8") as f:
            captions += f.read().splitlines()[:200]
    return verse + captions + EDGES


@pytest.fixture(scope="module")
def tokenizers(smollm2, reference):
    return smollm2.tokenizer, reference[1]


def test_ids_equal_transformers_over_more_than_a_thousand_lines(tokenizers):
    ours, theirs = tokenizers
    lines = [line for line in _lines() if "<|" not in line]  # typed markers: see the test below
    assert len(lines) > 1000
    differ = [line for line in lines if ours.encode(line) != theirs(line).input_ids]
    assert differ == []
    assert ours.decode(ours.encode(EDGES[4])) == EDGES[4]


def test_a_typed_marker_is_text_while_the_chat_template_makes_it_special(tokenizers):
    ours, _ = tokenizers
    assert ours.encode("<|im_start|>") != [ours.bos_id]
    assert ours.decode(ours.encode("<|im_start|>")) == "<|im_start|>"
    chat = ours.chat_ids([{"role": "user", "content": "hi"}])
    assert chat[0] == ours.bos_id == ours.hf.token_to_id("<|im_start|>")


def test_a_conversation_has_the_ids_of_transformers_chat_template(tokenizers):
    ours, theirs = tokenizers
    talk = [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Sky colour?"},
            {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "And grass?"}]
    ids = theirs.apply_chat_template(talk, add_generation_prompt=True, tokenize=True)
    assert ours.chat_ids(talk) == list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    with pytest.raises(ValueError, match="chat message 1"):
        ours.chat_ids([{"role": "robot", "content": "x"}])


def test_the_roles_stop_generation_instead_of_being_masked(tokenizers):
    ours, theirs = tokenizers
    assert ours.vocab_size == 49_152  # nothing appended: the model's own vocabulary
    assert (ours.bos_id, ours.eos_id) == (theirs.bos_token_id, theirs.eos_token_id)
    assert ours.stop_ids == (ours.eos_id,) and ours.never_drawn == ()


def test_roles_and_chat_template_survive_a_save(tokenizers, tmp_path):
    ours, _ = tokenizers
    ours.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert (again.roles, again.chat_template, again.special_ids) == (ours.roles, ours.chat_template,
                                                                     ours.special_ids)
    talk = [{"role": "user", "content": "Hello"}]
    assert again.chat_ids(talk) == ours.chat_ids(talk)
    assert again.encode(EDGES[5]) == ours.encode(EDGES[5])
