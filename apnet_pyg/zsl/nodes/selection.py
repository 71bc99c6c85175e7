r"""How APNet's setting for zero-shot node classification is chosen
(:mod:`apnet_pyg.zsl.nodes.protocol`), on validation classes only.

The grid has two parts, fixed in advance:

* the *training* settings (:func:`selection_grid`): a base changed one
  choice at a time (node propagation, scoring, descriptions, the class
  graph: learned, or k-NN with its variants, the score and the head);
* the *readings* of a trained model's scores (:func:`reading_grid`): no
  smoothing, or the score matrix smoothed over the node graph
  (:data:`SMOOTHING_READINGS`), each for a single model and for the seed
  ensemble of the selection's seeds; on request (:obj:`refine` of
  :func:`~apnet_pyg.zsl.nodes.protocol.run_nodes`) each also with the
  scores of the nodes classified refined into class prototypes
  (:class:`~apnet_pyg.zsl.nodes.scores.PrototypeRefiner`).

Every training setting is trained once per selection seed (and class
fold); every reading of it is scored from the same runs
(:func:`~apnet_pyg.zsl.nodes.training.record_runs`), after every epoch.
The choice (:func:`select_setting`) is the setting, reading and epoch
count of highest mean balanced accuracy on the validation classes' nodes
among the validation classes, over the seeds (for an ensemble, of the
ensemble) and the folds (:func:`selection_folds`): the first best in grid
order, the fewest epochs among equals. No unseen-class label is read.

Beside it, for diagnosis only, the same runs give the *oracle*
(:func:`oracle_choice`): the setting, reading and epoch of best accuracy
on the unseen classes of the first fold (Split II), the way the public
code of DGPN selects; it is never used for a choice.
"""

import itertools
import time
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import Tensor

from apnet_pyg.data.zero_shot_nodes import ClassSplit, ZeroShotNodes
from apnet_pyg.zsl.metrics import first_best_index, per_class_accuracy
from apnet_pyg.zsl.nodes.inputs import (
    NodeSetting,
    NodeTask,
    node_features,
    scale_features,
)
from apnet_pyg.zsl.nodes.scores import (
    PrototypeRefiner,
    ScoreSmoother,
    evaluated_scores,
    read_scores,
)
from apnet_pyg.zsl.nodes.training import record_runs

#: The smoothings of the reading grid: (smoothing, steps K, temperature).
#: The mean over K in {16, 64} (a node's scores mixed over about sqrt(K)
#: hops), and the APNetConv attention over the node features at
#: temperature 1 for as many steps.
SMOOTHING_READINGS = (
    ('none', 16, 1.0),
    ('mean', 16, 1.0),
    ('mean', 64, 1.0),
    ('attention', 16, 1.0),
    ('attention', 64, 1.0),
)

#: The label of the oracle row: chosen on the unseen classes' accuracy.
ORACLE_LABEL = "test-selected (oracle, as DGPN's public code selects)"


def selection_folds(split: ClassSplit) -> List[ClassSplit]:
    r"""The class folds of :obj:`selection="folds"` on :obj:`split`
    (Split II): every choice of :math:`|S|` classes of its seen and
    validation classes :math:`S \cup V` as the seen classes, the others
    as the validation classes: :obj:`split` itself first, then the others
    in :func:`itertools.combinations` order; the unseen classes unchanged
    and never scored."""
    if split.val.numel() == 0:
        raise ValueError(
            f'{split.describe()} has no validation class to make folds of'
        )
    pool = torch.cat([split.seen, split.val]).sort().values
    folds = [split]
    for seen in itertools.combinations(pool.tolist(), split.seen.numel()):
        seen = torch.tensor(seen)
        if not torch.equal(seen, split.seen):
            folds.append(
                ClassSplit(
                    seen,
                    pool[~torch.isin(pool, seen)],
                    split.unseen,
                    split.name,
                )
            )
    return folds


def selection_grid(
    base: Optional[NodeSetting] = None, full: bool = False
) -> List[NodeSetting]:
    r"""The training settings tried on the validation classes, fixed in
    advance: :obj:`base` (default: :class:`NodeSetting()`), then each
    choice changed one at a time: more hops, the class graph (learned, at
    the paper's cos 40 degrees; k-NN, DBiGCN's: every class joined to its
    2 nearest by their descriptions, no self-loop; that graph over the
    encoded vectors, and with the temperature learned) and the score
    (linear). With :obj:`full`, also the scoring (one propagated vector
    instead of every hop), the description preparation, the k-NN graph
    with self-loops and the head's interaction (multiplicative): these
    scored at least 3.5 points below the best on validation with both
    CSD kinds on Cora (issue 52's run of the full grid), and are left out
    of the default for time. The settings that lost on validation in
    every measurement before (issue 42: no calibration, no or attention
    propagation, every class a candidate in training, a tenfold learning
    rate) are not tried again."""
    base = base or NodeSetting()
    knn = {'graph': 'knn', 'knn_k': 2, 'knn_loop': False}
    changes = [
        ({'scoring': 'single'}, True),
        ({'hops': 2 * base.hops}, False),
        ({'descriptions': 'l2'}, True),
        ({'graph': 'learned'}, False),
        (knn, False),
        ({**knn, 'knn_loop': True}, True),
        ({**knn, 'knn_space': 'encoded'}, False),
        ({**knn, 'learn_propagation_temperature': True}, False),
        ({'score': 'linear', 'logit_scale': 1.0}, False),
        ({'interaction': 'multiplicative'}, True),
    ]
    grid = [base]
    for change, only_full in changes:
        setting = base.replace(**change)
        if (full or not only_full) and setting.key() not in {
            s.key() for s in grid
        }:
            grid.append(setting)
    return grid


def reading_grid(
    ensemble_sizes: Sequence[int] = (1,),
    refinements: Sequence[str] = ('none',),
) -> List[Dict]:
    r"""The readings of a trained setting's scores, fixed in advance: each
    smoothing of :data:`SMOOTHING_READINGS` for each seed-ensemble size of
    :obj:`ensemble_sizes` (single models first), each with every
    refinement of :obj:`refinements`
    (:data:`~apnet_pyg.zsl.nodes.inputs.REFINEMENTS`; default: none), as
    changes of a :class:`NodeSetting`."""
    return [
        {
            'smoothing': smoothing,
            'smoothing_steps': steps,
            'smoothing_temperature': temperature,
            'ensemble': size,
            'refinement': refinement,
        }
        for size in ensemble_sizes
        for smoothing, steps, temperature in SMOOTHING_READINGS
        for refinement in refinements
    ]


def smoother_of(nodes: ZeroShotNodes, setting: NodeSetting) -> ScoreSmoother:
    r"""The :class:`~apnet_pyg.zsl.nodes.scores.ScoreSmoother` of
    :obj:`nodes` for :obj:`setting`: over the citation graph, the
    attention measured between the node features as the setting scales
    them (before any propagation)."""
    return ScoreSmoother(
        nodes.data.edge_index, scale_features(nodes.data.x, setting.features)
    )


def reading_curves(
    scores: Tensor,
    readings: Sequence[Dict],
    smoother: ScoreSmoother,
    metric,
    index: Tensor,
    refiner: Optional[PrototypeRefiner] = None,
) -> List[Tensor]:
    r"""For each reading of :obj:`readings`, the :obj:`metric` of its
    scores after every epoch, one row per seed (a single model) or per
    ensemble: from the recorded scores :obj:`scores`
    :math:`(\text{seeds}, E, N, C)`, the scores of the nodes
    :obj:`index` read as the reading says
    (:func:`~apnet_pyg.zsl.nodes.scores.evaluated_scores`, with
    :obj:`refiner` for a refined reading); :obj:`metric` maps those
    :math:`(n, C)` scores to a number, or to a tuple of numbers (a last
    dimension of the curves)."""
    out: List[Optional[Tensor]] = [None] * len(readings)
    # The readings of one smoothing and ensemble size share their pass.
    groups: Dict[tuple, List[int]] = {}
    for i, r in enumerate(readings):
        key = (r['smoothing'], r['smoothing_temperature'], r['ensemble'])
        groups.setdefault(key, []).append(i)
    for (smoothing, temperature, ensemble), members in groups.items():
        steps = [readings[i]['smoothing_steps'] for i in members]
        read = read_scores(
            scores, ensemble, smoother, smoothing, steps, temperature
        )
        for i in members:
            value = read[readings[i]['smoothing_steps']]
            refinement = readings[i].get('refinement', 'none')
            out[i] = torch.tensor(
                [
                    [
                        metric(evaluated_scores(m, index, refinement, refiner))
                        for m in per_seed
                    ]
                    for per_seed in value
                ],
                dtype=torch.float64,
            )
    return out


def select_setting(
    nodes: ZeroShotNodes,
    csd: str,
    grid: Sequence[NodeSetting],
    seeds: Sequence[int],
    log=print,
    folds: Optional[Sequence[ClassSplit]] = None,
    readings: Optional[Sequence[Dict]] = None,
    oracle: bool = True,
    workers: int = 1,
) -> Dict[str, Any]:
    r"""Chooses the training setting of :obj:`grid`, the reading of
    :obj:`readings` (default: :func:`reading_grid` with single models)
    and the epoch count of highest mean balanced accuracy (%) on the
    validation classes of :obj:`folds` (default: Split II alone) over
    :obj:`seeds` (the first best in grid order, the fewest epochs among
    equals). Reads no label of the unseen classes for the choice; with
    :obj:`oracle`, the same runs on the first fold are also scored on its
    unseen classes (:func:`oracle_choice`), apart. The runs of a setting
    use :obj:`workers` processes
    (:func:`~apnet_pyg.zsl.nodes.training.record_runs`).

    Returns:
        dict: :obj:`'chosen'` and :obj:`'rows'` (every setting and
        reading: :obj:`'setting'` with the reading, :obj:`'epochs'`,
        :obj:`'val_balanced'`, :obj:`'val_std'`), :obj:`'oracle'` (or
        :obj:`None`).
    """
    folds = folds or [nodes.split('II')]
    readings = list(readings or reading_grid())
    y = nodes.data.y
    rows, oracle_rows, cache, smoothers = [], [], {}, {}
    for setting in grid:
        key = (
            setting.features,
            setting.propagation,
            setting.hops,
            setting.temperature,
            setting.scoring,
        )
        if key not in cache:
            cache[key] = node_features(nodes, setting)
        if setting.features not in smoothers:
            smoothers[setting.features] = smoother_of(nodes, setting)
        smoother = smoothers[setting.features]
        start = time.perf_counter()
        curves: List[List[Tensor]] = [[] for _ in readings]
        for number, fold in enumerate(folds):
            task = NodeTask(nodes, fold, csd, setting, cache[key])
            class_sets = {'val': fold.val}
            if oracle and number == 0:
                class_sets['unseen'] = fold.unseen
            recorded = record_runs(
                task,
                seeds,
                class_sets,
                range(1, setting.config.epochs + 1),
                workers,
            )
            val = torch.stack([r['val'] for r in recorded])
            target = y[task.val_nodes]

            def balanced(scores, fold=fold, target=target):
                prediction = fold.val[scores.argmax(1)]
                return 100.0 * per_class_accuracy(prediction, target, fold.val)

            refiner = PrototypeRefiner(
                task.propagated_features[task.val_nodes]
            )
            for i, curve in enumerate(
                reading_curves(
                    val, readings, smoother, balanced, task.val_nodes, refiner
                )
            ):
                curves[i].append(curve)
            if 'unseen' in class_sets:
                oracle_rows += _oracle_rows(
                    torch.stack([r['unseen'] for r in recorded]),
                    setting,
                    readings,
                    smoother,
                    task,
                )
        best_of_setting = []
        for reading, per_fold in zip(readings, curves):
            # One row per seed (or ensemble) and fold; the mean over them.
            values = torch.cat(per_fold)
            mean = values.mean(dim=0)
            epoch = int(mean.argmax()) + 1
            rows.append(
                {
                    'setting': setting.replace(**reading),
                    'epochs': epoch,
                    'val_balanced': float(mean[epoch - 1]),
                    'val_std': float(values[:, epoch - 1].std())
                    if len(values) > 1
                    else 0.0,
                }
            )
            best_of_setting.append(rows[-1])
        log(
            f'  [{csd}] {setting.describe()}: val balanced '
            + ', '.join(
                f'{_reading_name(row["setting"])} '
                f'{row["val_balanced"]:.2f}@{row["epochs"]}'
                for row in best_of_setting
            )
            + f' ({time.perf_counter() - start:.0f} s)'
        )
    best = first_best_index([row['val_balanced'] for row in rows])
    return {
        'chosen': rows[best],
        'rows': rows,
        'oracle': oracle_choice(oracle_rows) if oracle_rows else None,
    }


def _reading_name(setting: NodeSetting) -> str:
    # Short, for the selection log: e.g. 'mean16', 'attention64 x2'.
    name = (
        'none'
        if setting.smoothing == 'none'
        else f'{setting.smoothing}{setting.smoothing_steps}'
    )
    if setting.refinement == 'prototypes':
        name += '+proto'
    elif setting.refinement == 'clusters':
        name += '+clusters'
    return name + (f' x{setting.ensemble}' if setting.ensemble > 1 else '')


def _oracle_rows(
    unseen: Tensor,
    setting: NodeSetting,
    readings: Sequence[Dict],
    smoother: ScoreSmoother,
    task: NodeTask,
) -> List[Dict[str, Any]]:
    # Every reading of one setting scored on the unseen classes after
    # every epoch: accuracy (the oracle's criterion) and balanced accuracy.
    split, y = task.split, task.nodes.data.y
    target = y[task.unseen_nodes]

    def accuracy_and_balanced(scores):
        prediction = split.unseen[scores.argmax(1)]
        return (
            100.0 * float((prediction == target).double().mean()),
            100.0 * per_class_accuracy(prediction, target, split.unseen),
        )

    refiner = PrototypeRefiner(task.propagated_features[task.unseen_nodes])
    curves = reading_curves(
        unseen,
        readings,
        smoother,
        accuracy_and_balanced,
        task.unseen_nodes,
        refiner,
    )
    return [
        {
            'setting': setting.replace(**reading),
            'split': split.name,
            'acc': curve[..., 0],
            'balanced': curve[..., 1],
        }
        for reading, curve in zip(readings, curves)
    ]


def oracle_choice(rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    r"""The oracle, for diagnosis only: of :obj:`rows` (every setting and
    reading of the selection, with its accuracy and balanced accuracy on
    the first fold's unseen classes after every epoch, one row per seed or
    ensemble), the setting, reading and epoch count of highest mean
    accuracy on the unseen classes, with its mean and standard deviation
    over the seeds (or ensembles) at that epoch, labelled
    :data:`ORACLE_LABEL`. Never used for a choice."""
    means = [row['acc'].mean(dim=0) for row in rows]
    best = first_best_index([float(m.max()) for m in means])
    row = rows[best]
    epoch = int(means[best].argmax()) + 1
    acc, bal = row['acc'][:, epoch - 1], row['balanced'][:, epoch - 1]

    def std(values):
        return float(values.std()) if len(values) > 1 else 0.0

    return {
        'label': ORACLE_LABEL,
        'setting': row['setting'],
        'epochs': epoch,
        'split': row['split'],
        'summary': {
            'acc': float(acc.mean()),
            'acc_std': std(acc),
            'balanced': float(bal.mean()),
            'balanced_std': std(bal),
            'seeds': len(acc),
        },
    }
