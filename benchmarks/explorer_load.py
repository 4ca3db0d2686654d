"""The attention explorer under load: concurrent translate requests against a real server.

    .venv/bin/python benchmarks/explorer_load.py                     # 50 clients × 20 requests
    .venv/bin/python benchmarks/explorer_load.py --clients 5 --requests 4   # a quick look

Starts ``attnlab serve --translator CKPT --no-bert --port 0`` (uvicorn, its own process, one
torch thread by default) and, once it answers, sends ``--clients`` concurrent loopback clients
(one asyncio task and keep-alive connection each), every client ``--requests`` translate
requests one after another — German sentences of the Multi30k test split, the model's own beam
size unless ``--beam`` — while a prober in a process of its own (so the clients' work does not
delay it) asks ``GET /api/health`` every ``--probe-every`` seconds on its own connection. It
prints the machine, then: errors (any status but 200, or no answer), p50 / p95 / max latency
and requests per second of the translations; p50 / p95 / max of the health answers and how many
took 100 ms or more; the server's CPU time per request.

The translator has one worker thread (``attnlab.explorer.models``), so translations are served
one at a time, first come first served, and a request's latency is mostly its wait in line:
about ``clients ×`` the service time. The health endpoint never waits for a model; it shares
the server's event loop and the machine's cores with the model thread and the clients. Exit
status 1 when any request failed or any health answer took 100 ms or more.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.data import load_multi30k  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402

HEALTH_LIMIT_S = 0.100
ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--translator", default=str(ROOT / "runs" / "demo" / "best"),
                   help="translation checkpoint (default runs/demo/best)")
    p.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    p.add_argument("--requests", type=int, default=20, help="translate requests per client (default 20)")
    p.add_argument("--beam", type=int, default=None, help="beam size (default: the checkpoint's recipe)")
    p.add_argument("--probe-every", type=float, default=0.05, help="seconds between health probes")
    p.add_argument("--threads", type=int, default=1, help="the server's torch threads (default 1)")
    return p.parse_args(argv)


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "attnlab.cli", "serve", "--translator", args.translator, "--no-bert",
               "--port", "0", "--threads", str(args.threads)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    for line in server.stdout:
        found = re.match(r"attnlab explorer: (http://\S+/) ", line)
        if found:
            return server, found.group(1).rstrip("/")
    raise SystemExit(f"the server stopped before listening (exit {server.wait()})")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def client(
    base: str, sentences: list[str], beam: int | None, latencies: list[float], errors: list[str]
) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=600) as http:
        for text in sentences:
            start = time.perf_counter()
            try:
                response = await http.post("/api/translate", json={"text": text, "beam": beam})
                if response.status_code != 200:
                    errors.append(f"{response.status_code}: {response.text[:200]}")
            except httpx.HTTPError as err:
                errors.append(f"{type(err).__name__}: {err}")
            latencies.append(time.perf_counter() - start)


def probe(base: str, every: float, stop, results) -> None:
    """The health prober (its own process): one GET every ``every`` s until ``stop`` is set."""
    latencies = []
    with httpx.Client(base_url=base, timeout=60) as http:
        while not stop.is_set():
            start = time.perf_counter()
            response = http.get("/api/health")
            latencies.append(time.perf_counter() - start)
            assert response.json() == {"status": "ok"}
            time.sleep(every)
    results.put(latencies)


async def load(args: argparse.Namespace, base: str, sentences: list[str]) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    stop, results = multiprocessing.Event(), multiprocessing.Queue()
    prober = multiprocessing.Process(target=probe, args=(base, args.probe_every, stop, results))
    prober.start()
    start = time.perf_counter()
    per_client = [sentences[i * args.requests:(i + 1) * args.requests] for i in range(args.clients)]
    await asyncio.gather(*(client(base, batch, args.beam, latencies, errors) for batch in per_client))
    wall = time.perf_counter() - start
    stop.set()
    health = results.get(timeout=60)
    prober.join()
    return {"latencies": latencies, "health": health, "errors": errors, "wall": wall}


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _footprint.report_at_exit()
    print(_machine.header())
    pairs = load_multi30k("test_2016_flickr", "de", "en")
    total = args.clients * args.requests
    sentences = [pairs[i % len(pairs)][0] for i in range(total)]
    server, base = start_server(args)
    try:
        for text in sentences[:3]:  # warm-up: first-call costs, not counted
            httpx.post(base + "/api/translate", json={"text": text, "beam": args.beam}, timeout=600)
        beam = args.beam or httpx.get(base + "/api/models").json()["translator"][0]["beam"]
        cpu_before = cpu_seconds(server.pid)
        result = asyncio.run(load(args, base, sentences))
        cpu = cpu_seconds(server.pid) - cpu_before
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    lat, health, errors = result["latencies"], result["health"], result["errors"]
    slow = sum(h >= HEALTH_LIMIT_S for h in health)
    print(f"\nserver: attnlab serve --translator {args.translator} --threads {args.threads}; beam {beam}")
    print(f"load: {args.clients} concurrent clients × {args.requests} translate requests = {total}, "
          f"Multi30k test_2016_flickr German sentences")
    print(f"errors: {len(errors)} of {len(lat)}" + (f" (first: {errors[0]})" if errors else ""))
    print(f"translate: {total / result['wall']:.1f} requests/s over {result['wall']:.1f} s; latency p50 "
          f"{percentile(lat, 50) * 1e3:.0f} ms, p95 {percentile(lat, 95) * 1e3:.0f} ms, "
          f"max {max(lat) * 1e3:.0f} ms")
    print(f"server CPU: {cpu:.1f} s, {cpu / total * 1e3:.1f} ms a request "
          f"({cpu / result['wall']:.2f} cores busy)")
    print(f"health during the load: {len(health)} probes, p50 {percentile(health, 50) * 1e3:.1f} ms, "
          f"p95 {percentile(health, 95) * 1e3:.1f} ms, max {max(health) * 1e3:.1f} ms; "
          f"{slow} of {len(health)} took >= {HEALTH_LIMIT_S * 1e3:.0f} ms"
          + (f" ({', '.join(f'{h * 1e3:.0f}' for h in health if h >= HEALTH_LIMIT_S)} ms)" if slow else ""))
    ok = not errors and slow == 0
    print("PASS: 0 errors, every health answer under 100 ms" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
