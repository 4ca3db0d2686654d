"""The King James Bible (1769 text, public domain) from Debian's ``sword-text-kjv`` package.

Ba (CSC413 Lecture 8) ("Transformer Language Pre-training") fine-tunes a pretrained language model on a
downstream task; attnlab's small real task tells Shakespeare lines from KJV verses
(:mod:`attnlab.data.classification`). The verses come from the SWORD module of Debian's
``sword-text-kjv`` package, under ``/usr/share/sword`` — read here directly, no SWORD library
needed. attnlab never installs it: ``make data-kjv`` does, as an explicit step (as root).

Where: the ``sword_dir`` argument, else ``$SWORD_PATH`` (SWORD's own variable), else
``/usr/share/sword``. The module is found through its ``mods.d/*.conf`` file
(``Abbreviation=KJV``, ``ModDrv=zText``).

zText format (SWORD ``zverse.cpp``), one file triple per testament (``ot``, ``nt``):

* ``*.bzs`` — block index, 12 bytes a block: offset in ``.bzz``, compressed size,
  uncompressed size (``uint32`` little-endian each);
* ``*.bzv`` — verse index, 10 bytes an entry: block number, offset and size inside the
  uncompressed block (``uint32``, ``uint32``, ``uint16``). Entries also exist for module,
  book and chapter headings;
* ``*.bzz`` — the blocks, each zlib-compressed (``CompressType=ZIP``).

Each entry is OSIS XML (``<w lemma="strong:H7225">beginning</w>``); :func:`osis_to_text`
keeps the words and drops notes, headings and Strong's numbers. What is left is exactly
the 31,102 verses of the KJV versification.
"""

from __future__ import annotations

import html
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from attnlab.validation import counted

KJV_PACKAGE = "sword-text-kjv"
INSTALL_COMMAND = "make data-kjv"  # installs Debian's sword-text-kjv (as root)
SWORD_ENV = "SWORD_PATH"
DEFAULT_SWORD_DIR = Path("/usr/share/sword")
KJV_VERSES = 31102  # verses in the KJV versification

_BLOCK = struct.Struct("<III")  # .bzs: offset, compressed size, uncompressed size
_VERSE = struct.Struct("<IIH")  # .bzv: block, offset in block, size

_NOTE = re.compile(r"<note\b[^>]*?(?<!/)>.*?</note>", re.S)  # footnotes, with their text
_TITLE = re.compile(r"<title\b[^>]*?(?<!/)>.*?</title>", re.S)  # headings, with their text
_CANONICAL_TITLE = re.compile(r'<title\b[^>]*canonical="true"[^>]*>(.*?)</title>', re.S)
_TAG = re.compile(r"<[^>]*>")
_USFM_MARKER = re.compile(r"\\\+?[a-z]+\d*\*?")  # stray USFM such as "\nd" left by the import


def sword_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The SWORD library: ``explicit``, else ``$SWORD_PATH``, else ``/usr/share/sword``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    env = os.environ.get(SWORD_ENV)
    return Path(env).expanduser() if env else DEFAULT_SWORD_DIR


def _read_conf(path: Path) -> dict[str, str]:
    """``key=value`` lines of a SWORD ``.conf`` (first value wins); the ``[Name]`` as ``_name``."""
    conf: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            conf.setdefault("_name", line[1:-1])
        elif "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            conf.setdefault(key.strip(), value.strip())
    return conf


def _missing(where: Path, why: str) -> FileNotFoundError:
    return FileNotFoundError(
        f"King James Bible not found: {why} (looked in {where}; --sword-dir, sword_dir= in Python, "
        f"or ${SWORD_ENV} looks elsewhere). Install Debian's {KJV_PACKAGE} once with: {INSTALL_COMMAND}"
    )


def find_kjv_module(sword_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory of the KJV zText module (holding ``ot.bzz`` etc.).

    Raises:
        FileNotFoundError: no KJV module is installed; the message gives the install command.
    """
    root = _resolve_sword_dir(sword_dir)
    confs = sorted((root / "mods.d").glob("*.conf")) if (root / "mods.d").is_dir() else []
    for path in confs:
        conf = _read_conf(path)
        is_kjv = conf.get("Abbreviation") == "KJV" or conf.get("_name", "").upper() == "KJV"
        if is_kjv and conf.get("ModDrv", "").lower() == "ztext":
            if conf.get("CompressType", "ZIP").upper() != "ZIP":
                raise ValueError(f"{path}: CompressType must be ZIP, got {conf['CompressType']!r}")
            module = (root / conf.get("DataPath", "")).resolve()
            if not (module / "nt.bzz").is_file():
                raise _missing(root, f"{path} names {module}, which has no nt.bzz")
            return module
    raise _missing(root, f"no zText module with Abbreviation=KJV among {counted(len(confs), 'module')}")


_resolve_sword_dir = sword_dir  # functions below take a ``sword_dir`` argument that shadows it


def read_ztext(module: str | os.PathLike[str]) -> Iterator[str]:
    """Every entry of a zText module, Old then New Testament, as raw OSIS strings (may be '')."""
    module = Path(module)
    for testament in ("ot", "nt"):
        if not (module / f"{testament}.bzv").is_file():
            continue
        blocks = list(_BLOCK.iter_unpack((module / f"{testament}.bzs").read_bytes()))
        entries = _VERSE.iter_unpack((module / f"{testament}.bzv").read_bytes())
        data = (module / f"{testament}.bzz").read_bytes()
        cache: dict[int, bytes] = {}
        for block, offset, size in entries:
            if size == 0:
                yield ""
                continue
            if block not in cache:
                start, length, expected = blocks[block]
                cache = {block: zlib.decompress(data[start:start + length])}  # one block at a time
                if len(cache[block]) != expected:
                    raise ValueError(
                        f"{module}/{testament}.bzz block {block} has {len(cache[block])} bytes "
                        f"but the index says {expected}"
                    )
            yield cache[block][offset:offset + size].decode("utf-8")


def osis_to_text(osis: str) -> str:
    """Plain text of one OSIS verse: words kept; footnotes, non-canonical headings (book
    titles, Psalm 119's letters), Strong's markup and the pilcrow ¶ dropped; canonical
    Psalm titles kept; entities unescaped; whitespace collapsed."""
    text = _NOTE.sub("", osis)
    text = _CANONICAL_TITLE.sub(r" \1 ", text)
    text = _TITLE.sub(" ", text)
    text = _TAG.sub("", text)
    text = _USFM_MARKER.sub("", html.unescape(text)).replace("¶", " ")
    return " ".join(text.split())


def load_kjv_verses(sword_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """The 31,102 verses of the King James Bible as plain text, Genesis 1:1 first.

    Raises:
        FileNotFoundError: the module is missing; the message says how to install it
            (``make data-kjv``).
    """
    module = find_kjv_module(sword_dir)
    verses = [text for text in map(osis_to_text, read_ztext(module)) if text]
    if not verses:
        raise ValueError(f"KJV module {module} holds no verse text")
    return verses
