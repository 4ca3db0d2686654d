"""Data parallelism: 2 CPU processes (gloo on 127.0.0.1, torchrun's environment variables)
give the gradients and the trained weights of one process on the same global batch."""

import json
from pathlib import Path

import pytest
import torch

from attnlab.training import TrainConfig, Trainer, lambda_lr, list_checkpoints, noam
from attnlab.training import distributed as dist
from ranks import run_ranks
from repo_paths import TESTS
from training_toys import (  # noqa: F401 (one_thread is an autouse fixture)
    PAD,
    concat,
    lm_loss,
    make_batches,
    make_model,
    one_thread,
)

WORLD = 2
STEPS = 3


def _global_batches():
    """One global batch of 4 sequences per step; rank r reads sequences [2r, 2r + 2)."""
    return make_batches(STEPS, batch_size=4, seed=11)


def _rank_batch(batch, rank):
    return {k: v[2 * rank : 2 * rank + 2] for k, v in batch.items()}


def _trainer(model, data, run_dir, grad_accum):
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    config = TrainConfig(
        max_steps=STEPS,
        grad_accum=grad_accum,
        clip_norm=1.0,
        log_every=1,
        run_dir=str(run_dir),
        progress=False,
        max_epochs=None,
    )
    return Trainer(model, opt, lm_loss, data, config, scheduler=lambda_lr(opt, noam(8, 2)))


def _worker(out_dir: str) -> None:
    """Runs in each of the 2 processes (started with RANK / WORLD_SIZE / MASTER_* set)."""
    torch.set_num_threads(1)
    info = dist.init_distributed("gloo", timeout_s=60)  # the CPU, also on a machine with a GPU
    out = Path(out_dir)
    try:
        # 1. DDP gradient of this rank's shard, normalised by the global token count.
        model = make_model(seed=0)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        shard = _rank_batch(_global_batches()[0], info.rank)
        loss_sum, n = lm_loss(ddp, shard)
        n_global = dist.all_reduce_sum(n.double().clone())
        (loss_sum * info.world_size / n_global).backward()  # DDP averages over ranks
        grads = {k: p.grad for k, p in model.named_parameters()}
        torch.save(grads, out / f"grads_rank{info.rank}.pt")
        # 2. The unchanged Trainer under DDP, each rank on its own shard.
        model = make_model(seed=0)
        data = [_rank_batch(b, info.rank) for b in _global_batches()]
        result = _trainer(model, data, out / "run", grad_accum=1).fit()
        torch.save(model.state_dict(), out / f"weights_rank{info.rank}.pt")
        (out / f"history_rank{info.rank}.json").write_text(json.dumps(result.history))
    finally:
        dist.cleanup()


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    code = (
        f"import sys; sys.path[:0] = [{str(TESTS)!r}, {str(Path(__file__).resolve().parent)!r}]; "
        f"import test_distributed as t; t._worker({str(out)!r})"
    )
    run_ranks(code, WORLD, timeout=180, what="the 2-process DDP run")
    return out


def test_ddp_gradients_equal_one_process_on_the_global_batch(two_process_run):
    model = make_model(seed=0)
    loss_sum, n = lm_loss(model, _global_batches()[0])
    (loss_sum / n).backward()
    for rank in range(WORLD):
        grads = torch.load(two_process_run / f"grads_rank{rank}.pt", weights_only=True)
        for name, p in model.named_parameters():
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-6, atol=1e-6)


def test_trainer_under_ddp_equals_one_process_accumulating_the_shards(two_process_run, tmp_path):
    model = make_model(seed=0)
    micro = [_rank_batch(b, r) for b in _global_batches() for r in range(WORLD)]
    single = _trainer(model, micro, tmp_path, grad_accum=WORLD).fit()
    for rank in range(WORLD):
        weights = torch.load(two_process_run / f"weights_rank{rank}.pt", weights_only=True)
        for name, p in model.state_dict().items():
            torch.testing.assert_close(weights[name], p, rtol=1e-6, atol=1e-6)
        history = json.loads((two_process_run / f"history_rank{rank}.json").read_text())
        assert [h["loss"] for h in history] == pytest.approx([h["loss"] for h in single.history])
        assert [h["tokens"] for h in history] == [h["tokens"] for h in single.history]


def test_only_rank_0_writes_checkpoints_and_metrics(two_process_run):
    run = two_process_run / "run"
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events] == list(range(1, STEPS + 1))  # one writer, no duplicates
    (ckpt,) = list_checkpoints(run)
    payload = torch.load(ckpt / "trainer.pt", weights_only=True)
    assert len(payload["rng"]) == WORLD  # every rank's RNG state, for an exact resume


def test_shard_gives_equal_disjoint_shares():
    items = list(range(11))
    shards = [dist.shard(items, r, 3) for r in range(3)]
    assert [len(s) for s in shards] == [3, 3, 3]  # the uneven tail (9, 10) is dropped
    assert sorted(sum(shards, [])) == list(range(9))
    with pytest.raises(ValueError, match="rank must be in \\[0, 3\\), got 3"):
        dist.shard(items, 3, 3)


def test_single_process_without_torchrun_environment(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    info = dist.init_distributed()
    assert (info.rank, info.world_size) == (0, 1)
    assert not dist.is_distributed() and dist.is_main_process() and dist.get_world_size() == 1
    assert dist.gather_objects("x") == ["x"] and dist.broadcast_object(3) == 3
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ValueError, match="MASTER_ADDR must be set when WORLD_SIZE > 1"):
        dist.init_distributed()


def test_a_rank_without_its_gpu_is_refused_in_one_line(monkeypatch):
    """torchrun with more processes than GPUs: nccl would wait for a rank that died on
    ``cuda:1``; the rank says why instead, and gloo keeps every rank on the CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for var, value in (("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=r"LOCAL_RANK=1 needs cuda:1 but this machine has 1 CUDA device"):
        dist.init_distributed()
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    assert dist.init_distributed("gloo").device == torch.device("cpu")
