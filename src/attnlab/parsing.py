"""Reading JSON and TOML from files and the command line: every failure one ``ValueError``.

Recipes (TOML files), ``key=value`` overrides (TOML literals), a checkpoint's ``config.json``
and ``recipe.json``, tokenizer files, BERT's JSON files and the lines of ``metrics.jsonl``
are parsed here (the explorer's request bodies, which come over the network, have their own
limits: :mod:`attnlab.explorer.requests`). Besides a syntax error, Python's parsers fail in
ways that name neither the file nor the key: text that is not UTF-8; an integer longer than
Python converts (``sys.get_int_max_str_digits()``, 4300 digits by default, a guard against
conversions that take quadratic time), raised as a bare ``ValueError``; and arrays or tables
nested deeper than Python's recursion limit, raised as ``RecursionError`` by Python 3.11's JSON
parser and not at all by 3.12's, which reads any depth; so JSON deeper than
:data:`MAX_NESTING` levels is refused before it is parsed, on every Python. Each becomes one
line that names the file (``where``) and, for a too-long integer, its line and key::

    config file r.toml line 2 (batch_size): an integer of 4400 digits; Python reads at most 4300

GGUF files (llama.cpp's format: metadata, then tensors) are opened with llama.cpp's own reader,
the ``gguf`` package of the optional ``llm`` extra (:func:`read_gguf`); a metadata value is read
by key (:func:`gguf_value`, :func:`gguf_array`), a missing key named with the file.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["GGUF_INSTALL", "MAX_NESTING", "gguf_array", "gguf_value", "nesting_depth", "parse_json",
           "read_gguf", "read_json", "read_toml", "toml_literal"]

GGUF_INSTALL = "pip install 'attnlab[llm]' (make llm)"
MAX_NESTING = 100  # levels of JSON arrays and objects a file may nest (real ones nest under 10)

_KEY = re.compile(r"""["']?([\w.\-]+)["']?\s*[:=]\s*[-+]?$""")  # `"key": ` or `key = ` before a value


JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.S)  # an unterminated one runs to the end
NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest, counted on its brackets outside
    strings (a linear scan; no parsing, so no recursion however deep the text goes)."""
    brackets = NOT_A_BRACKET.sub("", JSON_STRING.sub("", text))
    steps = (1 if bracket in "[{" else -1 for bracket in brackets)
    return max(itertools.accumulate(steps, initial=0))


def _long_integer(text: str, *, locate: bool) -> str | None:
    """``": an integer of 4400 digits; ..."`` for the first integer in ``text`` longer than
    Python converts, else ``None``; ``locate``: with its line (in a text of several) and its
    key where one stands before it (``" line 2 (batch_size): ..."``)."""
    limit = sys.get_int_max_str_digits()
    digits = re.search(rf"\d(?:_?\d){{{limit},}}", text) if limit else None
    if digits is None:
        return None
    at, start = "", digits.start()
    if locate:
        key = _KEY.search(text, text.rfind("\n", 0, start) + 1, start)
        at = f" line {text.count(chr(10), 0, start) + 1}" if "\n" in text.strip() else ""
        at += f" ({key.group(1)})" if key else ""
    count = sum(c.isdigit() for c in digits.group())
    return f"{at}: an integer of {count} digits; Python reads at most {limit}"


def _failure(where: str, kind: str, err: Exception, text: str, *, locate: bool = True) -> ValueError:
    """The one-line error for a parser's ``err`` on ``text``, naming ``where``."""
    if isinstance(err, RecursionError):
        nested = "objects" if kind == "JSON" else "tables"
        return ValueError(f"{where} nests its arrays or {nested} too deeply to read (hundreds of levels)")
    if type(err) is ValueError and (too_long := _long_integer(text, locate=locate)):
        return ValueError(f"{where}{too_long}")  # int() refused it, inside the parser
    return ValueError(f"{where} is not valid {kind}: {err}")


def parse_json(text: str, where: str, *, top: type = dict) -> Any:
    """``json.loads(text)``, which must be a ``top`` (a JSON object by default; ``object``
    takes any value); any failure a ``ValueError`` naming ``where`` (a file, a line)."""
    if (depth := nesting_depth(text)) > MAX_NESTING:
        raise ValueError(
            f"{where} nests its arrays or objects too deeply to read ({depth} levels; at most {MAX_NESTING})")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise _failure(where, "JSON", err, text) from None
    if not isinstance(data, top):
        kind = {dict: "a JSON object", list: "a JSON array"}.get(top, top.__name__)
        raise ValueError(f"{where} must hold {kind}, got {type(data).__name__}")
    return data


def _read_text(file: Path, where: str, kind: str) -> str:
    try:
        return file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{where} is not valid {kind}: not UTF-8 ({err.reason} at byte {err.start})") from None


def read_json(file: str | Path, what: str = "file", *, top: type = dict) -> Any:
    """The JSON ``top`` (an object by default) in ``file`` (``config.json``, ``recipe.json``,
    ...); a file that is not UTF-8 JSON holding one raises ``ValueError`` naming it
    (``what`` says what the file is: ``"checkpoint config"``)."""
    where = f"{what} {file}"
    return parse_json(_read_text(Path(file), where, "JSON"), where, top=top)


def read_toml(file: str | Path, what: str = "config file") -> dict[str, Any]:
    """The tables of the TOML ``file``; ``FileNotFoundError`` or ``ValueError`` naming it."""
    file, where = Path(file), f"{what} {file}"
    if not file.is_file():
        raise FileNotFoundError(f"{where} does not exist")
    text = _read_text(file, where, "TOML")
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError) as err:  # TOMLDecodeError is a ValueError
        raise _failure(where, "TOML", err, text) from None


def toml_literal(raw: str, where: str) -> Any:
    """The value of the TOML literal ``raw`` (an override's right-hand side); text that is no
    literal at all (``rope``) is kept as the string it is."""
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw
    except (ValueError, RecursionError) as err:
        raise _failure(where, "TOML", err, raw, locate=False) from None


def read_gguf(file: str | Path) -> Any:
    """llama.cpp's ``GGUFReader`` of ``file`` (memory-mapped; tensors read when used)."""
    file = Path(file)
    if not file.is_file():
        raise FileNotFoundError(f"GGUF file {file} not found")
    try:
        import gguf
    except ImportError:
        raise ValueError(f"reading GGUF files needs llama.cpp's gguf package: {GGUF_INSTALL}") from None
    try:
        return gguf.GGUFReader(str(file))
    except (ValueError, OSError) as err:  # wrong magic, truncated
        raise ValueError(f"{file} is not a GGUF file: {err}") from None


def _field(reader: Any, key: str, file: Path) -> Any:
    if key not in reader.fields:
        raise ValueError(f"{file}: no {key} in its metadata")
    return reader.fields[key]


def _scalar(part: Any) -> Any:
    return bytes(part).decode() if part.dtype.name == "uint8" else part.item()


def gguf_value(reader: Any, key: str, file: Path) -> Any:
    """The metadata value ``key`` of a :func:`read_gguf` reader: a string or a number."""
    field = _field(reader, key, file)
    return _scalar(field.parts[field.data[0]])


def gguf_array(reader: Any, key: str, file: Path) -> list[Any]:
    """The metadata array ``key``: its strings or numbers in order."""
    field = _field(reader, key, file)
    return [_scalar(field.parts[i]) for i in field.data]
