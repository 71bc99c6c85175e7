r"""The closed-form baselines of the benchmark on one dataset, through the
same ZSL / GZSL protocol as APNet
(:func:`apnet_pyg.zsl.evaluate.evaluate_predictions`):

* ESZSL (:mod:`apnet_pyg.zsl.eszsl`, :math:`\{0, 1\}` targets as in the
  authors' code), :math:`(\gamma, \lambda)` chosen on the validation
  classes;
* SAE (:mod:`apnet_pyg.zsl.sae`), :math:`\lambda` and the prediction space
  chosen on the validation classes.

Both read the dataset's attributes as loaded (:obj:`att`, L2-normalised
per class, the benchmark's default) and the raw features, are fitted on
the images of :obj:`trainclasses1.txt`, validated by per-class ZSL
accuracy on the images of :obj:`valclasses1.txt` among those classes, and
refitted with the chosen hyper-parameters on all seen classes'
:obj:`trainval_loc` images; their metrics record that validation accuracy
(:data:`VALIDATION_ACCURACY`). No test label is read before the final
evaluation.
"""
import dataclasses
from pathlib import Path
from typing import Any, Callable, Dict, Union

from apnet_pyg.data.xlsa17 import ZSLDataset, load_attributes
from apnet_pyg.zsl.eszsl import fit_eszsl_validated, predict_eszsl
from apnet_pyg.zsl.evaluate import evaluate_predictions
from apnet_pyg.zsl.metrics import METRICS
from apnet_pyg.zsl.sae import fit_sae_validated, predict_sae


def closed_form_arguments(data: ZSLDataset) -> Dict[str, Any]:
    r"""The keyword arguments of
    :func:`~apnet_pyg.zsl.eszsl.fit_eszsl_validated` and
    :func:`~apnet_pyg.zsl.sae.fit_sae_validated` for :obj:`data`: fit on
    the training classes, validate on the validation classes, refit on all
    seen classes' :obj:`trainval_loc` images."""
    if data.features is None:
        raise ValueError(f"'data' ({data.name}) has no image features: load "
                         f"it with load_features=True")
    if data.train_classes is None or data.val_classes is None:
        raise ValueError(f"'data' ({data.name}) has no class-level "
                         f"validation split (trainclasses1.txt / "
                         f"valclasses1.txt): the baselines choose their "
                         f"hyper-parameters on it")
    return dict(features=data.features, labels=data.labels,
                attributes=data.attributes,
                train_classes=data.train_classes,
                train_images=data.images_of(data.train_classes),
                val_classes=data.val_classes,
                val_images=data.images_of(data.val_classes),
                refit_classes=data.seen_classes,
                refit_images=data.trainval_loc)


#: The key of a baseline's validation accuracy in its metrics: per-class
#: ZSL accuracy (%) of the chosen hyper-parameters on the validation
#: classes.
VALIDATION_ACCURACY = 'val_zsl_acc'


def eszsl_metrics(data: ZSLDataset) -> Dict[str, Any]:
    r"""ESZSL on :obj:`data` (see the module docstring).

    Returns:
        dict: :obj:`zsl_acc`, :obj:`gzsl_seen`, :obj:`gzsl_unseen`,
        :obj:`gzsl_h` (%), the chosen :obj:`gamma` and :obj:`lam` and their
        :obj:`val_zsl_acc` (%).
    """
    v, gamma, lam, accuracy = fit_eszsl_validated(
        **closed_form_arguments(data))
    metrics = evaluate_predictions(
        data, lambda index, classes: predict_eszsl(
            v, data.features[index], data.attributes, classes))
    return {**metrics, 'gamma': gamma, 'lam': lam,
            VALIDATION_ACCURACY: accuracy}


def sae_metrics(data: ZSLDataset) -> Dict[str, Any]:
    r"""SAE on :obj:`data` (see the module docstring).

    Returns:
        dict: :obj:`zsl_acc`, :obj:`gzsl_seen`, :obj:`gzsl_unseen`,
        :obj:`gzsl_h` (%), the chosen :obj:`lam` and :obj:`space` and their
        :obj:`val_zsl_acc` (%).
    """
    w, lam, space, accuracy = fit_sae_validated(
        **closed_form_arguments(data))
    metrics = evaluate_predictions(
        data, lambda index, classes: predict_sae(
            w, data.features[index], data.attributes, classes, space))
    return {**metrics, 'lam': lam, 'space': space,
            VALIDATION_ACCURACY: accuracy}


BASELINES: Dict[str, Callable[[ZSLDataset], Dict[str, Any]]] = {
    'ESZSL': eszsl_metrics,
    'SAE': sae_metrics,
}


def baseline_dataset(data: ZSLDataset, root: Union[str, Path]) -> ZSLDataset:
    r""":obj:`data` (a run's dataset, whatever attributes its model reads)
    with the benchmark's own attributes (:obj:`att`, read from :obj:`root`),
    which the baselines read as their authors do; the same images."""
    return dataclasses.replace(data, attributes=load_attributes(
        root, data.name, 'att'))


def fit_baselines(data: ZSLDataset,
                  root: Union[str, Path]) -> Dict[str, Dict[str, Any]]:
    r"""Every baseline of :data:`BASELINES` on :obj:`data` (a run's
    dataset), given :obj:`root` to read the baselines' attributes from
    (:func:`baseline_dataset`)."""
    data = baseline_dataset(data, root)
    return {name: fit(data) for name, fit in BASELINES.items()}


def hyper_parameters(metrics: Dict[str, Any]) -> str:
    r"""The chosen hyper-parameters of a baseline's metrics, e.g.
    :obj:`'gamma=1000, lam=0.1'`."""
    return ', '.join(f'{key}={value:g}' if isinstance(value, float) else
                     f'{key}={value}' for key, value in metrics.items()
                     if key not in METRICS and key != VALIDATION_ACCURACY)
