"""How an NTM sorts (Graves et al. 2014, Figure 17): the rank correlation against SciPy, the
mechanism's numbers on hand-made traces whose answer is known, and the report's picture."""

from __future__ import annotations

import pytest
import torch

from attnlab.data.algorithmic import priority_sort
from attnlab.models.ntm import NTM, NTMConfig
from attnlab.tasks.algorithmic.recipe import AlgorithmicRecipe
from attnlab.tasks.algorithmic.sorting import ranks, sort_mechanism, spearman
from attnlab.tasks.algorithmic.task import SORT_NUMBERS, SORT_SEQUENCES, measure_sorting

LENGTH, KEEP, N = 6, 4, 16


def test_spearman_matches_scipy_with_ties():
    stats = pytest.importorskip("scipy.stats")
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, 4, (5, 9), generator=g).double()  # many ties
    b = torch.randn(5, 9, generator=g).double()
    for row_a, row_b, rho in zip(a, b, spearman(a, b), strict=True):
        assert float(rho) == pytest.approx(stats.spearmanr(row_a, row_b).statistic, abs=1e-12)
    assert ranks(torch.tensor([3.0, 1.0, 3.0])).tolist() == [2.5, 1.0, 2.5]
    assert float(spearman(torch.ones(4), torch.arange(4.0))) == 0  # constant: no correlation


def one_hot(locations: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(locations, N).double()


def traces(inputs: torch.Tensor, write_location: torch.Tensor, read_location: torch.Tensor):
    """Weightings ``(B, T, 2, N)`` of two heads: write head 0 on the input steps in input order
    (a copy's pattern, with more weight), write head 1 at ``write_location (B, LENGTH)``; both
    read heads at ``read_location (B, KEEP)`` on the answer steps; the delimiter step reads and
    writes location 0."""
    batch, steps = inputs.shape[:2]
    write, read = torch.zeros(batch, steps, 2, N).double(), torch.zeros(batch, steps, 2, N).double()
    write[:, :LENGTH, 0] = one_hot(torch.arange(LENGTH).expand(batch, -1)) * 0.9
    write[:, :LENGTH, 1] = one_hot(write_location) * 0.6
    read[:, LENGTH + 1:] = one_hot(read_location).unsqueeze(2) / 2
    write[:, LENGTH, :, 0] = read[:, LENGTH, :, 0] = 0.5
    return write, read


def test_a_machine_that_writes_by_priority_and_reads_in_order():
    ep = priority_sort(8, LENGTH, keep=KEEP, generator=torch.Generator().manual_seed(1))
    priority = ep.inputs[:, :LENGTH, 8]
    rank = priority.argsort(1, descending=True).argsort(1)  # 0 = highest priority
    write_location = (11 + 2 * rank) % N  # a gap between the stored vectors, across the ring's end
    read_location = (11 + 2 * torch.arange(KEEP).expand(8, -1)) % N
    found = sort_mechanism(ep.inputs, *traces(ep.inputs, write_location, read_location), bits=8)
    assert found.write_rank_correlation == pytest.approx(-1.0)
    assert found.reads_find_writes == 1.0 and found.read_rank_correlation == pytest.approx(1.0)
    assert torch.equal(found.wanted_location, (read_location - found.cut) % N)
    assert 1 <= found.cut <= 11  # counted from a cut outside the used span 11 … 15, 0 … 5
    assert found.head == 1  # the head that sorts, not the heavier one that copies
    assert found.shared_location == 0
    assert found.errors_at_shared != found.errors_at_shared  # NaN: no errors were given


def test_vectors_that_share_a_location_and_the_errors_made_there():
    ep = priority_sort(8, LENGTH, keep=KEEP, generator=torch.Generator().manual_seed(3))
    rank = ep.inputs[:, :LENGTH, 8].argsort(1, descending=True).argsort(1)
    write_location = 2 + rank // 2  # ranks 0 and 1 share location 2, 2 and 3 share 3, ...
    read_location = 2 + torch.arange(KEEP).expand(8, -1) // 2
    errors = torch.zeros(8, KEEP)
    errors[:, 0] = 3.0  # every error at the first answer step, whose vector shares location 2
    weights = traces(ep.inputs, write_location, read_location)
    found = sort_mechanism(ep.inputs, *weights, bits=8, errors=errors)
    assert found.shared_location == 1.0 and found.errors_at_shared == 1.0
    assert found.write_rank_correlation < -0.9 and found.reads_find_writes == 1.0


def test_a_machine_that_copies_is_not_sorting():
    ep = priority_sort(8, LENGTH, keep=KEEP, generator=torch.Generator().manual_seed(2))
    write_location = (torch.arange(LENGTH) + 7).expand(8, -1)  # both heads copy: input order
    read_location = torch.arange(KEEP).expand(8, -1)
    found = sort_mechanism(ep.inputs, *traces(ep.inputs, write_location, read_location), bits=8)
    priority = ep.inputs[:, :LENGTH, 8]
    chosen = torch.arange(LENGTH).expand(8, -1) if found.head == 0 else write_location
    counted = (chosen - found.cut) % N
    assert found.write_rank_correlation == pytest.approx(float(spearman(priority, counted).mean()))
    assert abs(found.write_rank_correlation) < 0.5
    wanted = chosen.gather(1, priority.argsort(1, descending=True)[:, :KEEP])
    assert found.reads_find_writes == pytest.approx(float((wanted == read_location).double().mean()))
    assert found.reads_find_writes < 0.5


def test_the_report_measures_and_draws_the_sort(tmp_path):
    torch.manual_seed(0)
    model = NTM(NTMConfig(input_dim=10, output_dim=8, controller_dim=16, memory_size=N, memory_width=8,
                          controller="feedforward", learned_memory=True, read_heads=2, write_heads=2))
    recipe = AlgorithmicRecipe.from_dict({
        "task": "algorithmic", "train": {"max_steps": 1},
        "data": {"task": "priority_sort", "min_length": LENGTH, "max_length": LENGTH, "keep": KEEP},
        "model": {"controller": "feedforward", "memory_size": N}, "eval": {"test_lengths": [LENGTH]},
    })
    numbers, picture = measure_sorting(model, recipe, tmp_path / "sort.png")
    assert set(numbers) == set(SORT_NUMBERS)
    assert -1 <= numbers["write_rank_correlation"] <= 1 and 0 <= numbers["reads_find_writes"] <= 1
    assert picture.stat().st_size > 10_000 and SORT_SEQUENCES >= 10
