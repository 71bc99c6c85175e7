import numpy as np
import pytest
import torch

from apnet_pyg.zsl.baselines.eszsl import (
    attribute_map,
    eszsl_scores,
    fit_eszsl,
    predict_eszsl,
)
from apnet_pyg.zsl.metrics import per_class_accuracy


def explicit_eszsl(x, y, s, gamma, lam, signed):
    # The paper's formula with explicit X (d x n), Y (n x z), S (a x z).
    eye = np.eye
    targets = np.where(y, 1.0, -1.0 if signed else 0.0)
    return (
        np.linalg.inv(x @ x.T + gamma * eye(x.shape[0]))
        @ x
        @ targets
        @ s.T
        @ np.linalg.inv(s @ s.T + lam * eye(s.shape[0]))
    )


@pytest.mark.parametrize('signed', [True, False])
def test_closed_form_matches_formula(signed):
    rng = np.random.default_rng(0)
    features = rng.standard_normal((30, 6))
    attributes = rng.standard_normal((7, 4))
    classes = np.array([1, 2, 4, 6])
    labels = classes[rng.integers(0, 4, 30)]
    v = fit_eszsl(
        torch.from_numpy(features),
        torch.from_numpy(labels),
        torch.from_numpy(attributes),
        torch.from_numpy(classes),
        gamma=0.5,
        lam=2.0,
        signed_targets=signed,
    )
    y = labels[:, None] == classes[None, :]
    expected = explicit_eszsl(
        features.T, y, attributes[classes].T, 0.5, 2.0, signed
    )
    assert v.shape == (6, 4)
    assert np.allclose(v.numpy(), expected)
    scores = eszsl_scores(
        v,
        torch.from_numpy(features),
        torch.from_numpy(attributes),
        torch.tensor([0, 3]),
    )
    assert np.allclose(
        scores.numpy(), features @ expected @ attributes[[0, 3]].T
    )


def test_known_answer_transfers_to_unseen_classes():
    # Features are an invertible linear image of the attributes, x = A s_y,
    # and the 6 seen classes have orthonormal attributes (S S^T = I). With
    # {0, 1} targets and vanishing ridges the closed form is then exactly
    # V = A^{-T}, whatever the class sizes, so x^T V s_c = s_y^T s_c: every
    # unseen class (unit attributes) is recognised.
    gen = torch.Generator().manual_seed(0)
    q, _ = torch.linalg.qr(
        torch.randn(6, 6, generator=gen, dtype=torch.float64)
    )
    unseen_attributes = torch.nn.functional.normalize(
        torch.randn(4, 6, generator=gen, dtype=torch.float64), dim=1
    )
    attributes = torch.cat([q, unseen_attributes])  # [10, 6]
    mixing = torch.randn(
        6, 6, generator=gen, dtype=torch.float64
    ) + 3 * torch.eye(6, dtype=torch.float64)  # A^T, well conditioned
    seen, unseen = torch.arange(6), torch.arange(6, 10)
    labels = torch.tensor([0, 0, 1, 2, 2, 2, 3, 4, 4, 5, 5, 5, 5])
    v = fit_eszsl(
        attributes[labels] @ mixing,
        labels,
        attributes,
        seen,
        gamma=1e-9,
        lam=1e-9,
        signed_targets=False,
    )
    assert torch.allclose(v, torch.linalg.inv(mixing), atol=1e-5)

    test_labels = unseen.repeat_interleave(5)
    x = attributes[test_labels] @ mixing
    x = x + 0.01 * torch.randn(x.shape, generator=gen, dtype=torch.float64)
    pred = predict_eszsl(v, x, attributes, unseen)
    assert torch.isin(pred, unseen).all()
    assert per_class_accuracy(pred, test_labels, unseen) == 1.0
    # Generalised ZSL: among all 10 classes the unseen images still win.
    pred = predict_eszsl(v, x, attributes, torch.arange(10))
    assert per_class_accuracy(pred, test_labels, unseen) == 1.0


def test_bad_input():
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match='not in'):
        fit_eszsl(
            x,
            torch.tensor([0, 1, 2, 2]),
            torch.randn(3, 2),
            torch.tensor([0, 1]),
        )
    with pytest.raises(ValueError, match=r'\[n, d\]'):
        fit_eszsl(
            x, torch.tensor([0, 1]), torch.randn(3, 2), torch.tensor([0, 1])
        )


def noisy_linear_data():
    # Features a noisy linear image of the attributes: 9 classes of 6
    # images, 5 attributes, 7 features.
    gen = torch.Generator().manual_seed(3)
    attributes = torch.randn(9, 5, generator=gen, dtype=torch.float64)
    labels = torch.arange(9).repeat_interleave(6)
    features = attributes[labels] @ torch.randn(
        5, 7, generator=gen, dtype=torch.float64
    )
    features += 0.5 * torch.randn(
        features.shape, generator=gen, dtype=torch.float64
    )
    return features, labels, attributes


def test_validated_fit_equals_brute_force_grid():
    from apnet_pyg.zsl.baselines.eszsl import fit_eszsl_validated

    features, labels, attributes = noisy_linear_data()
    train, val, seen = torch.arange(4), torch.arange(4, 6), torch.arange(6)
    train_images = torch.nonzero(labels < 4).view(-1)
    val_images = torch.nonzero((labels >= 4) & (labels < 6)).view(-1)
    seen_images = torch.nonzero(labels < 6).view(-1)
    grid = [1e-2, 1.0, 1e2]
    v, gamma, lam, accuracy = fit_eszsl_validated(
        features,
        labels,
        attributes,
        train,
        train_images,
        val,
        val_images,
        seen,
        seen_images,
        grid,
    )

    def validation(g, lam_):
        w = fit_eszsl(
            features[train_images],
            labels[train_images],
            attributes,
            train,
            g,
            lam_,
        )
        pred = predict_eszsl(w, features[val_images], attributes, val)
        return per_class_accuracy(pred, labels[val_images], val)

    best = max(validation(g, lam_) for g in grid for lam_ in grid)
    assert validation(gamma, lam) == best
    assert accuracy == 100 * best
    # The first pair in grid order that reaches the best accuracy wins:
    first = next(
        (g, lam_) for g in grid for lam_ in grid if validation(g, lam_) == best
    )
    assert (gamma, lam) == first
    assert torch.allclose(
        v,
        fit_eszsl(
            features[seen_images],
            labels[seen_images],
            attributes,
            seen,
            gamma,
            lam,
        ),
    )


@pytest.mark.parametrize('signed', [True, False])
def test_score_factorises_through_attribute_map(signed):
    # x^T V s_c = r(x) . alpha_c: r the ridge regression of the targets
    # (+-1 or {0, 1}) on the features, alpha_c = S^T (S S^T + lam I)^-1 s_c;
    # float64.
    gen = torch.Generator().manual_seed(5)
    attributes = torch.rand(7, 4, generator=gen, dtype=torch.float64)
    seen, gamma, lam = torch.arange(5), 2.0, 0.3
    labels = torch.arange(5).repeat_interleave(4)
    x = torch.randn(20, 9, generator=gen, dtype=torch.float64)
    test = torch.randn(6, 9, generator=gen, dtype=torch.float64)
    y = (labels[:, None] == seen).double()
    if signed:
        y = 2 * y - 1
    v = fit_eszsl(
        x, labels, attributes, seen, gamma, lam, signed_targets=signed
    )
    ridge = torch.linalg.solve(
        x.t() @ x + gamma * torch.eye(9, dtype=x.dtype), x.t() @ y
    )
    s = attributes[seen].t()
    alpha = s.t() @ torch.linalg.solve(
        s @ s.t() + lam * torch.eye(4, dtype=s.dtype), attributes.t()
    )
    everyone = torch.arange(7)
    torch.testing.assert_close(
        eszsl_scores(v, test, attributes, everyone), test @ ridge @ alpha
    )
    torch.testing.assert_close(
        attribute_map(attributes, seen, lam) @ attributes.t(), alpha
    )


def test_grid_predictions_are_each_pair_fitted_alone():
    # Every (gamma, lambda) in grid x grid order, each the prediction of
    # ESZSL fitted on the training images with that pair.
    from apnet_pyg.zsl.baselines.eszsl import eszsl_grid_predictions

    features, labels, attributes = noisy_linear_data()
    train, val = torch.arange(4), torch.arange(4, 9)
    train_images = torch.nonzero(labels < 4).view(-1)
    val_images = torch.nonzero(labels >= 4).view(-1)
    grid = [1e-1, 10.0]
    pairs = list(
        eszsl_grid_predictions(
            features,
            labels,
            attributes,
            train,
            train_images,
            val,
            val_images,
            grid,
        )
    )
    assert [key for key, _ in pairs] == [
        (g, lam) for g in grid for lam in grid
    ]
    for (gamma, lam), prediction in pairs:
        v = fit_eszsl(
            features[train_images],
            labels[train_images],
            attributes,
            train,
            gamma,
            lam,
        )
        assert torch.equal(
            prediction, predict_eszsl(v, features[val_images], attributes, val)
        )
    with pytest.raises(ValueError, match="'grid' is empty"):
        list(
            eszsl_grid_predictions(
                features,
                labels,
                attributes,
                train,
                train_images,
                val,
                val_images,
                [],
            )
        )
