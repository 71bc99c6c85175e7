r"""Generalized zero-shot node classification (:obj:`apnet-zsl nodes
--gzsl`): every test node classified among a split's seen *and* unseen
classes, which the published graph methods do not report.

* **Test nodes.** A fixed share :data:`GZSL_TEST_SHARE` of every class's
  nodes, drawn once with seed :data:`GZSL_SEED`
  (:func:`~apnet_pyg.data.splits.hold_out_per_class`), is never trained
  on (:func:`gzsl_test_nodes`). For a split, those of its seen classes are
  the seen test nodes; every node of its unseen classes is an unseen test
  node.
* **Metrics** (:class:`~apnet_pyg.zsl.evaluate.GZSLScores`, as the image
  pipeline's): :math:`S` and :math:`U`, the per-class mean accuracy on the
  seen and the unseen test nodes among the split's seen and unseen
  classes, and their harmonic mean :math:`H`.
* **Calibrated stacking** (Chao et al., ECCV 2016): a constant subtracted
  from the seen classes' scores, chosen
  (:func:`~apnet_pyg.zsl.evaluate.best_calibration`) on the validation task
  of Split II (:func:`validation_nodes`): trained on its seen classes'
  nodes less the test nodes and less a further share of them (the seen
  validation nodes), it scores those and the validation classes' nodes
  (less their test share) among the seen and validation classes. Then
  used unchanged on every split. No test node is read before the final
  evaluation.

APNet keeps its chosen setting, reading and epoch count; ESZSL and SAE
their chosen hyper-parameters (:mod:`apnet_pyg.zsl.nodes.closed_form`).
"""

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from apnet_pyg.data.splits import hold_out_per_class
from apnet_pyg.data.zero_shot_nodes import ClassSplit, ZeroShotNodes
from apnet_pyg.zsl.evaluate import GZSLScores, best_calibration
from apnet_pyg.zsl.nodes.closed_form import closed_form_parts
from apnet_pyg.zsl.nodes.inputs import NodeSetting, NodeTask
from apnet_pyg.zsl.nodes.report import summarise_gzsl
from apnet_pyg.zsl.nodes.scores import ScoreSmoother, setting_scores
from apnet_pyg.zsl.nodes.training import record_runs

#: The share of every class's nodes held out as test nodes.
GZSL_TEST_SHARE = 0.2
#: The seed of that draw (and, plus one, of the seen validation nodes).
GZSL_SEED = 0


def gzsl_test_nodes(nodes: ZeroShotNodes) -> Tensor:
    r"""The nodes never trained on: :data:`GZSL_TEST_SHARE` of every
    class's nodes (rounded; at least one of a class of two or more, never
    all), drawn with seed :data:`GZSL_SEED`, sorted."""
    y = nodes.data.y
    generator = torch.Generator().manual_seed(GZSL_SEED)
    _, held = hold_out_per_class(
        torch.arange(y.numel()), y, GZSL_TEST_SHARE, generator
    )
    return held


def _nodes_of(nodes: ZeroShotNodes, classes: Tensor) -> Tensor:
    return torch.isin(nodes.data.y, classes).nonzero().view(-1)


def gzsl_test_split(
    nodes: ZeroShotNodes, split: ClassSplit, test_nodes: Tensor
) -> Tuple[Tensor, Tensor]:
    r"""The seen and the unseen test nodes of :obj:`split`: the test nodes
    (:func:`gzsl_test_nodes`) of its seen classes, and every node of its
    unseen classes."""
    seen = test_nodes[torch.isin(nodes.data.y[test_nodes], split.seen)]
    return seen, _nodes_of(nodes, split.unseen)


def validation_nodes(
    nodes: ZeroShotNodes, split: ClassSplit, test_nodes: Tensor
) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The calibration's validation task on :obj:`split` (Split II):
    :obj:`(held_out, seen_val, unseen_val)`: the nodes its models are not
    trained on (the test nodes and the seen validation nodes), the seen
    validation nodes (:data:`GZSL_TEST_SHARE` of each seen class's
    nodes that are not test nodes, seed :data:`GZSL_SEED` + 1) and the
    validation classes' nodes that are not test nodes."""
    if split.val.numel() == 0:
        raise ValueError(
            f'{split.describe()} has no validation class to calibrate on'
        )
    y = nodes.data.y
    seen = _nodes_of(nodes, split.seen)
    seen = seen[~torch.isin(seen, test_nodes)]
    generator = torch.Generator().manual_seed(GZSL_SEED + 1)
    _, seen_val = hold_out_per_class(seen, y, GZSL_TEST_SHARE, generator)
    unseen_val = _nodes_of(nodes, split.val)
    unseen_val = unseen_val[~torch.isin(unseen_val, test_nodes)]
    held_out = torch.cat([test_nodes, seen_val]).unique()
    return held_out, seen_val, unseen_val


def pooled_gzsl_scores(
    scores: Tensor,
    labels: Tensor,
    seen_nodes: Tensor,
    unseen_nodes: Tensor,
    seen_classes: Tensor,
    unseen_classes: Tensor,
) -> GZSLScores:
    r"""One :class:`~apnet_pyg.zsl.evaluate.GZSLScores` of the score
    matrices :obj:`scores` :math:`(G, N, |S| + |U|)` of :math:`G` models
    (or ensembles) against the seen then the unseen classes, their nodes
    pooled (copy :math:`g` of node :math:`i` is image :math:`gN + i`):
    its per-class accuracies are the mean over the models', so that
    :func:`~apnet_pyg.zsl.evaluate.best_calibration` chooses one constant
    for all of them."""
    count, num_nodes = scores.size(0), scores.size(1)
    flat = scores.reshape(count * num_nodes, -1)
    candidates = torch.cat([seen_classes, unseen_classes])

    def score_fn(index: Tensor, classes: Tensor) -> Tensor:
        if not torch.equal(classes, candidates):
            raise ValueError('scored against other classes than recorded')
        return flat[index]

    def copies(index: Tensor) -> Tensor:
        offsets = torch.arange(count).repeat_interleave(index.numel())
        return index.repeat(count) + offsets * num_nodes

    return GZSLScores(
        score_fn,
        labels.repeat(count),
        copies(seen_nodes),
        copies(unseen_nodes),
        seen_classes,
        unseen_classes,
    )


def _run_metrics(task: GZSLScores, constant: Optional[float]) -> Dict:
    raw = task.accuracies()
    run = {'seen': raw['seen'], 'unseen': raw['unseen'], 'h': raw['h']}
    if constant is not None:
        calibrated = task.accuracies(constant)
        run.update(
            cal_seen=calibrated['seen'],
            cal_unseen=calibrated['unseen'],
            cal_h=calibrated['h'],
        )
    return run


def apnet_gzsl(
    nodes: ZeroShotNodes,
    csd: str,
    setting: NodeSetting,
    epochs: int,
    splits: Sequence[ClassSplit],
    seeds: Sequence[int],
    calibration_seeds: Sequence[int],
    validation_split: Optional[ClassSplit],
    smoother: ScoreSmoother,
    workers: int = 1,
) -> Dict[str, Any]:
    r"""APNet with :obj:`setting` (its reading: smoothing, ensemble)
    trained :obj:`epochs` epochs on each split's seen nodes less the test
    nodes, once per seed of :obj:`seeds`, and evaluated on every split's
    test nodes (see the module docstring); the calibration constant
    chosen on :obj:`validation_split`'s validation task with the models
    of :obj:`calibration_seeds` (none without a validation split). The
    runs use :obj:`workers` processes
    (:func:`~apnet_pyg.zsl.nodes.training.record_runs`)."""
    y = nodes.data.y
    test_nodes = gzsl_test_nodes(nodes)

    def recorded(split, held_out, classes, run_seeds):
        # Every node's scores against classes, once per seed, after the
        # chosen epochs of training on split's seen nodes less held_out.
        task = NodeTask(nodes, split, csd, setting, None, held_out)
        runs = record_runs(
            task, run_seeds, {'gzsl': classes}, [epochs], workers
        )
        return torch.stack([run['gzsl'][0] for run in runs])

    constant = None
    if validation_split is not None:
        held_out, seen_val, unseen_val = validation_nodes(
            nodes, validation_split, test_nodes
        )
        classes = torch.cat([validation_split.seen, validation_split.val])
        constant = best_calibration(
            pooled_gzsl_scores(
                setting_scores(
                    recorded(
                        validation_split, held_out, classes, calibration_seeds
                    ),
                    setting,
                    smoother,
                ),
                y,
                seen_val,
                unseen_val,
                validation_split.seen,
                validation_split.val,
            )
        )
    out = {'calibration': constant, 'splits': {}}
    for split in splits:
        seen_test, unseen_test = gzsl_test_split(nodes, split, test_nodes)
        classes = torch.cat([split.seen, split.unseen])
        scores = recorded(split, test_nodes, classes, seeds)
        runs = [
            _run_metrics(
                pooled_gzsl_scores(
                    group.unsqueeze(0),
                    y,
                    seen_test,
                    unseen_test,
                    split.seen,
                    split.unseen,
                ),
                constant,
            )
            for group in setting_scores(scores, setting, smoother)
        ]
        out['splits'][split.name] = summarise_gzsl(runs)
    return out


def closed_form_gzsl(
    nodes: ZeroShotNodes,
    csd: str,
    setting: NodeSetting,
    splits: Sequence[ClassSplit],
    fit: Callable,
    scores: Callable,
    validation_split: Optional[ClassSplit],
) -> Dict[str, Any]:
    r"""A closed-form baseline in generalized zero-shot: :obj:`fit(x, y,
    s, classes)` on each split's seen nodes less the test nodes (inputs of
    :obj:`setting`), :obj:`scores(weights, x, s, classes)` of its test
    nodes; the calibration constant chosen on :obj:`validation_split`'s
    validation task, the baseline fitted there alike (see the module
    docstring)."""
    y = nodes.data.y
    test_nodes = gzsl_test_nodes(nodes)

    def gzsl_task(split, held_out, seen_nodes, unseen_nodes, unseen):
        x, _, s, task = closed_form_parts(nodes, split, csd, setting, held_out)
        weights = fit(x[task.seen_nodes], y[task.seen_nodes], s, split.seen)
        classes = torch.cat([split.seen, unseen])
        matrix = scores(weights, x, s, classes).unsqueeze(0)
        return pooled_gzsl_scores(
            matrix, y, seen_nodes, unseen_nodes, split.seen, unseen
        )

    constant = None
    if validation_split is not None:
        held_out, seen_val, unseen_val = validation_nodes(
            nodes, validation_split, test_nodes
        )
        constant = best_calibration(
            gzsl_task(
                validation_split,
                held_out,
                seen_val,
                unseen_val,
                validation_split.val,
            )
        )
    out = {'calibration': constant, 'splits': {}}
    for split in splits:
        seen_test, unseen_test = gzsl_test_split(nodes, split, test_nodes)
        task = gzsl_task(
            split, test_nodes, seen_test, unseen_test, split.unseen
        )
        out['splits'][split.name] = summarise_gzsl(
            [_run_metrics(task, constant)]
        )
    return out
