r"""SAE, "Semantic Autoencoder for Zero-Shot Learning" (Kodirov, Xiang &
Gong, CVPR 2017): a linear encoder :math:`\mathbf{W}` from image features
to attributes whose transpose, the decoder, must reconstruct the features.
With :math:`\mathbf{X}` the :math:`d \times n` training features and
:math:`\mathbf{S}` the :math:`k \times n` attributes of each image's
class, the relaxed objective :math:`\lVert \mathbf{X} - \mathbf{W}^{\top}
\mathbf{S} \rVert^2 + \lambda \lVert \mathbf{W}\mathbf{X} - \mathbf{S}
\rVert^2` has its minimum at the solution of the Sylvester equation

.. math::
    \mathbf{S}\mathbf{S}^{\top} \mathbf{W} + \lambda\, \mathbf{W}
    \mathbf{X}\mathbf{X}^{\top} = (1 + \lambda)\, \mathbf{S}
    \mathbf{X}^{\top}.

Both matrices on the left are symmetric, so with their eigendecompositions
:math:`\mathbf{S}\mathbf{S}^{\top} = \mathbf{U}\mathrm{diag}(\alpha)
\mathbf{U}^{\top}` and :math:`\mathbf{X}\mathbf{X}^{\top} =
\mathbf{Q}\mathrm{diag}(\mu)\mathbf{Q}^{\top}` the solution is
:math:`\mathbf{W} = \mathbf{U} \big[(1 + \lambda)\, (\mathbf{U}^{\top}
\mathbf{S}\mathbf{X}^{\top}\mathbf{Q})_{ij} / (\alpha_i + \lambda \mu_j)
\big] \mathbf{Q}^{\top}`: one pair of decompositions serves a whole grid of
:math:`\lambda` (:obj:`solver='eigh'`, the default). Where
:math:`\alpha_i + \lambda\mu_j = 0` the right-hand side vanishes too (the
direction is outside the data) and that entry is set to :math:`0`, the
minimum-norm solution. :obj:`solver='sylvester'` calls
:func:`scipy.linalg.solve_sylvester` (Bartels-Stewart) instead.

Pre-processing and prediction follow the authors' code
(https://github.com/Elyorcv/SAE, :obj:`awa_demo.m` and :obj:`zsl_el.m`)
as re-implemented for xlsa17 in
https://github.com/mvp18/Popular-ZSL-Algorithms (:obj:`SAE/sae_gzsl.py`):

* each training image's feature vector is L2-normalised (the authors' AwA
  demo normalises each feature dimension instead, for its GoogLeNet
  features; the xlsa17 re-implementation normalises each image);
* each row of :math:`\mathbf{W}` (one attribute's encoder) is
  L2-normalised before prediction;
* :obj:`'semantic'` space ("F -> S", encoder): an image is projected to
  :math:`\hat{\mathbf{s}} = \mathbf{W}\mathbf{x}` and compared with the
  class attributes :math:`\mathbf{s}_c` by cosine similarity;
* :obj:`'feature'` space ("S -> F", decoder): a class is projected to
  :math:`\mathbf{W}^{\top}\mathbf{s}_c` and compared with the image
  feature :math:`\mathbf{x}` by cosine similarity.

Cosine similarity makes both predictions independent of the scale of a
test image, so test features need no normalisation. The authors' CUB demo
also z-scores the similarities of each class over the test set; that
uses the test set's statistics and is left out.
"""

from typing import Iterator, Sequence, Tuple

import torch
from torch import Tensor

from apnet_pyg.zsl.baselines.eszsl import (
    check_classes,
    check_grid,
    check_map_shapes,
    check_ridge,
    class_sums,
    first_best,
    gram_eigh,
)

SPACES = ('semantic', 'feature')
SOLVERS = ('eigh', 'sylvester')
# Half decades from 1e-3 to 1e6: with unit-norm features and attributes,
# X X^T spreads its trace over d = 2048 dimensions and S S^T over k <= 312,
# so the balance point is large.
DEFAULT_LAMBDA_GRID = tuple(10.0 ** (p / 2) for p in range(-6, 13))


def fit_sae(
    features: Tensor,
    labels: Tensor,
    attributes: Tensor,
    classes: Tensor,
    lam: float = 1.0,
    solver: str = 'eigh',
) -> Tensor:
    r"""Fits the SAE encoder :math:`\mathbf{W}` in closed form.

    Args:
        features (Tensor): Training image features (rows are images; each
            is L2-normalised here). Shape :obj:`[n, d]`.
        labels (Tensor): Class index of each image; every label must be in
            :obj:`classes`. Shape :obj:`[n]`.
        attributes (Tensor): Attributes of all classes. Shape :obj:`[C, k]`.
        classes (Tensor): The training classes. Shape :obj:`[z]`.
        lam (float, optional): :math:`\lambda`, weight of the encoder's
            attribute-prediction term. (default: :obj:`1.0`)
        solver (str, optional): :obj:`'eigh'` (eigendecompositions) or
            :obj:`'sylvester'` (:func:`scipy.linalg.solve_sylvester`).
            (default: :obj:`'eigh'`)

    Returns:
        Tensor: :math:`\mathbf{W}`, shape :obj:`[k, d]`, dtype of
        :obj:`features`.
    """
    if solver not in SOLVERS:
        raise ValueError(f"'solver' must be one of {SOLVERS} (got '{solver}')")
    system = _SylvesterSystem(features, labels, attributes, classes)
    w = system.solve(lam) if solver == 'eigh' else system.solve_sylvester(lam)
    return w.to(features.dtype)


class _SylvesterSystem:
    r"""The Sylvester equation from per-class feature sums
    (:math:`\mathbf{S}\mathbf{S}^{\top} = \sum_c n_c
    \mathbf{s}_c\mathbf{s}_c^{\top}`, :math:`\mathbf{S}\mathbf{X}^{\top} =
    \sum_c \mathbf{s}_c \sum_{y_i = c} \mathbf{x}_i^{\top}`) and the
    eigendecompositions of :math:`\mathbf{S}\mathbf{S}^{\top}` and
    :math:`\mathbf{X}\mathbf{X}^{\top}`, computed once for a grid of
    :math:`\lambda`."""

    def __init__(
        self,
        features: Tensor,
        labels: Tensor,
        attributes: Tensor,
        classes: Tensor,
    ):
        _check_shapes(features, attributes)
        # float64: X X^T of unit vectors is badly conditioned.
        self.x = torch.nn.functional.normalize(features.double(), dim=1)
        classes, sums, counts = class_sums(self.x, labels, attributes, classes)
        s = attributes[classes].double()  # [z, k]
        self.ss = s.t() @ (counts.double()[:, None] * s)  # S S^T, [k, k]
        self.sx = s.t() @ sums  # S X^T, [k, d]
        self._eigen = None

    def solve(self, lam: float) -> Tensor:
        lam = check_ridge(lam, 'lam')
        if self._eigen is None:
            alpha, u = torch.linalg.eigh(self.ss)
            # X X^T: only the eigenvectors spanning the images' rows; the
            # solution has no component outside them (S X^T has none).
            mu, q = gram_eigh(self.x)
            self._eigen = (alpha.clamp_min(0), u, mu, q, u.t() @ self.sx @ q)
        alpha, u, mu, q, rotated = self._eigen
        denominator = alpha[:, None] + lam * mu[None, :]
        tiny = 1e-12 * float(denominator.max())
        solution = torch.where(
            denominator > tiny,
            (1 + lam) * rotated / denominator.clamp_min(tiny),
            torch.zeros_like(rotated),
        )
        return u @ solution @ q.t()

    def solve_sylvester(self, lam: float) -> Tensor:
        from scipy.linalg import solve_sylvester

        lam = check_ridge(lam, 'lam')
        w = solve_sylvester(
            self.ss.numpy(),
            lam * (self.x.t() @ self.x).numpy(),
            (1 + lam) * self.sx.numpy(),
        )
        w = torch.from_numpy(w)
        if not bool(torch.isfinite(w).all()):
            raise ValueError(
                'The Sylvester equation is singular for these '
                'features and attributes (S S^T and X X^T '
                "share a zero eigenvalue); use solver='eigh', "
                'which returns the minimum-norm solution'
            )
        return w


def _check_shapes(features: Tensor, attributes: Tensor) -> None:
    if features.dim() != 2 or attributes.dim() != 2:
        raise ValueError(
            f"'features' must be [n, d] and 'attributes' "
            f'[C, k] (got {tuple(features.shape)} and '
            f'{tuple(attributes.shape)})'
        )


def sae_scores(
    w: Tensor,
    features: Tensor,
    attributes: Tensor,
    classes: Tensor,
    space: str = 'semantic',
) -> Tensor:
    r"""Returns the cosine similarity of every image with every candidate
    class, in the :obj:`'semantic'` space (:math:`\cos(\mathbf{W}
    \mathbf{x}, \mathbf{s}_c)`) or the :obj:`'feature'` space
    (:math:`\cos(\mathbf{x}, \mathbf{W}^{\top}\mathbf{s}_c)`), with the rows
    of :math:`\mathbf{W}` L2-normalised (see the module docstring).

    Shapes:
        - w: :obj:`[k, d]`; features: :obj:`[n, d]`; attributes:
          :obj:`[C, k]`; classes: :obj:`[z]`; output: :obj:`[n, z]`.
    """
    if space not in SPACES:
        raise ValueError(f"'space' must be one of {SPACES} (got '{space}')")
    check_map_shapes(w, 'w', features, attributes, feature_dim=1)
    classes = check_classes(classes, attributes)
    normalize = torch.nn.functional.normalize
    w = normalize(w.to(features.dtype), dim=1)
    s = attributes[classes].to(features.dtype)
    if space == 'semantic':
        return normalize(features @ w.t(), dim=1) @ normalize(s, dim=1).t()
    return normalize(features, dim=1) @ normalize(s @ w, dim=1).t()


def predict_sae(
    w: Tensor,
    features: Tensor,
    attributes: Tensor,
    classes: Tensor,
    space: str = 'semantic',
) -> Tensor:
    r"""Predicts, for each image, the candidate class of highest
    :func:`sae_scores` (:obj:`classes` = unseen classes for ZSL, all
    classes for generalised ZSL).

    Returns:
        Tensor: Predicted class indices (values of :obj:`classes`).
        Shape :obj:`[n]`.
    """
    classes = check_classes(classes, attributes)
    return classes[
        sae_scores(w, features, attributes, classes, space).argmax(1)
    ]


def sae_grid_predictions(
    features: Tensor,
    labels: Tensor,
    attributes: Tensor,
    train_classes: Tensor,
    train_images: Tensor,
    val_classes: Tensor,
    val_images: Tensor,
    grid: Sequence[float] = DEFAULT_LAMBDA_GRID,
    spaces: Sequence[str] = SPACES,
) -> Iterator[Tuple[Tuple[float, str], Tensor]]:
    r"""For every :math:`(\lambda, \text{space})` of :obj:`spaces` x
    :obj:`grid` (in that order), SAE fitted on :obj:`train_images` and its
    predictions for :obj:`val_images` among :obj:`val_classes`:
    :obj:`((lam, space), predicted classes)` pairs, as
    :func:`~apnet_pyg.zsl.baselines.eszsl.first_best` reads them. Each
    :math:`\lambda` is solved once."""
    for space in spaces:
        if space not in SPACES:
            raise ValueError(
                f"'spaces' must hold entries of {SPACES} (got '{space}')"
            )
    check_grid(grid)
    system = _SylvesterSystem(
        features[train_images], labels[train_images], attributes, train_classes
    )
    encoders = {lam: system.solve(lam).to(features.dtype) for lam in grid}
    for space in spaces:
        for lam in grid:
            yield (
                (lam, space),
                predict_sae(
                    encoders[lam],
                    features[val_images],
                    attributes,
                    val_classes,
                    space,
                ),
            )


def fit_sae_validated(
    features: Tensor,
    labels: Tensor,
    attributes: Tensor,
    train_classes: Tensor,
    train_images: Tensor,
    val_classes: Tensor,
    val_images: Tensor,
    refit_classes: Tensor,
    refit_images: Tensor,
    grid: Sequence[float] = DEFAULT_LAMBDA_GRID,
    spaces: Sequence[str] = SPACES,
) -> Tuple[Tensor, float, str, float]:
    r"""SAE with :math:`\lambda` and the prediction space chosen on
    validation classes: fitted on :obj:`train_images` (of
    :obj:`train_classes`), scored by per-class ZSL accuracy on
    :obj:`val_images` among :obj:`val_classes` (the first pair in
    :obj:`spaces` x :obj:`grid` order wins ties), then refitted with the
    best :math:`\lambda` on :obj:`refit_images` (e.g. all seen classes'
    images).

    Returns:
        (Tensor, float, str, float): :math:`\mathbf{W}`, :math:`\lambda`,
        the space and the validation accuracy (%) of the chosen pair.
    """
    (lam, space), accuracy = first_best(
        sae_grid_predictions(
            features,
            labels,
            attributes,
            train_classes,
            train_images,
            val_classes,
            val_images,
            grid,
            spaces,
        ),
        labels[val_images],
        val_classes,
    )
    w = fit_sae(
        features[refit_images],
        labels[refit_images],
        attributes,
        refit_classes,
        lam,
    )
    return w, lam, space, accuracy
