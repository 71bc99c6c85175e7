r"""Zero-shot learning metrics of the xlsa17 protocol (Xian et al., 2018):
per-class mean accuracy and the harmonic mean of seen and unseen accuracy."""

from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from apnet_pyg.checks import as_index_tensor, check_number

# The protocol's four figures by metrics.json key, in the order of the
# published tables: ZSL, GZSL U, GZSL S, H.
METRICS = ('zsl_acc', 'gzsl_unseen', 'gzsl_seen', 'gzsl_h')

#: The calibrated-stacking figures beside them in metrics.json: the constant
#: chosen on validation, then GZSL S, U and H with it.
CALIBRATED_METRICS = (
    'calibration',
    'gzsl_cal_seen',
    'gzsl_cal_unseen',
    'gzsl_cal_h',
)

#: The rows of a run's result table, in order, and the validation metric
#: that selects each row's epoch.
ROWS = {
    'zsl': 'val_zsl_acc',
    'gzsl': 'val_gzsl_h',
    'gzsl_calibrated': 'val_gzsl_cal_h',
}


def first_best_index(values: Sequence[float]) -> int:
    r"""The position of the largest of :obj:`values`, the earliest on ties:
    the one rule by which validation chooses (epochs, settings, the
    baselines' hyper-parameters, the node protocol's settings)."""
    if len(values) == 0:
        raise ValueError('No candidate to choose from (empty grid)')
    return max(range(len(values)), key=lambda i: (values[i], -i))


def per_class_accuracy(
    pred: Tensor, target: Tensor, classes: Optional[Tensor] = None
) -> float:
    r"""Mean over classes of the accuracy within each class (the benchmark's
    "average per-class top-1 accuracy"), so that large classes do not
    dominate.

    Args:
        pred (Tensor): Predicted class of each sample. Shape :obj:`[n]`.
        target (Tensor): True class of each sample. Shape :obj:`[n]`.
        classes (Tensor, optional): The classes to average over. Classes
            without any sample in :obj:`target` are left out of the mean;
            samples of other classes are ignored. :obj:`None` means the
            classes present in :obj:`target`. (default: :obj:`None`)

    Returns:
        float: Accuracy in :obj:`[0, 1]`.
    """
    pred = as_index_tensor(pred, 'pred')
    target = as_index_tensor(target, 'target')
    if pred.numel() != target.numel():
        raise ValueError(
            f"'pred' and 'target' must have the same number of "
            f'elements (got {pred.numel()} and {target.numel()})'
        )
    if classes is None:
        classes = target.unique()
    classes = as_index_tensor(classes, 'classes')
    if classes.numel() == 0:
        raise ValueError(
            "'classes' is empty (and so is 'target' when "
            "'classes' is None): no class to average over"
        )
    # A negative class would index the lookup below from its end.
    for name, tensor in (('target', target), ('classes', classes)):
        if tensor.numel() > 0 and int(tensor.min()) < 0:
            raise ValueError(f"'{name}' contains negative class indices")
    # Position of each sample's class in 'classes' (-1: not counted).
    size = (
        int(max(classes.max(), target.max(), 0)) + 1
        if target.numel()
        else int(classes.max()) + 1
    )
    position = torch.full((size,), -1, dtype=torch.long)
    position[classes] = torch.arange(classes.numel())
    slot = position[target]
    keep = slot >= 0
    slot = slot[keep]
    total = torch.bincount(slot, minlength=classes.numel())
    hits = torch.bincount(
        slot[(pred[keep] == target[keep])], minlength=classes.numel()
    )
    present = total > 0
    if not bool(present.any()):
        raise ValueError("None of 'classes' has a sample in 'target'")
    return float((hits[present].double() / total[present]).mean())


def harmonic_mean(
    seen: Union[float, Tensor], unseen: Union[float, Tensor]
) -> float:
    r"""Harmonic mean :math:`H = 2 s u / (s + u)` of the seen and unseen
    accuracy of generalised zero-shot learning (:obj:`0` when both are
    :obj:`0`)."""
    seen = check_number(
        seen.item() if isinstance(seen, Tensor) else seen, 'seen', minimum=0.0
    )
    unseen = check_number(
        unseen.item() if isinstance(unseen, Tensor) else unseen,
        'unseen',
        minimum=0.0,
    )
    if seen + unseen == 0:
        return 0.0
    return 2 * seen * unseen / (seen + unseen)
