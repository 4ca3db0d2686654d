"""The memory a process holds against the memory its tensors need (attnlab.measure.footprint),
and the training steps it is measured on (attnlab.training.step_memory)."""

import torch

from attnlab.measure.footprint import LivePeak, format_bytes, live_tensor_bytes, memory_report, resident_peak
from attnlab.training.step_memory import StepMemory, batch_elements

MB = 1_000_000


def test_live_tensor_bytes_counts_each_storage_once():
    before = live_tensor_bytes()
    x = torch.empty(2 * MB, dtype=torch.uint8)
    views = [x[:10], x.view(2, MB), x[MB:]]  # noqa: F841 (held: they share x's storage)
    assert live_tensor_bytes() - before == 2 * MB
    del x, views
    assert live_tensor_bytes() == before


def test_a_gradient_is_counted_with_its_parameter():
    before = live_tensor_bytes()
    w = torch.nn.Parameter(torch.zeros(MB // 4))  # 1 MB of float32
    (w * 2).sum().backward()
    assert live_tensor_bytes() - before == 2 * MB


def test_live_peak_is_the_bytes_before_plus_the_calls_highest_point():
    held = torch.empty(3 * MB, dtype=torch.uint8)  # noqa: F841 (alive before and during the call)
    before = live_tensor_bytes()

    def work():
        a = torch.empty(4 * MB, dtype=torch.uint8)
        b = torch.empty(8 * MB, dtype=torch.uint8)  # the peak: a + b
        del a
        c = torch.empty(2 * MB, dtype=torch.uint8)
        return b, c

    live = LivePeak()
    live.watch(work)
    assert (live.peak, live.probes) == (before + 12 * MB, 1)
    live.watch(lambda: torch.empty(MB, dtype=torch.uint8))
    assert (live.peak, live.probes) == (before + 12 * MB, 2)  # a lower call keeps the peak


def test_steps_are_measured_when_their_batches_are_the_largest_yet():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(3))], lr=0.1)
    memory = StepMemory(optimizer, enabled=True)
    ran = []
    for n in (10, 5, 20, 20, 30, 1):
        memory.run(lambda n=n: ran.append(n), [torch.zeros(n), {"ids": torch.zeros(0)}])
    assert ran == [10, 5, 20, 20, 30, 1] and memory.live.probes == 3
    assert memory.peak is not None and memory.peak > 0
    off = StepMemory(optimizer, enabled=False)
    off.run(lambda: ran.append(0), [torch.zeros(4)])
    assert off.peak is None and off.live.probes == 0


def test_batch_elements_walks_batches_of_any_shape():
    from attnlab.data.batching import Batch

    ids = torch.zeros(2, 5, dtype=torch.long)
    batch = Batch(ids, ids[:, :4], ids[:, :4], torch.tensor([5, 3]), torch.tensor([4, 2]))
    assert batch_elements(batch) == 10 + 8 + 8 + 2 + 2
    assert batch_elements([(ids, {"x": ids}), "text", 3]) == 20


def test_the_report_line_and_figures():
    figures, line = memory_report(100 * MB)
    assert 0 < figures["resident_peak_bytes"] <= resident_peak()  # a high-water mark only rises
    assert figures["overhead"] == round(figures["resident_peak_bytes"] / (100 * MB), 2)
    assert line.startswith("memory: peak resident ") and "the live tensors' peak of 100 MB" in line
    assert memory_report(None)[0]["overhead"] is None
    shown = [format_bytes(n) for n in (2_340_000_000, 612_400_000, 4_100, 12)]
    assert shown == ["2.34 GB", "612 MB", "4 kB", "12 B"]


def test_the_overhead_above_the_process_before_any_tensor():
    base = resident_peak() - 50 * MB
    figures, line = memory_report(100 * MB, base)
    assert figures["base_bytes"] == base
    assert figures["overhead_above_base"] == round((figures["resident_peak_bytes"] - base) / (100 * MB), 2)
    assert line.endswith(f"above the {format_bytes(base)} of the process before any tensor)")


def test_a_benchmark_ends_with_its_peak_resident_memory():
    import subprocess
    import sys

    code = ("import torch; from attnlab.measure import footprint as f; f.report_at_exit(); "
            "x = torch.ones(50_000_000, dtype=torch.uint8); print('done')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    done, last = out.splitlines()
    assert done == "done" and last.startswith("peak resident memory of this process: ")
    value, unit = last.split(": ")[1].split()
    assert unit in ("MB", "GB") and float(value) * (1000 if unit == "GB" else 1) >= 50  # the 50 MB tensor


def test_without_a_resident_figure_the_report_says_so(monkeypatch):
    import attnlab.measure.footprint as footprint

    monkeypatch.setattr(footprint, "resident_peak", lambda: None)  # Windows: no /proc, no resource
    figures, line = memory_report(100 * MB, 200 * MB)
    assert figures["resident_peak_bytes"] is None and figures["overhead"] is None
    assert figures["live_tensor_peak_bytes"] == 100 * MB and line == "memory: peak resident unknown here"
