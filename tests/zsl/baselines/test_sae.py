import numpy as np
import pytest
import torch

from apnet_pyg.zsl.baselines.sae import (
    fit_sae,
    fit_sae_validated,
    predict_sae,
    sae_grid_predictions,
    sae_scores,
)
from apnet_pyg.zsl.metrics import per_class_accuracy


def test_hand_computed_case():
    # Two images with 2-d features (3, 4) and (0, 2), L2-normalised to
    # (0.6, 0.8) and (0, 1); classes 0 and 1 with 1-d attributes 1 and 2.
    # With S = [1 2] and X = [[0.6, 0], [0.8, 1]]: S S^T = 5,
    # X X^T = [[0.36, 0.48], [0.48, 1.64]], S X^T = [0.6, 2.8]. For
    # lambda = 1 the equation is W (5 I + X X^T) = 2 [0.6, 2.8] = [1.2, 5.6],
    # 5 I + X X^T = [[5.36, 0.48], [0.48, 6.64]] with determinant 35.36, so
    # W = [1.2 * 6.64 - 5.6 * 0.48, 5.6 * 5.36 - 1.2 * 0.48] / 35.36
    #   = [5.28, 29.44] / 35.36.
    features = torch.tensor([[3.0, 4.0], [0.0, 2.0]], dtype=torch.float64)
    labels = torch.tensor([0, 1])
    attributes = torch.tensor([[1.0], [2.0]], dtype=torch.float64)
    expected = torch.tensor([[5.28, 29.44]], dtype=torch.float64) / 35.36
    for solver in ('eigh', 'sylvester'):
        w = fit_sae(
            features,
            labels,
            attributes,
            torch.tensor([0, 1]),
            lam=1.0,
            solver=solver,
        )
        assert w.shape == (1, 2) and w.dtype == torch.float64
        assert torch.allclose(w, expected, atol=1e-12)


def kronecker_sae(x, s, lam):
    # A W + W B = C in vectorised (column-major) form:
    # (I_d kron A + B^T kron I_k) vec(W) = vec(C).
    k, d = s.shape[0], x.shape[0]
    a, b, c = s @ s.T, lam * x @ x.T, (1 + lam) * s @ x.T
    system = np.kron(np.eye(d), a) + np.kron(b.T, np.eye(k))
    return np.linalg.solve(system, c.flatten(order='F')).reshape(
        (k, d), order='F'
    )


@pytest.mark.parametrize('lam', [0.05, 1.0, 30.0])
def test_both_solvers_match_the_kronecker_form(lam):
    rng = np.random.default_rng(0)
    features = rng.random((40, 6)) + 0.1
    attributes = rng.random((7, 3))
    classes = np.array([0, 2, 3, 5, 6])
    labels = classes[rng.integers(0, classes.size, 40)]
    x = features / np.linalg.norm(features, axis=1, keepdims=True)
    expected = kronecker_sae(x.T, attributes[labels].T, lam)
    for solver in ('eigh', 'sylvester'):
        w = fit_sae(
            torch.from_numpy(features),
            torch.from_numpy(labels),
            torch.from_numpy(attributes),
            torch.from_numpy(classes),
            lam=lam,
            solver=solver,
        )
        assert np.allclose(w.numpy(), expected, rtol=1e-8, atol=1e-10)


def test_singular_system_gets_the_minimum_norm_solution():
    # 3 images in 5 dimensions, 2 classes with 4 attributes: S S^T and
    # X X^T both have zero eigenvalues. The eigen path still solves the
    # equation, with no component outside the data.
    rng = np.random.default_rng(1)
    features = torch.from_numpy(rng.random((3, 5)))
    labels = torch.tensor([0, 1, 1])
    attributes = torch.from_numpy(rng.random((2, 4)))
    w = fit_sae(features, labels, attributes, torch.tensor([0, 1]), lam=0.5)
    x = torch.nn.functional.normalize(features, dim=1).t()
    s = attributes[labels].t()
    assert torch.allclose(
        s @ s.t() @ w + 0.5 * w @ x @ x.t(), 1.5 * s @ x.t(), atol=1e-10
    )
    # Rows in the span of the images, columns in the span of the attributes.
    assert torch.allclose(
        w @ (torch.eye(5, dtype=x.dtype) - x @ torch.linalg.pinv(x)),
        torch.zeros(4, 5, dtype=x.dtype),
        atol=1e-10,
    )
    assert torch.allclose(
        (torch.eye(4, dtype=x.dtype) - s @ torch.linalg.pinv(s)) @ w,
        torch.zeros(4, 5, dtype=x.dtype),
        atol=1e-10,
    )


def test_scores_in_both_spaces():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    features = torch.randn(4, 5, generator=gen, dtype=torch.float64)
    attributes = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    classes = torch.tensor([1, 4, 5])
    w_unit = w / w.norm(dim=1, keepdim=True)
    s = attributes[classes]

    def cosine(a, b):
        return (a / a.norm(dim=1, keepdim=True)) @ (
            b / b.norm(dim=1, keepdim=True)
        ).t()

    semantic = sae_scores(w, features, attributes, classes, 'semantic')
    assert torch.allclose(semantic, cosine(features @ w_unit.t(), s))
    feature = sae_scores(w, features, attributes, classes, 'feature')
    assert torch.allclose(feature, cosine(features, s @ w_unit))
    # Independent of the scale of each test image.
    scaled = features * torch.tensor(
        [[1.0], [3.0], [0.2], [7.0]], dtype=torch.float64
    )
    for space, scores in (('semantic', semantic), ('feature', feature)):
        assert torch.allclose(
            sae_scores(w, scaled, attributes, classes, space), scores
        )
        assert torch.equal(
            predict_sae(w, features, attributes, classes, space),
            classes[scores.argmax(1)],
        )


def linear_data(seed=3):
    # Features a noisy linear image of the attributes: 9 classes, 6 images
    # each; train 0-3, validation 4-5, seen 0-5, unseen 6-8.
    gen = torch.Generator().manual_seed(seed)
    attributes = torch.rand(9, 5, generator=gen, dtype=torch.float64)
    labels = torch.arange(9).repeat_interleave(6)
    features = attributes[labels] @ torch.randn(
        5, 12, generator=gen, dtype=torch.float64
    )
    features += 0.3 * torch.randn(
        features.shape, generator=gen, dtype=torch.float64
    )
    split = dict(
        train_classes=torch.arange(4),
        train_images=torch.nonzero(labels < 4).view(-1),
        val_classes=torch.arange(4, 6),
        val_images=torch.nonzero((labels >= 4) & (labels < 6)).view(-1),
        refit_classes=torch.arange(6),
        refit_images=torch.nonzero(labels < 6).view(-1),
    )
    return features, labels, attributes, split


def test_validated_fit_equals_brute_force_grid():
    features, labels, attributes, split = linear_data()
    grid = [1e-2, 0.3, 10.0, 300.0]
    w, lam, space, accuracy = fit_sae_validated(
        features, labels, attributes, grid=grid, **split
    )
    val_images, val_classes = split['val_images'], split['val_classes']

    def validation(lam_, space_):
        w_ = fit_sae(
            features[split['train_images']],
            labels[split['train_images']],
            attributes,
            split['train_classes'],
            lam_,
        )
        pred = predict_sae(
            w_, features[val_images], attributes, val_classes, space_
        )
        return per_class_accuracy(pred, labels[val_images], val_classes)

    pairs = [
        (lam_, space_) for space_ in ('semantic', 'feature') for lam_ in grid
    ]
    accuracies = [validation(*pair) for pair in pairs]
    # The first pair in (space, lambda) order reaching the best accuracy:
    assert (lam, space) == pairs[int(np.argmax(accuracies))]
    assert accuracy == 100 * max(accuracies)
    assert torch.allclose(
        w,
        fit_sae(
            features[split['refit_images']],
            labels[split['refit_images']],
            attributes,
            split['refit_classes'],
            lam,
        ),
    )
    # One space only:
    _, _, only, _ = fit_sae_validated(
        features, labels, attributes, grid=grid, spaces=('feature',), **split
    )
    assert only == 'feature'


def test_validation_never_reads_test_images():
    features, labels, attributes, split = linear_data()
    test = torch.nonzero(labels >= 6).view(-1)
    w, lam, space, _ = fit_sae_validated(features, labels, attributes, **split)
    # Scramble the labels and features of the unseen (test) images: the
    # choice and the encoder must not change.
    gen = torch.Generator().manual_seed(0)
    labels2, features2 = labels.clone(), features.clone()
    labels2[test] = labels[test][torch.randperm(test.numel(), generator=gen)]
    labels2[test[:3]] = 0  # even labels of seen classes
    features2[test] = torch.randn(
        test.numel(), features.size(1), generator=gen, dtype=features.dtype
    )
    w2, lam2, space2, _ = fit_sae_validated(
        features2, labels2, attributes, **split
    )
    assert (lam2, space2) == (lam, space)
    assert torch.equal(w2, w)


def test_deterministic():
    features, labels, attributes, split = linear_data()
    first = fit_sae_validated(features, labels, attributes, **split)
    second = fit_sae_validated(features, labels, attributes, **split)
    assert first[1:] == second[1:]
    assert torch.equal(first[0], second[0])


def test_known_answer_transfers_to_unseen_classes():
    # Noise-free features that are an orthonormal image of unit-norm
    # attributes, x = Q s_y (so the L2 normalisation changes nothing), with
    # the seen attributes spanning the attribute space: W = Q^T solves the
    # equation exactly (S S^T Q^T + lam Q^T Q S S^T Q^T = (1 + lam) S X^T),
    # uniquely since S S^T is invertible, and the unseen classes are
    # recognised in both spaces, also among all classes.
    gen = torch.Generator().manual_seed(0)
    attributes = torch.nn.functional.normalize(
        torch.rand(10, 4, generator=gen, dtype=torch.float64), dim=1
    )
    q, _ = torch.linalg.qr(
        torch.randn(8, 4, generator=gen, dtype=torch.float64)
    )
    labels = torch.arange(10).repeat_interleave(3)
    features = attributes[labels] @ q.t()
    seen, unseen = torch.arange(6), torch.arange(6, 10)
    train = torch.nonzero(labels < 6).view(-1)
    w = fit_sae(features[train], labels[train], attributes, seen, lam=0.7)
    assert torch.allclose(w, q.t(), atol=1e-9)
    test = torch.nonzero(labels >= 6).view(-1)
    for space in ('semantic', 'feature'):
        for candidates in (unseen, torch.arange(10)):
            pred = predict_sae(
                w, features[test], attributes, candidates, space
            )
            assert per_class_accuracy(pred, labels[test], unseen) == 1.0


def test_bad_input():
    x = torch.rand(4, 3)
    attributes = torch.rand(3, 2)
    with pytest.raises(ValueError, match='not in'):
        fit_sae(
            x, torch.tensor([0, 1, 2, 2]), attributes, torch.tensor([0, 1])
        )
    with pytest.raises(ValueError, match=r"'lam' must be > 0"):
        fit_sae(
            x,
            torch.tensor([0, 1, 1, 0]),
            attributes,
            torch.tensor([0, 1]),
            lam=0.0,
        )
    with pytest.raises(ValueError, match="'solver' must be one of"):
        fit_sae(
            x,
            torch.tensor([0, 1, 1, 0]),
            attributes,
            torch.tensor([0, 1]),
            solver='lstsq',
        )
    with pytest.raises(ValueError, match="'space' must be one of"):
        predict_sae(
            torch.rand(2, 3),
            x,
            attributes,
            torch.tensor([0, 1]),
            space='visual',
        )
    with pytest.raises(ValueError, match=r'\[n, d\]'):
        fit_sae(x, torch.tensor([0, 1]), attributes, torch.tensor([0, 1]))


def test_grid_predictions_are_each_pair_fitted_alone():
    # Every (lambda, space) in spaces x grid order, each the prediction of
    # SAE fitted on the training images with that lambda.
    features, labels, attributes, split = linear_data()
    grid = [0.3, 10.0]
    pairs = list(
        sae_grid_predictions(
            features,
            labels,
            attributes,
            split['train_classes'],
            split['train_images'],
            split['val_classes'],
            split['val_images'],
            grid,
        )
    )
    assert [key for key, _ in pairs] == [
        (lam, space) for space in ('semantic', 'feature') for lam in grid
    ]
    for (lam, space), prediction in pairs:
        w = fit_sae(
            features[split['train_images']],
            labels[split['train_images']],
            attributes,
            split['train_classes'],
            lam,
        )
        assert torch.equal(
            prediction,
            predict_sae(
                w,
                features[split['val_images']],
                attributes,
                split['val_classes'],
                space,
            ),
        )
    with pytest.raises(ValueError, match="'spaces' must hold"):
        list(
            sae_grid_predictions(
                features,
                labels,
                attributes,
                split['train_classes'],
                split['train_images'],
                split['val_classes'],
                split['val_images'],
                grid,
                spaces=('pixel',),
            )
        )
