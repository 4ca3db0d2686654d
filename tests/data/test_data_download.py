"""Downloads against a loopback HTTP server (127.0.0.1): never the real internet."""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
import urllib.error
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from attnlab.data import (
    ChecksumError,
    download,
    file_sha256,
    load_multi30k,
    load_tinyshakespeare,
    multi30k,
)
from repo_paths import SHARED_DATA

REAL_DATA = Path(os.environ["ATTNLAB_DATA"]) if os.environ.get("ATTNLAB_DATA") else SHARED_DATA
requires_data = pytest.mark.skipif(
    not os.environ.get("ATTNLAB_DATA") and not SHARED_DATA.is_dir(),
    reason="ATTNLAB_DATA is unset and ../shared/data is missing",
)

SERVER_LIFETIME_S = 60.0  # the server shuts itself down after this, whatever happens


class _Quiet(SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.requests.append(self.path)
        super().do_GET()


def serve(directory: Path):
    """Serve ``directory`` on 127.0.0.1 in a daemon thread: ``(base_url, requests, stop)``."""
    requests: list[str] = []
    handler = type("Handler", (_Quiet,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(directory)))
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    watchdog = threading.Timer(SERVER_LIFETIME_S, server.shutdown)
    watchdog.daemon = True
    watchdog.start()

    def stop() -> None:
        watchdog.cancel()
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_address[1]}", requests, stop


@pytest.fixture
def site(tmp_path):
    """A loopback server over ``tmp_path/site``; yields ``(folder, base_url, requests)``."""
    folder = tmp_path / "site"
    folder.mkdir()
    url, requests, stop = serve(folder)
    yield folder, url, requests
    stop()


def test_download_success_writes_file_with_checksum(site, tmp_path):
    folder, url, _ = site
    payload = "Zwei Männer.\n".encode() * 1000
    (folder / "f.bin").write_bytes(payload)
    dest = tmp_path / "out" / "f.bin"
    got = download(f"{url}/f.bin", dest, hashlib.sha256(payload).hexdigest(), progress=True)
    assert got == dest and dest.read_bytes() == payload
    assert file_sha256(dest) == hashlib.sha256(payload).hexdigest()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["f.bin"]  # no temp file left


def test_download_checksum_mismatch_leaves_nothing(site, tmp_path):
    folder, url, _ = site
    (folder / "f.bin").write_bytes(b"corrupted")
    out = tmp_path / "out"
    with pytest.raises(ChecksumError, match="sha256 of .*f.bin is .* but expected 0000"):
        download(f"{url}/f.bin", out / "f.bin", "0" * 64, progress=False)
    assert not out.exists()  # not even the directory made for it
    assert issubclass(ChecksumError, ValueError)


def test_download_http_error_leaves_nothing(site, tmp_path):
    _, url, _ = site
    out = tmp_path / "out"
    with pytest.raises(urllib.error.HTTPError):
        download(f"{url}/missing.bin", out / "missing.bin", progress=False)
    assert not out.exists()  # not even the directory made for it


def test_download_keeps_previous_file_on_mismatch(site, tmp_path):
    folder, url, _ = site
    (folder / "f.bin").write_bytes(b"new but wrong")
    dest = tmp_path / "f.bin"
    dest.write_bytes(b"old")
    with pytest.raises(ChecksumError):
        download(f"{url}/f.bin", dest, "0" * 64, progress=False)
    assert dest.read_bytes() == b"old"


def _tiny_multi30k(folder: Path, monkeypatch) -> list[tuple[str, str]]:
    """Write val.de.gz / val.en.gz into ``folder`` and register their checksums."""
    pairs = [("Ein Hund läuft.", "A dog runs."), ("Zwei Kinder.", "Two children.")]
    for lang, side in (("de", 0), ("en", 1)):
        data = gzip.compress("".join(p[side] + "\n" for p in pairs).encode())
        (folder / f"val.{lang}.gz").write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
        monkeypatch.setitem(multi30k.SHA256, f"val.{lang}.gz", sha)
    return pairs


def test_load_multi30k_downloads_from_base_url(site, tmp_path, monkeypatch):
    folder, url, requests = site
    pairs = _tiny_multi30k(folder, monkeypatch)
    data = tmp_path / "data"
    assert load_multi30k("val", "de", "en", data_dir=data, download=True, base_url=url) == pairs
    assert sorted(requests) == ["/val.de.gz", "/val.en.gz"]
    assert sorted(p.name for p in (data / "multi30k").iterdir()) == ["val.de.gz", "val.en.gz"]
    # Present files are read locally: no second request.
    assert load_multi30k("val", "de", "en", data_dir=data, download=True, base_url=url) == pairs
    assert len(requests) == 2


def test_load_multi30k_base_url_from_env(site, tmp_path, monkeypatch):
    folder, url, requests = site
    pairs = _tiny_multi30k(folder, monkeypatch)
    monkeypatch.setenv("ATTNLAB_MULTI30K_URL", url + "/")
    monkeypatch.setenv("ATTNLAB_DATA", str(tmp_path / "data"))
    assert load_multi30k("val", "en", "de", download=True) == [(t, s) for s, t in pairs]
    assert len(requests) == 2


def test_load_multi30k_corrupt_download_is_discarded(site, tmp_path, monkeypatch):
    folder, url, _ = site
    _tiny_multi30k(folder, monkeypatch)
    monkeypatch.setitem(multi30k.SHA256, "val.en.gz", "f" * 64)
    data = tmp_path / "data"
    with pytest.raises(ChecksumError, match="val.en.gz"):
        load_multi30k("val", "de", "en", data_dir=data, download=True, base_url=url)
    assert sorted(p.name for p in (data / "multi30k").iterdir()) == ["val.de.gz"]


@requires_data
def test_real_files_verify_against_the_registry(tmp_path):
    """Serve the official raw files from the local copy; the built-in sha256 table accepts them."""
    url, requests, stop = serve(REAL_DATA / "multi30k")
    try:
        got = load_multi30k("test_2016_flickr", "de", "en", tmp_path, True, base_url=url)
    finally:
        stop()
    assert got == load_multi30k("test_2016_flickr", "de", "en", data_dir=REAL_DATA)
    assert len(requests) == 2


@requires_data
def test_tinyshakespeare_download(tmp_path):
    url, _, stop = serve(REAL_DATA / "tinyshakespeare")
    try:
        text = load_tinyshakespeare(tmp_path, download=True, base_url=url)
    finally:
        stop()
    assert text == (REAL_DATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
