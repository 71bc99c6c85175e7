import pytest
import torch

from apnet_pyg.data import load_xlsa17
from apnet_pyg.data.splits import hold_out_per_class, seen_validation_split


def test_hold_out_per_class():
    labels = torch.tensor([0] * 10 + [1] * 5 + [2] * 2 + [3])
    images = torch.arange(labels.numel()).flip(0)
    kept, held = hold_out_per_class(
        images, labels, 0.2, torch.Generator().manual_seed(0)
    )
    assert torch.equal(
        torch.cat([kept, held]).sort().values, torch.arange(labels.numel())
    )
    held_counts = torch.bincount(labels[held], minlength=4).tolist()
    # round(0.2 n), at least one when n >= 2, never a whole class:
    assert held_counts == [2, 1, 1, 0]
    assert torch.equal(kept, kept.sort().values)
    again = hold_out_per_class(
        images, labels, 0.2, torch.Generator().manual_seed(0)
    )
    assert torch.equal(again[1], held)
    other = hold_out_per_class(
        images, labels, 0.2, torch.Generator().manual_seed(1)
    )
    assert not torch.equal(other[1], held)
    with pytest.raises(ValueError, match="'fraction' must lie in"):
        hold_out_per_class(images, labels, 1.0, torch.Generator())
    with pytest.raises(ValueError, match="'images' contains duplicate"):
        hold_out_per_class(
            images[[0, 0, 1, 2]], labels, 0.2, torch.Generator()
        )


def test_seen_validation_split(tiny_root):
    data = load_xlsa17(tiny_root, 'TINY')
    split = seen_validation_split(data, 0.25, seed=0)
    assert torch.equal(split.train_classes, data.train_classes)
    assert torch.equal(split.val_classes, data.val_classes)
    train, seen_val = (
        set(split.train_images.tolist()),
        set(split.seen_val_images.tolist()),
    )
    # Disjoint, together the trainval images of the training classes:
    assert not train & seen_val
    assert train | seen_val == set(
        data.images_of(data.train_classes, 'trainval').tolist()
    )
    assert set(data.labels[split.seen_val_images].tolist()) == set(
        data.train_classes.tolist()
    )
    assert torch.equal(
        split.unseen_val_images, data.images_of(data.val_classes, 'trainval')
    )
    # No test image anywhere:
    test = set(data.test_seen_loc.tolist()) | set(
        data.test_unseen_loc.tolist()
    )
    assert not test & (
        train | seen_val | set(split.unseen_val_images.tolist())
    )
    # Deterministic for a seed:
    assert torch.equal(
        seen_validation_split(data, 0.25, seed=0).seen_val_images,
        split.seen_val_images,
    )
    share = len(seen_val) / (len(train) + len(seen_val))
    assert share == pytest.approx(0.25, abs=0.02)

    no_labels = load_xlsa17(tiny_root, 'TINY', load_features=False)
    with pytest.raises(ValueError, match='without features'):
        seen_validation_split(no_labels)
    # Seeds are those of torch.Generator: -1 was taken as 2^64 - 1, 2^64
    # failed inside torch without naming the seed.
    with pytest.raises(ValueError, match="'seed' must be at least 0"):
        seen_validation_split(data, 0.25, seed=-1)
    with pytest.raises(ValueError, match="'seed' must be below 2\\^64"):
        seen_validation_split(data, 0.25, seed=2**64)
