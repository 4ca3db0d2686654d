"""``attnlab lab`` and ``attnlab demo``: their Namespaces read, the labs' typed functions called
(:mod:`attnlab.labs.registry`, :mod:`attnlab.labs.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from attnlab.labs.registry import DEFAULT_OUT, find_lab, list_labs, pictures, run_all, run_lab
from attnlab.labs.report import LabOptions


def lab(args: argparse.Namespace) -> int:
    """``attnlab lab``: the list; ``attnlab lab NAME`` one lab into ``--out`` (default
    runs/labs/NAME); ``attnlab lab all`` every lab, those that cannot run here named with why."""
    if args.name is None:
        print(list_labs())
        return 0
    options = LabOptions(quick=args.quick, seed=args.seed, checkpoint=args.checkpoint, bert=args.bert,
                         data_dir=args.data_dir, device=args.device)
    if args.name == "all":
        out = Path(args.out or DEFAULT_OUT)
        results = run_all(out, options)
        missing = [name for name, result in results.items() if isinstance(result, str)]
        print(f"\n{len(results) - len(missing)} of {len(results)} labs written; index {out / 'index.md'}")
        if missing:
            print(f"not run here: {', '.join(missing)} (their reasons are above and in the index)")
        return 0
    out = Path(args.out or Path(DEFAULT_OUT) / find_lab(args.name).name)
    report = run_lab(args.name, out, options)
    print(f"\n{pictures(report)} and {out / 'report.md'}")
    return 0


def demo(args: argparse.Namespace) -> int:
    """``attnlab demo``: train and score the demo translator, or ``--pooling`` the
    attention-pooling lab, into ``--out``."""
    from attnlab.labs.demo import DEFAULT_OUT as DEMO_OUT
    from attnlab.labs.demo import DEFAULT_POOLING_OUT, THREADS, run_pooling_demo, run_translation_demo
    from attnlab.runtime import set_threads

    if args.pooling:
        run_pooling_demo(args.out or DEFAULT_POOLING_OUT)
    else:
        set_threads(args.threads or THREADS)  # the same figures on every machine
        run_translation_demo(args.out or DEMO_OUT, args.data_dir)
    return 0
