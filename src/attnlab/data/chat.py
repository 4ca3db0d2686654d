"""Chat templates: an instruction-tuned model's conversation as the one text it was trained on.

An Instruct model such as SmolLM2-135M-Instruct was fine-tuned on conversations written in one
fixed format — ChatML here: each message is ``<|im_start|>role\\n content<|im_end|>\\n``, and the
prompt ends with ``<|im_start|>assistant\\n`` so the model's continuation is the answer. The format
is a Jinja template stored with the tokenizer (``chat_template`` in a GGUF file's metadata or a
Hugging Face ``tokenizer_config.json``); it is rendered in Jinja's sandbox, since the template
comes from a file. Rendered, the markers are *special* tokens (one id each): :func:`split_specials`
cuts the rendered text at them so each side is encoded as what it is — wherever a marker appears,
a message's content included, as ``transformers``' ``apply_chat_template`` does (plain
``Tokenizer.encode`` reads a typed marker as text).

>>> render_chat(template, [{"role": "user", "content": "Hi"}])
'<|im_start|>system\\nYou are ...<|im_end|>\\n<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["Message", "render_chat", "split_specials", "user_turn"]

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": text}
ROLES = ("system", "user", "assistant")


def user_turn(prompt: str) -> list[dict[str, str]]:
    """The conversation of one user message ``prompt``."""
    return [{"role": "user", "content": prompt}]


def _check(messages: Sequence[Message]) -> None:
    if not messages:
        raise ValueError("a chat needs at least one message, got none")
    for number, message in enumerate(messages, start=1):
        if message.get("role") not in ROLES or not isinstance(message.get("content"), str):
            raise ValueError(f"chat message {number} must have a role in {ROLES} and text content, "
                             f"got {dict(message)!r}")


def _raise(message: str) -> None:
    raise ValueError(f"the chat template refused the conversation: {message}")


def render_chat(template: str, messages: Sequence[Message], *, add_generation_prompt: bool = True,
                **tokens: str) -> str:
    """``messages`` written in the model's format by the Jinja ``template``; with
    ``add_generation_prompt`` the text ends where the assistant's answer begins. ``tokens``
    (``bos_token``, ``eos_token``) are the names templates may use."""
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    _check(messages)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = _raise
    try:
        return env.from_string(template).render(
            messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt, **tokens)
    except TemplateError as err:
        raise ValueError(f"the chat template cannot be rendered: {err}") from None


def split_specials(text: str, specials: Iterable[str]) -> list[tuple[str, bool]]:
    """``text`` cut at every occurrence of a ``specials`` string: ``(piece, is_special)`` in order,
    empty pieces dropped; the longest marker wins where two start at the same place."""
    markers = sorted(set(specials), key=len, reverse=True)
    if not markers:
        return [(text, False)] if text else []
    pattern = re.compile("(" + "|".join(re.escape(m) for m in markers) + ")")
    return [(piece, i % 2 == 1) for i, piece in enumerate(pattern.split(text)) if piece]
