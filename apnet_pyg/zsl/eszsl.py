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
    if features.dim() != 2 or labels.dim() != 1 or \
            labels.numel() != features.size(0):
        raise ValueError(f"'features' must be [n, d] and 'labels' [n] (got "
                         f"{tuple(features.shape)} and {tuple(labels.shape)})")
    classes = classes.view(-1).long()
    position = torch.full((attributes.size(0), ), -1, dtype=torch.long)
    position[classes] = torch.arange(classes.numel())
    slot = position[labels.long()]
    if bool((slot < 0).any()):
        raise ValueError("'labels' contains classes that are not in "
                         "'classes'")
    # float64: X X^T + gamma I is badly conditioned for small gamma.
    x = features.double()
    s = attributes[classes].double().t()  # [a, z]
    gram = x.t() @ x  # X X^T, [d, d]
    gram.diagonal().add_(gamma)
    # X Y without forming Y: per-class feature sums (minus the rest if +-1).
    class_sum = torch.zeros(classes.numel(), x.size(1), dtype=x.dtype)
    class_sum.index_add_(0, slot, x)
    xy = class_sum.t()  # [d, z]
    if signed_targets:
        xy = 2 * xy - x.sum(0, keepdim=True).t()
    left = torch.linalg.solve(gram, xy @ s.t())  # [d, a]
    right = s @ s.t()
    right.diagonal().add_(lam)
    v = torch.linalg.solve(right, left.t()).t()  # right is symmetric
    return v.to(features.dtype)


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
