r"""The closed-form baselines of the benchmark on one dataset, through the
same ZSL / GZSL protocol as APNet
(:func:`apnet_pyg.zsl.evaluate.evaluate_scores`):

* ESZSL (:mod:`apnet_pyg.zsl.baselines.eszsl`, :math:`\{0, 1\}` targets as
  in the authors' code), :math:`(\gamma, \lambda)` chosen on the validation
  classes;
* SAE (:mod:`apnet_pyg.zsl.baselines.sae`), :math:`\lambda` and the
  prediction space chosen on the validation classes.

Both read the dataset's attributes as loaded (:obj:`att`, L2-normalised
per class, the benchmark's default) and the raw features, are fitted on
the images of :obj:`trainclasses1.txt`, validated by per-class ZSL
accuracy on the images of :obj:`valclasses1.txt` among those classes, and
refitted with the chosen hyper-parameters on all seen classes'
:obj:`trainval_loc` images; their metrics record that validation accuracy
(:data:`VALIDATION_ACCURACY`).

GZSL is reported raw (as published) and with calibrated stacking (Chao et
al., ECCV 2016), as APNet's: the constant is the one of best :math:`H` on
APNet's validation task
(:func:`~apnet_pyg.data.splits.seen_validation_split`), scored by the
baseline fitted with its chosen hyper-parameters on that task's training
images (:obj:`trainclasses1` minus the held-out seen-validation images).
So both methods' calibrated rows are chosen the same way, on the same
images. No test label is read before the final evaluation.
"""

import dataclasses
import functools
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Union

import torch
from torch import Tensor

from apnet_pyg.data.splits import ValidationSplit, seen_validation_split
from apnet_pyg.data.xlsa17 import ZSLDataset, load_attributes
from apnet_pyg.zsl.baselines.eszsl import (
    eszsl_scores,
    fit_eszsl,
    fit_eszsl_validated,
)
from apnet_pyg.zsl.baselines.sae import fit_sae, fit_sae_validated, sae_scores
from apnet_pyg.zsl.evaluate import evaluate_scores, validate
from apnet_pyg.zsl.metrics import CALIBRATED_METRICS, METRICS


def closed_form_arguments(data: ZSLDataset) -> Dict[str, Any]:
    r"""The keyword arguments of
    :func:`~apnet_pyg.zsl.baselines.eszsl.fit_eszsl_validated` and
    :func:`~apnet_pyg.zsl.baselines.sae.fit_sae_validated` for :obj:`data`:
    fit on the training classes, validate on the validation classes, refit on
    all seen classes' :obj:`trainval_loc` images."""
    if data.features is None:
        raise ValueError(
            f"'data' ({data.name}) has no image features: load "
            f'it with load_features=True'
        )
    if data.train_classes is None or data.val_classes is None:
        raise ValueError(
            f"'data' ({data.name}) has no class-level "
            f'validation split (trainclasses1.txt / '
            f'valclasses1.txt): the baselines choose their '
            f'hyper-parameters on it'
        )
    return dict(
        features=data.features,
        labels=data.labels,
        attributes=data.attributes,
        train_classes=data.train_classes,
        train_images=data.images_of(data.train_classes),
        val_classes=data.val_classes,
        val_images=data.images_of(data.val_classes),
        refit_classes=data.seen_classes,
        refit_images=data.trainval_loc,
    )


#: The key of a baseline's validation accuracy in its metrics: per-class
#: ZSL accuracy (%) of the chosen hyper-parameters on the validation
#: classes.
VALIDATION_ACCURACY = 'val_zsl_acc'


def calibration_task(
    data: ZSLDataset, split: Optional[ValidationSplit] = None
) -> ValidationSplit:
    r"""The validation task the baselines choose their calibration on:
    :obj:`split` (a run's, :func:`apnet_pyg.zsl.train.validation_task`),
    checked to be one of :obj:`data`'s, or else :obj:`data`'s with the
    defaults of :func:`~apnet_pyg.data.splits.seen_validation_split`."""
    if split is None:
        return seen_validation_split(data)
    if not isinstance(split, ValidationSplit) or not (
        torch.equal(split.train_classes, data.train_classes)
        and torch.equal(split.val_classes, data.val_classes)
    ):
        raise ValueError(
            f"'split' must be a validation task of "
            f"'{data.name}' (seen_validation_split(data)): its "
            f"classes are not the dataset's trainclasses1 and "
            f'valclasses1'
        )
    # Its images too: exactly the trainval images of those classes (a test
    # image among them would let test data choose the constant).
    seen = torch.cat([split.train_images, split.seen_val_images]).sort()[0]
    if not (
        torch.equal(seen, data.images_of(data.train_classes).sort()[0])
        and torch.equal(
            split.unseen_val_images.sort()[0],
            data.images_of(data.val_classes).sort()[0],
        )
    ):
        raise ValueError(
            f"'split' must be a validation task of "
            f"'{data.name}' (seen_validation_split(data)): its "
            f'images are not the trainval images of '
            f'trainclasses1 and valclasses1'
        )
    return split


def _metrics(
    data: ZSLDataset,
    split: ValidationSplit,
    scores: Callable[..., Tensor],
    model: Tensor,
    validation_model: Tensor,
) -> Dict[str, Any]:
    r"""The test protocol for the baseline :obj:`scores(model, features,
    attributes, classes)` fitted on all seen classes (:obj:`model`), with
    the calibration constant of best validation :math:`H` of the same
    baseline fitted on :obj:`split`'s training images
    (:obj:`validation_model`)."""

    def score_fn(weights: Tensor):
        return lambda index, classes: scores(
            weights, data.features[index], data.attributes, classes
        )

    constant = validate(data, split, score_fn(validation_model))[
        'val_calibration'
    ]
    return evaluate_scores(data, score_fn(model), constant)


def _task_images(data: ZSLDataset, split: ValidationSplit):
    return (
        data.features[split.train_images],
        data.labels[split.train_images],
        data.attributes,
        split.train_classes,
    )


def eszsl_metrics(
    data: ZSLDataset, split: Optional[ValidationSplit] = None
) -> Dict[str, Any]:
    r"""ESZSL on :obj:`data`, calibrated on :obj:`split` (see the module
    docstring and :func:`calibration_task`).

    Returns:
        dict: :obj:`zsl_acc`, :obj:`gzsl_seen`, :obj:`gzsl_unseen`,
        :obj:`gzsl_h` (%), the calibration constant :obj:`calibration` and
        :obj:`gzsl_cal_seen`, :obj:`gzsl_cal_unseen`, :obj:`gzsl_cal_h` (%),
        the chosen :obj:`gamma` and :obj:`lam` and their
        :obj:`val_zsl_acc` (%).
    """
    arguments = closed_form_arguments(data)
    split = calibration_task(data, split)
    v, gamma, lam, accuracy = fit_eszsl_validated(**arguments)
    metrics = _metrics(
        data,
        split,
        eszsl_scores,
        v,
        fit_eszsl(*_task_images(data, split), gamma, lam),
    )
    return {
        **metrics,
        'gamma': gamma,
        'lam': lam,
        VALIDATION_ACCURACY: accuracy,
    }


def sae_metrics(
    data: ZSLDataset, split: Optional[ValidationSplit] = None
) -> Dict[str, Any]:
    r"""SAE on :obj:`data`, calibrated on :obj:`split` (see the module
    docstring and :func:`calibration_task`).

    Returns:
        dict: :obj:`zsl_acc`, :obj:`gzsl_seen`, :obj:`gzsl_unseen`,
        :obj:`gzsl_h` (%), the calibration constant :obj:`calibration` and
        :obj:`gzsl_cal_seen`, :obj:`gzsl_cal_unseen`, :obj:`gzsl_cal_h` (%),
        the chosen :obj:`lam` and :obj:`space` and their
        :obj:`val_zsl_acc` (%).
    """
    arguments = closed_form_arguments(data)
    split = calibration_task(data, split)
    w, lam, space, accuracy = fit_sae_validated(**arguments)
    metrics = _metrics(
        data,
        split,
        functools.partial(sae_scores, space=space),
        w,
        fit_sae(*_task_images(data, split), lam),
    )
    return {
        **metrics,
        'lam': lam,
        'space': space,
        VALIDATION_ACCURACY: accuracy,
    }


BASELINES: Dict[str, Callable[..., Dict[str, Any]]] = {
    'ESZSL': eszsl_metrics,
    'SAE': sae_metrics,
}


def baseline_dataset(data: ZSLDataset, root: Union[str, Path]) -> ZSLDataset:
    r""":obj:`data` (a run's dataset, whatever attributes its model reads)
    with the benchmark's own attributes (:obj:`att`, read from :obj:`root`),
    which the baselines read as their authors do; the same images."""
    return dataclasses.replace(
        data, attributes=load_attributes(root, data.name, 'att')
    )


def fit_baselines(
    data: ZSLDataset,
    root: Union[str, Path],
    split: Optional[ValidationSplit] = None,
) -> Dict[str, Dict[str, Any]]:
    r"""Every baseline of :data:`BASELINES` on :obj:`data` (a run's
    dataset), given :obj:`root` to read the baselines' attributes from
    (:func:`baseline_dataset`), calibrated on :obj:`split` (the run's
    validation task; see :func:`calibration_task`)."""
    data = baseline_dataset(data, root)
    return {name: fit(data, split) for name, fit in BASELINES.items()}


def hyper_parameters(metrics: Dict[str, Any]) -> str:
    r"""The chosen hyper-parameters of a baseline's metrics, e.g.
    :obj:`'gamma=1000, lam=0.1'`."""
    return ', '.join(
        f'{key}={value:g}' if isinstance(value, float) else f'{key}={value}'
        for key, value in metrics.items()
        if key not in METRICS + CALIBRATED_METRICS
        and key != VALIDATION_ACCURACY
    )
