r"""ESZSL, "An embarrassingly simple approach to zero-shot learning"
(Romera-Paredes & Torr, ICML 2015): a bilinear compatibility
:math:`f(\mathbf{x}, c) = \mathbf{x}^{\top} \mathbf{V} \mathbf{s}_c`
fitted in closed form,

.. math::
    \mathbf{V} = (\mathbf{X}\mathbf{X}^{\top} + \gamma \mathbf{I})^{-1}
    \mathbf{X} \mathbf{Y} \mathbf{S}^{\top}
    (\mathbf{S}\mathbf{S}^{\top} + \lambda \mathbf{I})^{-1},

with :math:`\mathbf{X}` the :math:`d \times n` training features,
:math:`\mathbf{Y}` the :math:`n \times z` targets (:math:`1` for the true
class, :math:`-1` elsewhere as in the paper, or :math:`0`) and
:math:`\mathbf{S}` the :math:`a \times z` attributes of the :math:`z`
training classes. The baseline against which the simulated data is
calibrated (:mod:`apnet_pyg.data.simulator`).
"""
from typing import Sequence, Tuple

import torch
from torch import Tensor


def fit_eszsl(features: Tensor, labels: Tensor, attributes: Tensor,
              classes: Tensor, gamma: float = 1.0, lam: float = 1.0,
              signed_targets: bool = True) -> Tensor:
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
            paper) instead of :math:`\{0, 1\}`. (default: :obj:`True`)

    Returns:
        Tensor: :math:`\mathbf{V}`, shape :obj:`[d, a]`, dtype of
        :obj:`features`.
    """
    system = _FeatureSide(features, labels, attributes.size(0), classes,
                          signed_targets)
    return system.solve(attributes, gamma, lam).to(features.dtype)


class _FeatureSide:
    r"""What the closed form needs from the training images, computed once:
    the Gram matrix :math:`\mathbf{X}\mathbf{X}^{\top}` and
    :math:`\mathbf{X}\mathbf{Y}`, so that a grid of :math:`(\gamma,
    \lambda)` costs one :math:`d \times d` solve per :math:`\gamma`."""
    def __init__(self, features: Tensor, labels: Tensor, num_classes: int,
                 classes: Tensor, signed_targets: bool):
        if features.dim() != 2 or labels.dim() != 1 or \
                labels.numel() != features.size(0):
            raise ValueError(f"'features' must be [n, d] and 'labels' [n] "
                             f"(got {tuple(features.shape)} and "
                             f"{tuple(labels.shape)})")
        self.classes = classes.view(-1).long()
        position = torch.full((num_classes, ), -1, dtype=torch.long)
        position[self.classes] = torch.arange(self.classes.numel())
        slot = position[labels.long()]
        if bool((slot < 0).any()):
            raise ValueError("'labels' contains classes that are not in "
                             "'classes'")
        # float64: X X^T + gamma I is badly conditioned for small gamma.
        x = features.double()
        self.gram = x.t() @ x  # X X^T, [d, d]
        # X Y without forming Y: per-class feature sums (minus the rest if
        # the targets are +-1).
        class_sum = torch.zeros(self.classes.numel(), x.size(1),
                                dtype=x.dtype)
        class_sum.index_add_(0, slot, x)
        self.xy = class_sum.t()  # [d, z]
        if signed_targets:
            self.xy = 2 * self.xy - x.sum(0, keepdim=True).t()
        self._gamma = None

    def left(self, gamma: float) -> Tensor:
        r""":math:`(\mathbf{X}\mathbf{X}^{\top} + \gamma \mathbf{I})^{-1}
        \mathbf{X}\mathbf{Y}`, cached for the last :obj:`gamma`."""
        if self._gamma != gamma:
            gram = self.gram.clone()
            gram.diagonal().add_(gamma)
            self._left = torch.linalg.solve(gram, self.xy)  # [d, z]
            self._gamma = gamma
        return self._left

    def solve(self, attributes: Tensor, gamma: float, lam: float) -> Tensor:
        s = attributes[self.classes].double().t()  # [a, z]
        right = s @ s.t()
        right.diagonal().add_(lam)
        # V = left S^T (S S^T + lam I)^{-1}; 'right' is symmetric.
        return torch.linalg.solve(right, (self.left(gamma) @ s.t()).t()).t()


def eszsl_scores(v: Tensor, features: Tensor, attributes: Tensor,
                 classes: Tensor) -> Tensor:
    r"""Returns the compatibility :math:`\mathbf{x}^{\top} \mathbf{V}
    \mathbf{s}_c` of every image with every candidate class.

    Shapes:
        - v: :obj:`[d, a]`; features: :obj:`[n, d]`; attributes:
          :obj:`[C, a]`; classes: :obj:`[z]`; output: :obj:`[n, z]`.
    """
    return features @ v.to(features.dtype) @ \
        attributes[classes.view(-1).long()].to(features.dtype).t()


def predict_eszsl(v: Tensor, features: Tensor, attributes: Tensor,
                  classes: Tensor) -> Tensor:
    r"""Predicts, for each image, the candidate class of highest
    compatibility (:obj:`classes` = unseen classes for ZSL, all classes for
    generalised ZSL).

    Returns:
        Tensor: Predicted class indices (values of :obj:`classes`).
        Shape :obj:`[n]`.
    """
    classes = classes.view(-1).long()
    return classes[eszsl_scores(v, features, attributes, classes).argmax(1)]


def fit_eszsl_validated(features: Tensor, labels: Tensor, attributes: Tensor,
                        train_classes: Tensor, train_images: Tensor,
                        val_classes: Tensor, val_images: Tensor,
                        refit_classes: Tensor, refit_images: Tensor,
                        grid: Sequence[float] = tuple(10.0**p
                                                      for p in range(-3, 4)),
                        signed_targets: bool = True
                        ) -> Tuple[Tensor, float, float]:
    r"""ESZSL with :math:`(\gamma, \lambda)` chosen on validation
    classes: fitted on :obj:`train_images` (of :obj:`train_classes`), scored
    by per-class ZSL accuracy on :obj:`val_images` among
    :obj:`val_classes`, then refitted with the best pair on
    :obj:`refit_images` (e.g. all seen classes' images).

    Returns:
        (Tensor, float, float): :math:`\mathbf{V}`, :math:`\gamma`,
        :math:`\lambda`.
    """
    from apnet_pyg.zsl.metrics import per_class_accuracy
    side = _FeatureSide(features[train_images], labels[train_images],
                        attributes.size(0), train_classes, signed_targets)
    best, best_accuracy = None, -1.0
    for gamma in grid:
        for lam in grid:
            v = side.solve(attributes, gamma, lam).to(features.dtype)
            prediction = predict_eszsl(v, features[val_images], attributes,
                                       val_classes)
            accuracy = per_class_accuracy(prediction, labels[val_images],
                                          val_classes)
            if accuracy > best_accuracy:
                best, best_accuracy = (gamma, lam), accuracy
    gamma, lam = best
    v = fit_eszsl(features[refit_images], labels[refit_images], attributes,
                  refit_classes, gamma, lam, signed_targets)
    return v, gamma, lam
