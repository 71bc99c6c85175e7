r"""The closed-form baselines of zero-shot node classification
(:mod:`apnet_pyg.zsl.nodes.protocol`): ESZSL and SAE fitted on the seen
classes' nodes, their hyper-parameters chosen as APNet's setting is, on
the validation classes of Split II (or its class folds), by balanced
accuracy; then used unchanged on every split.
"""

from functools import partial
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch

from apnet_pyg.data.zero_shot_nodes import ClassSplit, ZeroShotNodes
from apnet_pyg.zsl.baselines.eszsl import (
    eszsl_grid_predictions,
    eszsl_scores,
    fit_eszsl,
    predict_eszsl,
)
from apnet_pyg.zsl.baselines.sae import (
    fit_sae,
    predict_sae,
    sae_grid_predictions,
)
from apnet_pyg.zsl.metrics import first_best_index, per_class_accuracy
from apnet_pyg.zsl.nodes.inputs import NodeSetting, NodeTask
from apnet_pyg.zsl.nodes.report import node_metrics, summarise
from apnet_pyg.zsl.nodes.scores import PrototypeRefiner

#: ESZSL's grid of gamma and lambda (each), as
#: :func:`~apnet_pyg.zsl.baselines.eszsl.fit_eszsl_validated`'s default.
ESZSL_GRID = tuple(10.0**p for p in range(-3, 4))


def closed_form_parts(
    nodes: ZeroShotNodes,
    split: ClassSplit,
    csd: str,
    setting: NodeSetting,
    held_out: Optional[torch.Tensor] = None,
):
    r"""What a closed-form baseline is fitted on for :obj:`split`:
    :obj:`(features, labels, descriptions, task)`, one float64 feature
    vector a node (the features after all of the setting's steps), the
    prepared descriptions, and the :class:`NodeTask` whose
    :obj:`seen_nodes` (less :obj:`held_out`) it is fitted on."""
    setting = setting.replace(scoring='single')
    task = NodeTask(nodes, split, csd, setting, held_out=held_out)
    return (
        task.features.double(),
        nodes.data.y,
        task.descriptions.double(),
        task,
    )


def _choose_on_folds(
    grid_predictions: Callable,
    nodes: ZeroShotNodes,
    csd: str,
    setting: NodeSetting,
    folds: Optional[Sequence[ClassSplit]],
) -> Tuple[Any, float]:
    # The first candidate (in grid order) of highest mean balanced
    # accuracy over the validation classes of the folds (default: Split II
    # alone), each fold fitted on its seen classes' nodes;
    # grid_predictions yields (key, predictions) pairs
    # (eszsl_grid_predictions, sae_grid_predictions).
    folds = folds or [nodes.split('II')]
    # The features and descriptions do not depend on the fold: made once.
    x, y, s, first = closed_form_parts(nodes, folds[0], csd, setting)
    keys, total = [], None
    for fold in folds:
        task = NodeTask(nodes, fold, csd, first.setting, first.features)
        pairs = list(
            grid_predictions(
                features=x,
                labels=y,
                attributes=s,
                train_classes=fold.seen,
                train_images=task.seen_nodes,
                val_classes=fold.val,
                val_images=task.val_nodes,
            )
        )
        keys = [key for key, _ in pairs]
        accuracies = torch.tensor(
            [
                per_class_accuracy(prediction, y[task.val_nodes], fold.val)
                for _, prediction in pairs
            ],
            dtype=torch.float64,
        )
        total = accuracies if total is None else total + accuracies
    mean = (total / len(folds)).tolist()
    best = first_best_index(mean)
    return keys[best], 100.0 * mean[best]


def _unseen_metrics(nodes, split, csd, setting, fit, predict):
    x, y, s, task = closed_form_parts(nodes, split, csd, setting)
    weights = fit(x[task.seen_nodes], y[task.seen_nodes], s, split.seen)
    prediction = predict(weights, x[task.unseen_nodes], s, split.unseen)
    return summarise(
        [node_metrics(prediction, y[task.unseen_nodes], split.unseen)]
    )


def eszsl_nodes(
    nodes: ZeroShotNodes,
    csd: str,
    setting: NodeSetting,
    splits: Sequence[ClassSplit],
    choice: Optional[Tuple[float, float]] = None,
    folds: Optional[Sequence[ClassSplit]] = None,
) -> Dict[str, Any]:
    r"""ESZSL (:func:`~apnet_pyg.zsl.baselines.eszsl.fit_eszsl`) fitted on the
    seen classes' nodes, :math:`(\gamma, \lambda)` chosen by balanced accuracy
    on the validation classes of :obj:`folds` (default: Split II alone;
    the first best in :data:`ESZSL_GRID` order) unless :obj:`choice` fixes
    them, then used unchanged on every split of :obj:`splits`."""
    validation = None
    if choice is None:
        choice, validation = _choose_on_folds(
            partial(eszsl_grid_predictions, grid=ESZSL_GRID),
            nodes,
            csd,
            setting,
            folds,
        )

    def fit(x, y, s, classes):
        return fit_eszsl(x, y, s, classes, *choice)

    return {
        'gamma': choice[0],
        'lam': choice[1],
        'val_balanced': validation,
        'splits': {
            split.name: _unseen_metrics(
                nodes, split, csd, setting, fit, predict_eszsl
            )
            for split in splits
        },
    }


def eszsl_refined_nodes(
    nodes: ZeroShotNodes,
    csd: str,
    setting: NodeSetting,
    splits: Sequence[ClassSplit],
    choice: Tuple[float, float],
) -> Dict[str, Any]:
    r"""ESZSL at :obj:`choice` :math:`(\gamma, \lambda)` (as
    :func:`eszsl_nodes` chose it) fitted on the seen classes' nodes, its
    scores of the unseen classes' nodes refined into class prototypes over
    those nodes' features
    (:class:`~apnet_pyg.zsl.nodes.scores.PrototypeRefiner`), as APNet's
    refined reading: what the refinement gives without APNet."""

    def fit(x, y, s, classes):
        return fit_eszsl(x, y, s, classes, *choice)

    def predict(v, x, s, classes):
        # x: the unseen classes' nodes' features after the propagation.
        scores = PrototypeRefiner(x)(eszsl_scores(v, x, s, classes))
        return classes[scores.argmax(1)]

    return {
        'gamma': choice[0],
        'lam': choice[1],
        'splits': {
            split.name: _unseen_metrics(
                nodes, split, csd, setting, fit, predict
            )
            for split in splits
        },
    }


def sae_nodes(
    nodes: ZeroShotNodes,
    csd: str,
    setting: NodeSetting,
    splits: Sequence[ClassSplit],
    folds: Optional[Sequence[ClassSplit]] = None,
) -> Dict[str, Any]:
    r"""SAE (:func:`~apnet_pyg.zsl.baselines.sae.fit_sae`) fitted on the seen
    classes' nodes, :math:`\lambda` and the prediction space chosen by
    balanced accuracy on the validation classes of :obj:`folds` (default:
    Split II alone), then used unchanged on every split of
    :obj:`splits`."""
    (lam, space), validation = _choose_on_folds(
        sae_grid_predictions, nodes, csd, setting, folds
    )

    def fit(x, y, s, classes):
        return fit_sae(x, y, s, classes, lam)

    def predict(w, x, s, classes):
        return predict_sae(w, x, s, classes, space)

    return {
        'lam': lam,
        'space': space,
        'val_balanced': validation,
        'splits': {
            split.name: _unseen_metrics(
                nodes, split, csd, setting, fit, predict
            )
            for split in splits
        },
    }


#: DGPN's inputs, on which ESZSL and SAE reproduce its table: row-scaled
#: features, no propagation, unit-norm descriptions.
DGPN_INPUTS = NodeSetting(
    propagation='none',
    scoring='single',
    calibration='none',
    features='row',
    descriptions='l2',
)
