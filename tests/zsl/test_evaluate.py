import pytest
import torch

from apnet_pyg.data import load_xlsa17
from apnet_pyg.data.splits import seen_validation_split
from apnet_pyg.nn import APNet
from apnet_pyg.zsl import (
    apnet_score_fn,
    best_calibration,
    evaluate,
    evaluate_predictions,
    evaluate_scores,
    validate,
    zsl_accuracy,
    zsl_per_class,
)
from apnet_pyg.zsl.evaluate import GZSLScores
from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy


@pytest.fixture(scope='module')
def tiny(tiny_root):
    return load_xlsa17(tiny_root, 'TINY')


def oracle(data, seen_bias=0.0, biased=None):
    r"""Scores 1 for the true class, 0 elsewhere, plus :obj:`seen_bias` for
    the :obj:`biased` classes (default: the seen classes): a classifier
    that is right up to a seen bias."""
    seen = torch.zeros(data.num_classes)
    seen[data.seen_classes if biased is None else biased] = seen_bias

    def score_fn(image_index, classes):
        truth = data.labels[image_index]
        return (truth[:, None] == classes[None]).float() + seen[classes]

    return score_fn


def test_evaluate_scores_protocol(tiny):
    metrics = evaluate_scores(tiny, oracle(tiny), calibration=0.0)
    assert metrics == {
        'zsl_acc': 100.0,
        'gzsl_seen': 100.0,
        'gzsl_unseen': 100.0,
        'gzsl_h': 100.0,
        'calibration': 0.0,
        'gzsl_cal_seen': 100.0,
        'gzsl_cal_unseen': 100.0,
        'gzsl_cal_h': 100.0,
    }
    # A seen bias of 2 makes every image predicted seen: U = 0. A
    # calibration above the bias undoes it.
    biased = evaluate_scores(
        tiny, oracle(tiny, seen_bias=2.0), calibration=2.5
    )
    assert biased['zsl_acc'] == 100.0  # ZSL has no seen candidates.
    assert biased['gzsl_unseen'] == 0.0 and biased['gzsl_h'] == 0.0
    assert biased['gzsl_cal_h'] == 100.0


def test_best_calibration_is_exact():
    # Random scores: the exact sweep equals a brute-force search over a
    # fine grid of constants.
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (400,), generator=generator)
    seen_classes, unseen_classes = torch.arange(6), torch.arange(6, 10)
    bias = torch.zeros(10)
    bias[:6] = 1.0
    scores = torch.randn(400, 10, generator=generator) + bias
    scores[torch.arange(400), labels] += 1.5

    def score_fn(image_index, classes):
        return scores[image_index][:, classes]

    seen_images = torch.nonzero(labels < 6).view(-1)
    unseen_images = torch.nonzero(labels >= 6).view(-1)
    task = GZSLScores(
        score_fn,
        labels,
        seen_images,
        unseen_images,
        seen_classes,
        unseen_classes,
    )
    constant = best_calibration(task)
    grid = torch.linspace(-6, 6, 4801).tolist()
    brute = max(task.accuracies(c)['h'] for c in grid)
    assert task.accuracies(constant)['h'] == pytest.approx(brute)
    assert task.accuracies(constant)['h'] > task.accuracies(0.0)['h']
    assert constant > 0  # it removes the seen bias

    # The calibrated prediction is the argmax of the calibrated scores:
    all_classes = torch.cat([seen_classes, unseen_classes])
    images = torch.cat([seen_images, unseen_images])
    shifted = score_fn(images, all_classes).clone()
    shifted[:, :6] -= constant
    assert torch.equal(
        task.predictions(constant), all_classes[shifted.argmax(dim=1)]
    )


@pytest.mark.parametrize(
    'scores, labels',
    [
        # An unseen image scored -inf by both seen classes: margin -inf.
        ([[-float('inf'), -float('inf'), 0.0], [1.0, 0.0, 0.0]], [2, 0]),
        # A seen image scored +inf by its class: margin +inf.
        ([[0.0, 0.0, 1.0], [float('inf'), 0.0, 0.0]], [2, 0]),
        # Both, with a huge finite margin between.
        (
            [
                [-float('inf'), -float('inf'), 0.0],
                [float('inf'), 0.0, 0.0],
                [1e17, 0.0, 0.0],
                [0.0, 0.0, 1.0],
            ],
            [2, 0, 0, 2],
        ),
    ],
)
def test_best_calibration_with_infinite_margins(scores, labels):
    # The constant is finite and reaches the best H of a search that
    # includes every margin (as c: the images at c are predicted seen).
    scores, labels = torch.tensor(scores), torch.tensor(labels)
    task = GZSLScores(
        lambda i, c: scores[i][:, c],
        labels,
        torch.nonzero(labels < 2).view(-1),
        torch.nonzero(labels >= 2).view(-1),
        torch.tensor([0, 1]),
        torch.tensor([2]),
    )
    constant = best_calibration(task)
    assert torch.isfinite(torch.tensor(constant))
    margins = task.margin[torch.isfinite(task.margin)].tolist()
    tried = [m + d for m in margins + [0.0] for d in (-1.0, 0.0, 1.0)]
    best = max(task.accuracies(c)['h'] for c in tried)
    assert task.accuracies(constant)['h'] == best


def test_best_calibration_refuses_nan_margins():
    scores = torch.tensor([[-float('inf')] * 3, [1.0, 0.0, 0.0]])
    task = GZSLScores(
        lambda i, c: scores[i][:, c],
        torch.tensor([2, 0]),
        torch.tensor([1]),
        torch.tensor([0]),
        torch.tensor([0, 1]),
        torch.tensor([2]),
    )
    with pytest.raises(ValueError, match='NaN margin'):
        best_calibration(task)


def test_evaluate_predictions_follows_the_protocol(tiny):
    calls = []

    def first_candidate(image_index, classes):
        calls.append((image_index.clone(), classes.clone()))
        return classes[:1].expand(image_index.numel())

    metrics = evaluate_predictions(tiny, first_candidate)
    # ZSL among the unseen classes; GZSL: both test splits among all.
    (zsl_index, zsl_classes), (gzsl_index, gzsl_classes) = calls
    assert torch.equal(zsl_index, tiny.test_unseen_loc)
    assert torch.equal(zsl_classes, tiny.unseen_classes)
    assert torch.equal(
        gzsl_index, torch.cat([tiny.test_seen_loc, tiny.test_unseen_loc])
    )
    assert set(gzsl_classes.tolist()) == set(range(tiny.num_classes))

    first_seen = int(tiny.seen_classes[0])
    labels = tiny.labels[tiny.test_seen_loc]
    seen = 100 * per_class_accuracy(
        torch.full_like(labels, first_seen), labels, tiny.seen_classes
    )
    assert metrics['gzsl_seen'] == pytest.approx(seen)
    assert metrics['gzsl_unseen'] == 0.0
    assert metrics['zsl_acc'] == pytest.approx(100 / 4)


def test_zsl_per_class_by_hand():
    labels = torch.tensor([2, 2, 2, 2, 5, 5, 7, 7, 7, 3])
    predicted = torch.tensor([2, 5, 5, 7, 5, 5, 2, 2, 7, 3])
    classes = torch.tensor([2, 5, 7, 9])  # 9 has no image

    def score_fn(image_index, candidates):
        return (predicted[image_index, None] == candidates[None]).float()

    image_index = torch.arange(9)
    rows = zsl_per_class(score_fn, labels, image_index, classes)
    assert rows == [
        {'class': 2, 'images': 4, 'accuracy': 25.0, 'taken_by': 5},
        {'class': 5, 'images': 2, 'accuracy': 100.0, 'taken_by': None},
        {
            'class': 7,
            'images': 3,
            'accuracy': pytest.approx(100 / 3),
            'taken_by': 2,
        },
    ]
    mean = sum(row['accuracy'] for row in rows) / len(rows)
    assert mean == pytest.approx(
        zsl_accuracy(score_fn, labels, image_index, classes)
    )


def test_validate_never_reads_test_images(tiny):
    split = seen_validation_split(tiny, 0.25, seed=0)
    calls = []
    # Biased towards the classes trained on, as a trained model would be:
    score_fn = oracle(tiny, seen_bias=2.0, biased=split.train_classes)

    def recording(image_index, classes):
        calls.append((image_index, classes))
        return score_fn(image_index, classes)

    metrics = validate(tiny, split, recording)
    test = set(tiny.test_seen_loc.tolist()) | set(
        tiny.test_unseen_loc.tolist()
    )
    candidates = set(split.train_classes.tolist()) | set(
        split.val_classes.tolist()
    )
    for images, classes in calls:
        assert not set(images.tolist()) & test
        assert set(classes.tolist()) <= candidates
    assert metrics['val_zsl_acc'] == 100.0
    assert metrics['val_gzsl_unseen'] == 0.0
    # Margins: 3 for seen images, 1 for unseen ones; the middle of [1, 3):
    assert metrics['val_calibration'] == 2.0
    assert metrics['val_gzsl_cal_h'] == 100.0


def test_evaluate_apnet(tiny):
    # A model whose scores are all equal predicts the first candidate.
    model = APNet(
        tiny.attribute_dim,
        class_channels=8,
        hidden_channels=8,
        num_centroids=1,
        graph='none',
    )
    with torch.no_grad():
        model.head.lin_out.weight.zero_()
    metrics = evaluate(model, tiny)
    assert metrics['zsl_acc'] == pytest.approx(25.0)  # 1 of 4 classes
    assert metrics['gzsl_unseen'] == 0.0
    scores = apnet_score_fn(model, tiny)(
        tiny.test_unseen_loc[:5], tiny.unseen_classes
    )
    assert scores.size() == (5, 4)
    # The logits: gamma_2 = 30 times sigmoid(b), the same for every pair.
    expected = 30 * torch.sigmoid(model.head.lin_out.bias.detach())
    assert torch.allclose(scores, expected.expand_as(scores))
    assert harmonic_mean(50.0, 25.0) == pytest.approx(100.0 / 3)


def test_evaluate_needs_features(tiny_root):
    data = load_xlsa17(tiny_root, 'TINY', load_features=False)
    model = APNet(
        data.attribute_dim,
        class_channels=8,
        hidden_channels=8,
        num_centroids=1,
        graph='none',
    )
    with pytest.raises(ValueError, match='needs image features'):
        evaluate(model, data)


def test_empty_classes_or_images_are_named(tiny):
    # No unseen class (or image) once gave a bare IndexError from an argmax
    # over no class; every entry point names its own argument.
    import dataclasses

    none = torch.zeros(0, dtype=torch.long)
    score_fn, labels = oracle(tiny), tiny.labels
    images, unseen = tiny.test_unseen_loc, tiny.unseen_classes
    for call in (zsl_accuracy, zsl_per_class):
        with pytest.raises(ValueError) as error:
            call(score_fn, labels, images, none)
        assert str(error.value) == (
            "'classes' is empty: pass the candidate classes to classify the "
            'images among (at least one)'
        )
    for name in ('seen_classes', 'unseen_classes'):
        sets = {
            'seen_classes': tiny.seen_classes,
            'unseen_classes': unseen,
            name: none,
        }
        with pytest.raises(
            ValueError,
            match=f"^'{name}' is empty: GZSL "
            f'classifies images among the seen and the '
            f'unseen classes; pass at least one of each$',
        ):
            GZSLScores(score_fn, labels, tiny.test_seen_loc, images, **sets)

    model = APNet(
        tiny.attribute_dim,
        class_channels=8,
        hidden_channels=8,
        num_centroids=1,
        graph='none',
    )
    for field in (
        'unseen_classes',
        'test_unseen_loc',
        'seen_classes',
        'test_seen_loc',
    ):
        data = dataclasses.replace(tiny, **{field: none})
        for call in (
            lambda data=data: evaluate_scores(data, score_fn),
            lambda data=data: evaluate(model, data),
            lambda data=data: evaluate_predictions(
                data, lambda i, c: c[score_fn(i, c).argmax(1)]
            ),
        ):
            with pytest.raises(ValueError) as error:
                call()
            assert str(error.value) == (
                f"'data.{field}' is empty: the test protocol needs unseen "
                f'and seen classes with test images of each; evaluate a '
                f'dataset that has them'
            )

    split = seen_validation_split(tiny, 0.25, seed=0)
    for field in (
        'val_classes',
        'unseen_val_images',
        'train_classes',
        'seen_val_images',
    ):
        with pytest.raises(
            ValueError,
            match=f"^'split.{field}' is empty: "
            f'validation needs validation and training '
            f'classes with images of each; build the split '
            f'with seen_validation_split$',
        ):
            validate(tiny, split._replace(**{field: none}), score_fn)
