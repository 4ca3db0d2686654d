"""``attnlab serve`` and ``attnlab export-html`` from the command line: one-line errors for
missing checkpoints (exit 2), a real server process that answers and stops on Ctrl-C, one that
listens beyond loopback only with a token (or an explicit ``--no-token``) and says so loudly,
and an exported file whose inline data equals the views and that links nothing outside itself."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from attnlab.cli import build_parser, main
from attnlab.cli.explorer import server_token
from attnlab.explorer.export import export_views
from attnlab.explorer.models import ModelSet, load_gpt, load_translator
from attnlab.explorer.page import SCRIPTS, json_for_html, render_page
from attnlab.signals import exit_code
from explorer_toys import gpt_checkpoint, half_body, translator_checkpoint

DATA_BLOCK = re.compile(r'<script type="application/json" class="attnlab-data">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("explorer_cli")
    return translator_checkpoint(root / "translator"), gpt_checkpoint(root / "gpt")


@pytest.mark.parametrize("command", ["serve", "export-html"])
def test_a_missing_checkpoint_is_one_line_naming_it(command, tmp_path, capsys):
    missing = tmp_path / "runs" / "nope"
    assert main([command, "--translator", str(missing), "--no-bert"]) == 2
    err = capsys.readouterr().err
    why = f"--translator {missing}: not a checkpoint directory ({missing} does not exist)"
    assert err == f"attnlab {command}: error: {why}\n"


def test_serve_without_the_server_extra_names_the_install(checkpoints, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as on a plain `pip install attnlab`
    monkeypatch.delitem(sys.modules, "attnlab.explorer.server", raising=False)  # imported by a test before
    assert main(["serve", "--translator", str(checkpoints[0]), "--no-bert"]) == 2
    expected = "attnlab serve: error: attnlab serve needs uvicorn: pip install 'attnlab[serve]'\n"
    assert capsys.readouterr().err == expected


def test_refusals_before_serving(checkpoints, tmp_path, capsys):
    translator, gpt = checkpoints
    assert main(["serve", "--no-bert"]) == 2
    assert "nothing to serve: pass --translator CKPT, --gpt MODEL or --bert DIR" in capsys.readouterr().err
    assert main(["serve", "--gpt", str(translator), "--no-bert"]) == 2
    why = "has model_type 'transformer'; serve --gpt takes gpt, lstm, lstmn checkpoints"
    assert why in capsys.readouterr().err
    assert main(["serve", "--bert", str(tmp_path), "--gpt", str(gpt)]) == 2
    why = f"--bert {tmp_path}: not a checkpoint directory ({tmp_path} has no config.json)"
    assert why in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--gpt", str(gpt), "--no-bert", "--port", str(port)]) == 2
    why = f"cannot listen on --host 127.0.0.1 --port {port}: Address already in use"
    assert why in capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "export-html"])
def test_a_gpt_neither_checkpoint_nor_file_nor_pretrained_name_is_one_line(command, tmp_path, capsys):
    missing = tmp_path / "nope"
    out = ["--out", str(tmp_path / "x.html")] if command == "export-html" else []
    assert main([command, "--gpt", str(missing), "--no-bert", *out]) == 2
    why = f"'{missing}' is neither a checkpoint directory, a GGUF file nor a pretrained model (smollm2)"
    assert capsys.readouterr().err == f"attnlab {command}: error: --gpt {missing}: {why}\n"


@pytest.mark.parametrize("command", ["serve", "export-html"])
def test_a_checkpoint_of_another_task_is_refused_naming_the_command(checkpoints, tmp_path, command, capsys):
    gpt = checkpoints[1]
    assert main([command, "--translator", str(gpt), "--no-bert", "--out", str(tmp_path / "x.html")]
                if command == "export-html" else [command, "--translator", str(gpt), "--no-bert"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnlab {command}: error: checkpoint {gpt} has model_type 'gpt'; "
                          f"{command} --translator takes transformer, ")
    assert err.count("\n") == 1 and ("serve" in err) == (command == "serve")


@pytest.mark.parametrize(("flags", "message"), [
    (["--host", "0.0.0.0"], "--host 0.0.0.0 listens beyond this machine and the explorer has no other "
                            "protection: add --token (a random one is printed), or --no-token to let anyone "
                            "who can reach the port use it"),
    (["--token", "short"], "--token must be at least 16 printable ASCII characters without spaces, got 5 "
                           "characters (--token alone draws a random one)"),
    (["--token", "--no-token"], "--token and --no-token contradict each other: give one"),
])
def test_serve_refuses_a_bind_or_token_it_cannot_protect_before_loading(tmp_path, capsys, flags, message):
    missing = tmp_path / "not-loaded"  # refused before any checkpoint is read
    assert main(["serve", "--gpt", str(missing), "--no-bert", "--port", "0", *flags]) == 2
    assert capsys.readouterr().err == f"attnlab serve: error: {message}\n"


def test_serve_takes_its_token_from_the_environment_kept_out_of_ps(tmp_path, capsys, monkeypatch):
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0"])
    monkeypatch.setenv("ATTNLAB_TOKEN", "s3cret-token-0123456789")
    assert server_token(args, loopback=False) == "s3cret-token-0123456789"
    monkeypatch.setenv("ATTNLAB_TOKEN", "short")
    with pytest.raises(ValueError, match=r"^\$ATTNLAB_TOKEN must be at least 16 printable ASCII characters"):
        server_token(args, loopback=False)
    given = build_parser().parse_args(["serve", "--token", "from-the-command-line"])
    assert server_token(given, loopback=True) == "from-the-command-line"  # the flag wins
    monkeypatch.setenv("ATTNLAB_TOKEN", "s3cret-token-0123456789")
    missing = tmp_path / "not-loaded"
    assert main(["serve", "--gpt", str(missing), "--no-bert", "--port", "0", "--no-token"]) == 2
    assert capsys.readouterr().err == ("attnlab serve: error: $ATTNLAB_TOKEN and --no-token contradict "
                                       "each other: give one\n")


def start_server(checkpoints, *flags: str) -> tuple[subprocess.Popen, list[str]]:
    """``attnlab serve`` over the toy translator and GPT in a process of its own, and the three
    lines it prints to stdout before serving."""
    translator, gpt = checkpoints
    command = [sys.executable, "-m", "attnlab.cli", "serve", "--translator", str(translator),
               "--gpt", str(gpt), "--no-bert", "--port", "0", "--threads", "1", *flags]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return process, [process.stdout.readline() for _ in range(3)]


def stop_server(process: subprocess.Popen) -> str:
    """Ctrl-C: exit 130; the rest of its stderr."""
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 130
    return process.stderr.read()


def test_serve_answers_and_stops_on_ctrl_c(checkpoints):
    translator, gpt = checkpoints
    process, lines = start_server(checkpoints)
    try:  # the ids the API uses and the paths they stand for: on this terminal only
        assert lines[:2] == [f"translator translator: {translator} (transformer, 2 layers × 2 heads)\n",
                             f"gpt gpt: {gpt} (gpt, 2 layers × 2 heads)\n"]
        address = re.fullmatch(r"attnlab explorer: (http://127\.0\.0\.1:\d+/) \(Ctrl-C stops it\)\n",
                               lines[2])
        assert address, lines
        base = address.group(1)
        assert httpx.get(base + "api/health").json() == {"status": "ok"}
        answer = httpx.post(base + "api/translate", json={"text": "Ein Hund läuft."}, timeout=30)
        assert answer.status_code == 200 and answer.json()["beam"] == 3
        assert httpx.post(base + "api/heads", json={"text": "it"}).status_code == 503
        assert stop_server(process) == "attnlab serve: interrupted by SIGINT\n"  # loopback: no warning
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("signals", [[signal.SIGINT] * 4, [signal.SIGTERM, signal.SIGINT]],
                         ids=["four Ctrl-Cs", "SIGTERM then Ctrl-C"])
def test_serve_stops_in_one_line_however_many_signals(checkpoints, signals):
    """An impatient user: signals a few ms apart while a client is still sending its request.
    The first signal is reported, in one line with its exit code; a later one cuts the
    request at once. (uvicorn alone: a traceback of its lifespan task cancelled, and the
    last signal reported.)"""
    process, lines = start_server(checkpoints)
    try:
        base = re.search(r"http://127\.0\.0\.1:(\d+)/", lines[2])
        assert httpx.get(base.group(0) + "api/health").status_code == 200  # serving: uvicorn has the signals
        stalled = half_body(int(base.group(1)))
        for signum in signals:
            process.send_signal(signum)
            time.sleep(0.005)
        assert process.wait(timeout=30) == exit_code(signals[0])
        assert process.stderr.read() == f"attnlab serve: interrupted by {signals[0].name}\n"
        assert stalled.recv(100) == b""  # cut, not waited for
        stalled.close()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_beyond_loopback_warns_and_asks_for_its_token(checkpoints):
    process, lines = start_server(checkpoints, "--host", "0.0.0.0", "--token")
    try:
        warning = process.stderr.readline()
        printed = r"attnlab explorer: http://0\.0\.0\.0:(\d+)/\?token=([\w-]{32}) \(Ctrl-C stops it\)\n"
        address = re.fullmatch(printed, lines[2])
        assert address, lines
        port, token = address.groups()
        assert warning == (f"attnlab serve: WARNING: listening on 0.0.0.0, beyond this machine: anyone who "
                           f"can reach port {port} can use the explorer with the token, over plain HTTP\n")
        base = f"http://127.0.0.1:{port}/"
        assert httpx.get(base).status_code == 200  # the page holds no data: it needs no token
        refused = httpx.get(base + "api/models")
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert httpx.get(base + "api/models", headers={"Authorization": "Bearer " + token[:-1] + "x"}
                         ).status_code == 401
        bearer = {"Authorization": f"Bearer {token}"}
        listed = httpx.get(base + "api/models", headers=bearer).json()
        assert listed["translator"][0]["checkpoint"] == "translator"
        lan = httpx.get(base + "api/health", headers={**bearer, "Host": f"192.168.1.5:{port}"})
        assert lan.status_code == 200  # listening on every address: any IP address is a Host
        evil = httpx.get(base + "api/health", headers={**bearer, "Host": f"evil.example.com:{port}"})
        assert evil.status_code == 400
        assert stop_server(process) == "attnlab serve: interrupted by SIGINT\n"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_export_html_holds_the_views_and_reaches_for_nothing(checkpoints, tmp_path, capsys):
    translator, gpt = checkpoints
    out = tmp_path / "page" / "explorer.html"
    argv = ["export-html", "--translator", str(translator), "--gpt", str(gpt), "--no-bert",
            "--out", str(out), "--src", "Die Katze schläft.", "--beam", "2", "--prompt", "Hi",
            "--max-new-tokens", "9", "--seed", "3"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith(f"{out} (")
    html = out.read_text(encoding="utf-8")
    (block,) = DATA_BLOCK.findall(html)
    data = json.loads(block)
    models = ModelSet([load_translator(str(translator)), load_gpt(str(gpt))])
    expected = export_views(models, source="Die Katze schläft.", beam=2, prompt="Hi", max_new_tokens=9,
                            seed=3)
    for key in ("translate", "generate", "attention", "heads"):
        assert data[key] == json.loads(json.dumps(expected[key])), key
    assert len(data["generate"]["view"]["events"]) == 9 + 2 and data["heads"] is None
    assert not re.search(r"""(src|href)\s*=|https?://(?!www\.w3\.org/2000/svg)|@import""", html)
    assert html.count("<script") == 1 + len(SCRIPTS) and "<style>" in html  # the data, the scripts; the style


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--src", "  ", "text must not be empty"),
    ("--max-new-tokens", "0", "max_new_tokens must be in [1, 300], got 0"),
    ("--beam", "11", "beam must be in [1, 10], got 11"),
])
def test_export_html_checks_its_input_like_the_api(checkpoints, tmp_path, capsys, flag, value, message):
    translator, gpt = checkpoints
    argv = ["export-html", "--translator", str(translator), "--gpt", str(gpt), "--no-bert",
            "--out", str(tmp_path / "x.html"), flag, value]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"attnlab export-html: error: {message}\n"
    assert not (tmp_path / "x.html").exists()


def test_inline_data_cannot_close_its_script_or_fill_a_slot():
    data = {"note": "</script><script>alert(1)</script> & {{SCRIPT}} <!--", "translate": None,
            "generate": None, "heads": None}
    html = render_page(data)
    (block,) = DATA_BLOCK.findall(html)
    assert json.loads(block) == data and block == json_for_html(data)
    assert "alert(1)</script>" not in html and html.count("</script>") == 1 + len(SCRIPTS)
    assert html.count("{{SCRIPT}}") == 1 and html.count('querySelectorAll(".attnlab-explorer")') == 1


def test_the_exported_page_is_reproducible(checkpoints):
    translator, gpt = checkpoints
    models = ModelSet([load_translator(str(translator)), load_gpt(str(gpt))])
    first, second = (export_views(models, prompt="Hi", max_new_tokens=6, seed=11) for _ in range(2))
    first.pop("note"), second.pop("note")  # only the note carries a date
    assert first == second
