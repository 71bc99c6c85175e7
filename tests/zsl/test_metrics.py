import math

import pytest
import torch

from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy


def test_per_class_accuracy_hand_computed():
    # Class 0: 3 of 4 right; class 1: 1 of 2; class 2: 0 of 1.
    target = torch.tensor([0, 0, 0, 0, 1, 1, 2])
    pred = torch.tensor([0, 0, 0, 1, 1, 0, 0])
    assert per_class_accuracy(pred, target) == pytest.approx(
        (3 / 4 + 1 / 2 + 0) / 3
    )
    # Plain accuracy would be 4/7: large classes do not dominate.
    assert per_class_accuracy(pred, target) != pytest.approx(4 / 7)


def test_per_class_accuracy_restricted_classes():
    target = torch.tensor([0, 0, 0, 0, 1, 1, 2])
    pred = torch.tensor([0, 0, 0, 1, 1, 0, 0])
    # Only classes 1 and 2 count; class 5 has no sample and is left out.
    assert per_class_accuracy(
        pred, target, torch.tensor([1, 2, 5])
    ) == pytest.approx(0.25)
    assert per_class_accuracy(pred, target, torch.tensor([0])) == 0.75
    with pytest.raises(ValueError, match='None of'):
        per_class_accuracy(pred, target, torch.tensor([7]))
    with pytest.raises(ValueError, match='same number'):
        per_class_accuracy(pred[:3], target)


def test_per_class_accuracy_perfect_and_wrong():
    target = torch.tensor([3, 1, 3])
    assert per_class_accuracy(target, target) == 1.0
    assert per_class_accuracy(torch.tensor([1, 3, 1]), target) == 0.0


def test_harmonic_mean():
    assert harmonic_mean(0.5, 0.5) == pytest.approx(0.5)
    assert harmonic_mean(0.8, 0.2) == pytest.approx(2 * 0.16 / 1.0)
    assert harmonic_mean(0.9, 0.0) == 0.0
    assert harmonic_mean(0.0, 0.0) == 0.0
    assert harmonic_mean(torch.tensor(0.6), 0.3) == pytest.approx(0.4)
    assert not math.isnan(harmonic_mean(0, 0))


def test_first_best_index_is_the_earliest_of_the_largest():
    from apnet_pyg.zsl.metrics import first_best_index

    assert first_best_index([0.2, 0.7, 0.1, 0.7]) == 1
    assert first_best_index([3]) == 0
    with pytest.raises(ValueError, match='empty grid'):
        first_best_index([])
