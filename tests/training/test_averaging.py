"""average_checkpoints: the element-wise mean of the weights of tiny saved models."""

import pytest
import torch

from attnlab.checkpoint import save_pretrained
from attnlab.training import average_checkpoints, last_checkpoints
from training_toys import make_model


def _save_models(tmp_path, seeds):
    models, paths = [], []
    for seed in seeds:
        model = make_model(seed=seed)
        model.register_buffer("calls", torch.tensor([3, 4]))  # an integer buffer
        paths.append(save_pretrained(model, tmp_path / f"m{seed}"))
        models.append(model)
    return models, paths


def test_average_is_the_float64_mean_of_each_tensor(tmp_path):
    models, paths = _save_models(tmp_path, [1, 2, 3])
    averaged = average_checkpoints(paths)
    for name, value in averaged.items():
        stacked = torch.stack([m.state_dict()[name].double() for m in models])
        if value.is_floating_point():
            assert value.dtype == torch.float32
            torch.testing.assert_close(value, stacked.mean(0).float(), rtol=0, atol=0)
        else:
            assert torch.equal(value, models[0].state_dict()[name])
    fresh = make_model(seed=9)
    fresh.register_buffer("calls", torch.zeros(2, dtype=torch.long))
    fresh.load_state_dict(averaged)  # strict: same keys as the model
    files = [p / "model.safetensors" for p in paths[:1]]
    single = average_checkpoints(files)
    for name, value in models[0].state_dict().items():
        assert torch.equal(single[name], value)


def test_last_checkpoints_of_a_run(tmp_path):
    run = tmp_path / "run"
    for step in (10, 2, 30):
        d = save_pretrained(make_model(), run / "checkpoints" / f"step_{step:08d}")
        (d / "trainer.pt").write_bytes(b"")
    (run / "checkpoints" / ".step_00000040.tmp-x").mkdir()  # an unfinished write is ignored
    assert [p.name for p in last_checkpoints(run, 2)] == ["step_00000010", "step_00000030"]
    assert len(last_checkpoints(run, 5)) == 3
    with pytest.raises(FileNotFoundError, match="holds no checkpoints"):
        last_checkpoints(tmp_path / "empty", 2)


def test_mismatched_checkpoints_are_rejected(tmp_path):
    a = save_pretrained(make_model(d=8), tmp_path / "a")
    b = save_pretrained(make_model(d=4), tmp_path / "b")
    with pytest.raises(ValueError, match="has shape .* in .*b/model.safetensors but"):
        average_checkpoints([a, b])
    with pytest.raises(ValueError, match="at least one checkpoint"):
        average_checkpoints([])
    with pytest.raises(FileNotFoundError, match="has no model.safetensors"):
        average_checkpoints([tmp_path / "missing"])
