"""Every family's tiny model trains on synthetic data: finite loss that falls."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")   # the worker extra

from gavel_ng.workloads import get_workload, list_families


@pytest.mark.parametrize("family", list_families())
def test_tiny_model_loss_is_finite_and_falls(family: str) -> None:
    torch.manual_seed(0)
    w = get_workload(family)
    model = w.build_model("tiny")
    optimizer = w.make_optimizer(model)
    batch = w.make_batch(w.batch_sizes[0], "tiny", seed=1)
    losses = [w.train_step(model, optimizer, batch) for _ in range(6)]
    assert all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("family", list_families())
def test_full_model_builds_on_meta_with_paper_shapes(family: str) -> None:
    w = get_workload(family)
    with torch.device("meta"):
        model = w.build_model("full")
    batch = w.make_batch(w.batch_sizes[-1], "full", seed=None, device="meta")
    assert all(t.device.type == "meta" for t in batch.values())
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params > 500_000


def test_full_input_shapes_match_the_paper_datasets() -> None:
    def shape(family: str, key: str) -> tuple[int, ...]:
        return tuple(get_workload(family).make_batch(2, "full", None, "meta")[key].shape)

    assert shape("ResNet-18", "images") == (2, 3, 32, 32)
    assert shape("ResNet-50", "images") == (2, 3, 224, 224)
    assert shape("CycleGAN", "a") == (2, 3, 256, 256)
    assert shape("A3C", "frames")[2:] == (4, 84, 84)


def test_unknown_size_is_rejected() -> None:
    with pytest.raises(ValueError):
        get_workload("LM").build_model("huge")


def test_batches_are_reproducible_from_a_seed() -> None:
    w = get_workload("Transformer")
    a, b = w.make_batch(4, "tiny", seed=3), w.make_batch(4, "tiny", seed=3)
    assert all(torch.equal(a[k], b[k]) for k in a)
