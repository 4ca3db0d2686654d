"""attnlab.runtime.keep_freed_memory: accepted by glibc, refuses bad arguments."""

import os
import subprocess
import sys

import pytest

from attnlab.runtime import keep_freed_memory


def test_rejects_bad_thresholds():
    with pytest.raises(ValueError, match="mmap_threshold"):
        keep_freed_memory(mmap_threshold=0)
    with pytest.raises(ValueError, match="top_pad"):
        keep_freed_memory(top_pad=-1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt is Linux-only")
@pytest.mark.parametrize("keep", [False, True])
def test_freed_blocks_are_reused_only_when_kept(keep):
    # In a fresh process, allocate and free 64 MiB tensors in a loop; once the heap has
    # warmed up, kept memory is reused without page faults, while glibc's default returns it
    # to the kernel and faults every page in again (16k pages per tensor).
    code = f"""
import resource, torch
from attnlab.runtime import keep_freed_memory
assert keep_freed_memory() if {keep} else True
def step():
    x = torch.ones(16 << 20); y = x * 2; del x, y
for _ in range(10):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    faults = int(out.stdout.strip().splitlines()[-1])
    if keep:
        # Returned to the kernel, the 20 tensors fault ~330k pages in again (the branch below).
        # Kept, they fault none, except when the host reclaims a cold page range behind the
        # process's back (Linux's DAMON, seen as one tensor's 16,384 pages now and then).
        assert faults <= 3 * 16384, f"{faults} page faults: freed memory was returned to the kernel"
    else:
        assert faults > 100_000, f"only {faults} page faults without keep_freed_memory"


def test_kernel_caches_are_bounded_unless_the_environment_says(monkeypatch):
    from attnlab.runtime import KERNEL_CACHE_CAPACITY, bound_kernel_caches

    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "7")  # the user's choice stays
    assert bound_kernel_caches() == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(KERNEL_CACHE_CAPACITY)}
    assert os.environ["LRU_CACHE_CAPACITY"] == "7"
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        bound_kernel_caches(0)


def test_the_command_bounds_them_before_torch_runs():
    caches = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
    code = ("import os, sys; sys.argv = ['attnlab', 'plot', '/nonexistent-run']; "
            "from attnlab.cli import main; code = main(); "
            f"print(code, *(os.environ[name] for name in {caches!r}))")
    env = {k: v for k, v in os.environ.items() if k not in caches}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "ATTNLAB_ALLOCATOR": "glibc"})
    assert out.stdout.split() == ["2", "32", "32"]
