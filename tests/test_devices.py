"""One place moves batches to the model's device, and autocast follows the model's device
(docs/design.md, "Devices"). The "meta" device stands in for a second device: moving to it is
visible on a machine without a GPU."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import pytest
import torch

from attnlab.data import Batch
from attnlab.devices import autocast, model_device, resolve_device, to_device
from attnlab.training import TrainConfig, Trainer
from training_toys import lm_loss, make_batches, make_model

META = torch.device("meta")
Pair = namedtuple("Pair", ["x", "y"])


@dataclass
class Plain:
    ids: torch.Tensor
    name: str


def test_to_device_moves_every_tensor_and_keeps_the_structure():
    t = torch.ones(2)
    batch = {"a": (t, [t, 3]), "b": Pair(t, "text"), "c": Plain(t, "x"), "d": None}
    moved = to_device(batch, META)
    assert moved["a"][0].device == META and moved["a"][1][0].device == META and moved["a"][1][1] == 3
    assert isinstance(moved["a"], tuple) and isinstance(moved["a"][1], list)
    assert isinstance(moved["b"], Pair) and moved["b"].x.device == META and moved["b"].y == "text"
    assert isinstance(moved["c"], Plain) and moved["c"].ids.device == META and moved["c"].name == "x"
    assert moved["d"] is None and t.device.type == "cpu"  # the input is left as it was


def test_to_device_uses_a_batch_objects_own_to():
    ids = torch.ones(2, 4, dtype=torch.long)
    batch = Batch(src=ids, tgt_in=ids, tgt_out=ids, src_lengths=ids[:, 0], tgt_lengths=ids[:, 0])
    moved = to_device(batch, META)
    assert isinstance(moved, Batch) and moved.src.device == META and moved.tgt_out.device == META


def test_resolve_device_names_the_bad_device():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="device must be like 'cpu' or 'cuda:0', got 'gpu0'"):
        resolve_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' is not available"):
            resolve_device("cuda")


def test_autocast_takes_the_device_type():
    with autocast(torch.device("cpu"), True):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    with autocast("cpu", False):
        assert not torch.is_autocast_enabled("cpu")


def test_model_device_of_a_model_without_parameters_is_the_cpu():
    assert model_device(torch.nn.ReLU()) == torch.device("cpu")
    assert model_device(torch.nn.Linear(2, 2, device=META)) == META


class Recorded(dict):
    """A dict batch that records the devices it was moved to."""

    moves: list

    def to(self, device):
        Recorded.moves.append(torch.device(device))
        return Recorded({k: v.to(device) for k, v in self.items()})


def test_the_trainer_moves_each_batch_to_the_models_device_before_the_loss():
    Recorded.moves = []
    seen = []

    def loss_fn(model, batch):
        seen.append({v.device for v in batch.values()})
        return lm_loss(model, batch)

    model = make_model()
    batches = [Recorded(b) for b in make_batches(3)]
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), loss_fn, batches,
            TrainConfig(max_steps=3, progress=False, log_every=0)).fit()
    assert Recorded.moves == [model_device(model)] * 3
    assert seen == [{model_device(model)}] * 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_trainer_on_cuda_takes_cpu_batches():
    model = make_model().to("cuda")
    result = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), lm_loss, make_batches(2),
                     TrainConfig(max_steps=2, progress=False, log_every=0, bf16=True)).fit()
    assert result.step == 2
