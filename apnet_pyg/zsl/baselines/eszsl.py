r"""ESZSL, "An embarrassingly simple approach to zero-shot learning"
(Romera-Paredes & Torr, ICML 2015): a bilinear compatibility
:math:`f(\mathbf{x}, c) = \mathbf{x}^{\top} \mathbf{V} \mathbf{s}_c`
fitted in closed form,

.. math::
    \mathbf{V} = (\mathbf{X}\mathbf{X}^{\top} + \gamma \mathbf{I})^{-1}
    \mathbf{X} \mathbf{Y} \mathbf{S}^{\top}
    (\mathbf{S}\mathbf{S}^{\top} + \lambda \mathbf{I})^{-1},

with :math:`\mathbf{X}` the :math:`d \times n` training features,
:math:`\mathbf{Y}` the :math:`n \times z` targets and :math:`\mathbf{S}`
the :math:`a \times z` attributes of the :math:`z` training classes. The
baseline against which the simulated data is calibrated
(:mod:`apnet_pyg.data.simulator`).

Targets: :math:`1` for the true class and :math:`0` elsewhere by default,
as in the authors' public code (their MATLAB scripts build
:obj:`Y = zeros(...)` and set the true class to 1, the :math:`-1` variant
commented out); the paper's text writes :math:`\{-1, 1\}`
(:obj:`signed_targets=True`). The choice matters in generalised ZSL. The
score factorises as :math:`\mathbf{r}(\mathbf{x})^{\top}
\boldsymbol{\alpha}_c` (:func:`attribute_map`); on an image that
resembles none of the seen classes :math:`\mathbf{r}(\mathbf{x})` sits
near the "wrong class" target, so with :math:`\pm 1` targets every class
scores about :math:`-\sum_j \alpha_{cj}`, and an unseen class whose
coefficients sum to less than a seen class's (about 1) starts ahead of the
seen classes; with :math:`\{0, 1\}` targets nobody starts ahead.
"""

from typing import Any, Iterable, Iterator, Sequence, Tuple

import torch
from torch import Tensor

from apnet_pyg.checks import as_index_tensor, check_finite, check_number


def fit_eszsl(
    features: Tensor,
    labels: Tensor,
    attributes: Tensor,
    classes: Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
    signed_targets: bool = False,
) -> Tensor:
    r"""Fits the ESZSL map :math:`\mathbf{V}` in closed form.

    Args:
        features (Tensor): Training image features (rows are images).
            Shape :obj:`[n, d]`.
        labels (Tensor): Class index of each image; every label must be in
            :obj:`classes`. Shape :obj:`[n]`.
        attributes (Tensor): Attributes of all classes. Shape :obj:`[C, a]`.
        classes (Tensor): The :obj:`z` training classes. Shape :obj:`[z]`.
        gamma (float, optional): Ridge on the feature side.
            (default: :obj:`1.0`)
        lam (float, optional): Ridge on the attribute side.
            (default: :obj:`1.0`)
        signed_targets (bool, optional): Targets in :math:`\{-1, 1\}` (the
            paper's text) instead of :math:`\{0, 1\}` (the authors' code;
            see the module docstring). (default: :obj:`False`)

    Returns:
        Tensor: :math:`\mathbf{V}`, shape :obj:`[d, a]`, dtype of
        :obj:`features`.
    """
    system = _FeatureSide(
        features, labels, attributes, classes, signed_targets
    )
    return system.solve(
        attributes, check_ridge(gamma, 'gamma'), check_ridge(lam, 'lam')
    ).to(features.dtype)


class _FeatureSide:
    r"""What the closed form needs from the training images, computed once:
    the eigendecomposition of the Gram matrix
    :math:`\mathbf{X}\mathbf{X}^{\top}` (:func:`gram_eigh`) and
    :math:`\mathbf{X}\mathbf{Y}`, so that a grid of :math:`(\gamma,
    \lambda)` costs one decomposition."""

    def __init__(
        self,
        features: Tensor,
        labels: Tensor,
        attributes: Tensor,
        classes: Tensor,
        signed_targets: bool,
    ):
        # float64: X X^T + gamma I is badly conditioned for small gamma.
        x = features.double()
        self.classes, class_sum, _ = class_sums(x, labels, attributes, classes)
        self.eigenvalues, self.eigenvectors = gram_eigh(x)
        # X Y without forming Y: per-class feature sums (minus the rest if
        # the targets are +-1).
        xy = class_sum.t()  # [d, z]
        if signed_targets:
            xy = 2 * xy - x.sum(0, keepdim=True).t()
        self.rotated_xy = self.eigenvectors.t() @ xy

    def left(self, gamma: float) -> Tensor:
        r""":math:`(\mathbf{X}\mathbf{X}^{\top} + \gamma \mathbf{I})^{-1}
        \mathbf{X}\mathbf{Y}` (:math:`\mathbf{X}\mathbf{Y}` lies in the
        span of the eigenvectors :func:`gram_eigh` keeps)."""
        return self.eigenvectors @ (
            self.rotated_xy / (self.eigenvalues[:, None] + gamma)
        )

    def solve(self, attributes: Tensor, gamma: float, lam: float) -> Tensor:
        return self.left(gamma) @ attribute_map(attributes, self.classes, lam)


def attribute_map(attributes: Tensor, classes: Tensor, lam: float) -> Tensor:
    r"""The attribute side of ESZSL, :math:`\mathbf{S}^{\top}
    (\mathbf{S}\mathbf{S}^{\top} + \lambda \mathbf{I})^{-1}` in float64,
    :math:`\mathbf{S}` the attributes of :obj:`classes`. Applied to a class's
    attributes :math:`\mathbf{s}_c` it gives the ridge coefficients
    :math:`\boldsymbol{\alpha}_c` of :math:`c` on those classes, and the
    score factorises as :math:`\mathbf{x}^{\top} \mathbf{V} \mathbf{s}_c
    = \mathbf{r}(\mathbf{x})^{\top} \boldsymbol{\alpha}_c` with
    :math:`\mathbf{r}` the feature-side ridge regression of the targets.

    Shapes:
        - attributes: :obj:`[C, a]`; classes: :obj:`[z]`; output:
          :obj:`[z, a]`.
    """
    check_ridge(lam, 'lam')
    classes = check_classes(classes, attributes)
    s = attributes[classes].double().t()  # [a, z]
    gram = s @ s.t()
    gram.diagonal().add_(lam)
    # S^T (S S^T + lam I)^{-1} = ((S S^T + lam I)^{-1} S)^T: 'gram' is
    # symmetric.
    return torch.linalg.solve(gram, s).t()


def gram_eigh(x: Tensor) -> Tuple[Tensor, Tensor]:
    r"""Eigendecomposition of the Gram matrix
    :math:`\mathbf{X}\mathbf{X}^{\top}` (:obj:`x.t() @ x`) of the rows of
    :obj:`x`, shared by the closed-form baselines. With fewer rows than
    columns (:math:`n < d`) it goes through the :math:`n \times n` matrix
    :obj:`x @ x.t()` and returns only the eigenpairs of nonzero
    eigenvalue, which span the rows of :obj:`x`.

    Args:
        x (Tensor): Shape :obj:`[n, d]`, float64.

    Returns:
        (Tensor, Tensor): Eigenvalues :obj:`[r]` (:math:`\geq 0`) and
        orthonormal eigenvectors :obj:`[d, r]`, :math:`r = d` when
        :math:`n \geq d`.
    """
    n, d = x.shape
    if n >= d:
        eigenvalues, eigenvectors = torch.linalg.eigh(x.t() @ x)
        # Round-off can make a zero eigenvalue slightly negative.
        return eigenvalues.clamp_min(0), eigenvectors
    eigenvalues, dual = torch.linalg.eigh(x @ x.t())
    keep = eigenvalues > 1e-12 * eigenvalues.max().clamp_min(1e-300)
    eigenvalues = eigenvalues[keep]
    return eigenvalues, x.t() @ dual[:, keep] / eigenvalues.sqrt()


def first_best(
    predictions: Iterable[Tuple[Any, Tensor]], target: Tensor, classes: Tensor
) -> Tuple[Any, float]:
    r"""Model selection of the closed-form baselines: the key of the first
    candidate, in the order given, whose predictions reach the highest
    per-class accuracy on :obj:`target` among :obj:`classes`, and that
    accuracy (%).

    Args:
        predictions (Iterable): :obj:`(key, predicted classes)` pairs.
        target (Tensor): True classes of the validation images.
        classes (Tensor): The validation classes.
    """
    from apnet_pyg.zsl.metrics import first_best_index, per_class_accuracy

    keys, accuracies = [], []
    for key, prediction in predictions:
        keys.append(key)
        accuracies.append(per_class_accuracy(prediction, target, classes))
    best = first_best_index(accuracies)
    return keys[best], 100.0 * accuracies[best]


def class_sums(
    features: Tensor, labels: Tensor, attributes: Tensor, classes: Tensor
) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Per-class sums and counts of the rows of :obj:`features`, the
    label side of the closed-form baselines (ESZSL's
    :math:`\mathbf{X}\mathbf{Y}`, SAE's :math:`\mathbf{S}\mathbf{X}^{\top}`).

    Args:
        features (Tensor): Shape :obj:`[n, d]`.
        labels (Tensor): Class index of each row, all in :obj:`classes`.
            Shape :obj:`[n]`.
        attributes (Tensor): Attributes of all :obj:`C` classes (labels
            and :obj:`classes` are in :obj:`[0, C)`). Shape :obj:`[C, a]`.
        classes (Tensor): The :obj:`z` classes summed over.

    Returns:
        (Tensor, Tensor, Tensor): :obj:`classes` as int64 :obj:`[z]`, the
        sums :obj:`[z, d]` (dtype of :obj:`features`) and the counts
        :obj:`[z]`, in :obj:`classes` order.
    """
    if (
        features.dim() != 2
        or labels.dim() != 1
        or labels.numel() != features.size(0)
    ):
        raise ValueError(
            f"'features' must be [n, d] and 'labels' [n] "
            f'(got {tuple(features.shape)} and '
            f'{tuple(labels.shape)})'
        )
    # A NaN would otherwise surface as a failed eigendecomposition.
    check_finite(features, 'features')
    classes = check_classes(classes, attributes)
    labels = check_classes(labels, attributes, 'labels', allow_empty=True)
    position = torch.full((attributes.size(0),), -1, dtype=torch.long)
    position[classes] = torch.arange(classes.numel())
    slot = position[labels]
    if bool((slot < 0).any()):
        raise ValueError("'labels' contains classes that are not in 'classes'")
    sums = features.new_zeros(classes.numel(), features.size(1))
    sums.index_add_(0, slot, features)
    return classes, sums, torch.bincount(slot, minlength=classes.numel())


def eszsl_scores(
    v: Tensor, features: Tensor, attributes: Tensor, classes: Tensor
) -> Tensor:
    r"""Returns the compatibility :math:`\mathbf{x}^{\top} \mathbf{V}
    \mathbf{s}_c` of every image with every candidate class.

    Shapes:
        - v: :obj:`[d, a]`; features: :obj:`[n, d]`; attributes:
          :obj:`[C, a]`; classes: :obj:`[z]`; output: :obj:`[n, z]`.
    """
    check_map_shapes(v, 'v', features, attributes)
    classes = check_classes(classes, attributes)
    return (
        features
        @ v.to(features.dtype)
        @ attributes[classes].to(features.dtype).t()
    )


def predict_eszsl(
    v: Tensor, features: Tensor, attributes: Tensor, classes: Tensor
) -> Tensor:
    r"""Predicts, for each image, the candidate class of highest
    compatibility (:obj:`classes` = unseen classes for ZSL, all classes for
    generalised ZSL).

    Returns:
        Tensor: Predicted class indices (values of :obj:`classes`).
        Shape :obj:`[n]`.
    """
    classes = check_classes(classes, attributes)
    return classes[eszsl_scores(v, features, attributes, classes).argmax(1)]


def eszsl_grid_predictions(
    features: Tensor,
    labels: Tensor,
    attributes: Tensor,
    train_classes: Tensor,
    train_images: Tensor,
    val_classes: Tensor,
    val_images: Tensor,
    grid: Sequence[float],
    signed_targets: bool = False,
) -> Iterator[Tuple[Tuple[float, float], Tensor]]:
    r"""For every :math:`(\gamma, \lambda)` of :obj:`grid` x :obj:`grid`
    (in that order), ESZSL fitted on :obj:`train_images` and its
    predictions for :obj:`val_images` among :obj:`val_classes`:
    :obj:`((gamma, lam), predicted classes)` pairs, as
    :func:`first_best` reads them. The feature side is factorised once."""
    check_grid(grid)
    side = _FeatureSide(
        features[train_images],
        labels[train_images],
        attributes,
        train_classes,
        signed_targets,
    )
    for gamma in grid:
        for lam in grid:
            v = side.solve(attributes, gamma, lam).to(features.dtype)
            yield (
                (gamma, lam),
                predict_eszsl(
                    v, features[val_images], attributes, val_classes
                ),
            )


def fit_eszsl_validated(
    features: Tensor,
    labels: Tensor,
    attributes: Tensor,
    train_classes: Tensor,
    train_images: Tensor,
    val_classes: Tensor,
    val_images: Tensor,
    refit_classes: Tensor,
    refit_images: Tensor,
    grid: Sequence[float] = tuple(10.0**p for p in range(-3, 4)),
    signed_targets: bool = False,
) -> Tuple[Tensor, float, float, float]:
    r"""ESZSL with :math:`(\gamma, \lambda)` chosen on validation
    classes: fitted on :obj:`train_images` (of :obj:`train_classes`), scored
    by per-class ZSL accuracy on :obj:`val_images` among
    :obj:`val_classes`, then refitted with the best pair on
    :obj:`refit_images` (e.g. all seen classes' images).

    Returns:
        (Tensor, float, float, float): :math:`\mathbf{V}`, :math:`\gamma`,
        :math:`\lambda` and the validation accuracy (%) of the chosen pair.
    """
    (gamma, lam), accuracy = first_best(
        eszsl_grid_predictions(
            features,
            labels,
            attributes,
            train_classes,
            train_images,
            val_classes,
            val_images,
            grid,
            signed_targets,
        ),
        labels[val_images],
        val_classes,
    )
    v = fit_eszsl(
        features[refit_images],
        labels[refit_images],
        attributes,
        refit_classes,
        gamma,
        lam,
        signed_targets,
    )
    return v, gamma, lam, accuracy


def check_ridge(value: Any, name: str) -> float:
    r"""Checks that a ridge weight of the closed forms (:math:`\gamma`,
    :math:`\lambda`) is a finite number :math:`> 0`, and returns it as a
    float: at :math:`0` the systems can be singular, and below it the closed
    forms are no longer minima."""
    value = check_number(value, name)
    if not value > 0:
        raise ValueError(f"'{name}' must be > 0 (got {value:g})")
    return value


def check_grid(grid: Sequence[float]) -> None:
    r"""Checks a grid of ridge weights to choose from: not empty, every
    value a finite number :math:`> 0` (:func:`check_ridge`)."""
    if len(grid) == 0:
        raise ValueError("'grid' is empty: give at least one value")
    for value in grid:
        try:
            check_ridge(value, 'grid')
        except ValueError:
            raise ValueError(
                f"'grid' must hold finite numbers > 0 (got {value!r})"
            ) from None


def check_classes(
    classes: Any,
    attributes: Tensor,
    name: str = 'classes',
    allow_empty: bool = False,
) -> Tensor:
    r"""Checks that :obj:`classes` holds integer indices
    (:func:`~apnet_pyg.checks.as_index_tensor`) of rows of :obj:`attributes`
    (a negative index would silently read another class) and returns them
    flattened as int64."""
    classes = as_index_tensor(classes, name)
    if classes.numel() == 0:
        if allow_empty:
            return classes
        raise ValueError(f"'{name}' is empty: give at least one class")
    num_classes = attributes.size(0)
    if int(classes.min()) < 0 or int(classes.max()) >= num_classes:
        outside = classes[(classes < 0) | (classes >= num_classes)]
        raise ValueError(
            f"'{name}' holds class {int(outside[0])}, outside "
            f"the {num_classes} classes of 'attributes' (rows "
            f'0 to {num_classes - 1})'
        )
    return classes


def check_map_shapes(
    weight: Tensor,
    name: str,
    features: Tensor,
    attributes: Tensor,
    feature_dim: int = 0,
) -> None:
    r"""Checks that a fitted map :obj:`weight` of the closed forms
    (:obj:`[d, a]` for ESZSL's :math:`\mathbf{V}`, :obj:`[a, d]` for SAE's
    :math:`\mathbf{W}`: :obj:`feature_dim` is the dimension of :math:`d`)
    fits :obj:`features` :obj:`[n, d]` and :obj:`attributes`
    :obj:`[C, a]`."""
    if weight.dim() != 2 or features.dim() != 2 or attributes.dim() != 2:
        raise ValueError(
            f"'{name}', 'features' and 'attributes' must be "
            f'2-dimensional (got {tuple(weight.shape)}, '
            f'{tuple(features.shape)} and '
            f'{tuple(attributes.shape)})'
        )
    d, a = weight.size(feature_dim), weight.size(1 - feature_dim)
    if features.size(1) != d or attributes.size(1) != a:
        raise ValueError(
            f"'{name}' {tuple(weight.shape)} was fitted on "
            f'{d}-d features and {a} attributes; got '
            f"{features.size(1)}-d 'features' and "
            f"{attributes.size(1)} 'attributes'"
        )
