r"""APNet for zero-shot node classification (DGPN's benchmark, Wang et al.,
KDD 2021): the nodes of a citation graph are the samples, each class is
described by a vector (:mod:`apnet_pyg.data.zero_shot_nodes`), the model is
trained on the seen classes' nodes and scores the unseen classes' nodes
among the unseen classes.

The model is this package's :class:`~apnet_pyg.nn.APNet` unchanged (class
descriptions encoded by the :class:`~apnet_pyg.nn.CentroidEncoder`, the
class graph learned or none, :class:`~apnet_pyg.nn.APNetConv` over it, the
:class:`~apnet_pyg.nn.RelationHead` scoring a node against every candidate
class), trained by :func:`~apnet_pyg.zsl.train.train_model` (episodic, N =
the number of seen classes when below 30, or mini-batch). The node side
enters in one of three ways (:obj:`propagation`), all parameter-free and
computed once:

* :obj:`"none"`: the node's own features;
* :obj:`"mean"`: :math:`K` steps of :class:`~apnet_pyg.nn.APNetConv` with
  temperature 0 over the citation graph, i.e. the mean over the node and
  its neighbours, repeated (a random-walk smoothing);
* :obj:`"attention"`: :math:`K` steps of :class:`~apnet_pyg.nn.APNetConv`
  with the identity projection and temperature :math:`\gamma`: the mean
  weighted by :math:`\exp(\gamma \cos(\mathbf{x}_i, \mathbf{x}_j))`.

A node is scored from its features after :math:`K` steps
(:obj:`scoring="single"`), or, as DGPN's locality, after each of
:math:`0, \ldots, K` steps (:obj:`scoring="hops"`): the model is trained
on every hop's features of the seen classes' nodes and a node's logits at
the hops are averaged. Each class's logits may be centred over every node
of the graph first (:obj:`calibration="center"`, per hop,
:func:`combine_hop_scores`): transductive but label-free, as DGPN's
setting; it removes the per-class offsets that made the model answer one
class for every node.

The protocol (:func:`run_nodes`): accuracy on the unseen classes' nodes
among the unseen classes (DGPN's :obj:`get_acc`), beside it balanced
accuracy (mean per-class recall) and the constant-predictor floor (the
largest unseen class's share), mean and standard deviation over seeds; a
model that predicts a single class for all nodes is flagged. Every choice
is fixed in advance or made on Split II's validation classes by balanced
accuracy (a constant predictor scores :math:`1 / C_{val}` there), or by
class-level cross-validation over Split II's seen and validation classes
(:func:`selection_folds`), then used unchanged on every split: no
unseen-class label is read before the final evaluation. ESZSL and SAE
are tuned the same way.

The settings and the inputs they prescribe are in
:mod:`apnet_pyg.zsl.nodes.inputs`, the metrics and tables in
:mod:`apnet_pyg.zsl.nodes.report`; both are importable from here.
"""

import itertools
import time
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from apnet_pyg.data.zero_shot_nodes import (
    DESCRIPTION_KINDS,
    ClassSplit,
    ZeroShotNodes,
)
from apnet_pyg.zsl.baselines.eszsl import (
    eszsl_grid_predictions,
    fit_eszsl,
    predict_eszsl,
)
from apnet_pyg.zsl.baselines.sae import (
    fit_sae,
    predict_sae,
    sae_grid_predictions,
)
from apnet_pyg.zsl.evaluate import apnet_score_fn
from apnet_pyg.zsl.metrics import first_best_index, per_class_accuracy
from apnet_pyg.zsl.nodes.inputs import (
    SELECTIONS,
    NodeSetting,
    NodeTask,
    node_features,
)
from apnet_pyg.zsl.nodes.report import PUBLISHED, node_metrics, summarise

#: ESZSL's grid of gamma and lambda (each), as
#: :func:`~apnet_pyg.zsl.baselines.eszsl.fit_eszsl_validated`'s default.
ESZSL_GRID = tuple(10.0**p for p in range(-3, 4))


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


def selection_grid(base: Optional[NodeSetting] = None) -> List[NodeSetting]:
    r"""The settings tried on Split II's validation classes (or its class
    folds), fixed in advance: :obj:`base` (default:
    :class:`NodeSetting()`), then each choice changed one at a time: the
    calibration, the scoring (one propagated vector instead of every hop),
    the node propagation (none, attention, more hops), the description
    preparation, the class graph (learned, at the paper's cos 40 degrees),
    the classes scored in training (every class, as DGPN), the score, the
    learning rate and the head's interaction (multiplicative: alone, and
    with DGPN's training, every class scored, no calibration and a tenfold
    learning rate)."""
    base = base or NodeSetting()
    grid = [base]
    for changes in (
        {'calibration': 'none'},
        {'scoring': 'single'},
        {'propagation': 'none', 'scoring': 'single'},
        {'propagation': 'attention'},
        {'hops': 2 * base.hops},
        {'descriptions': 'l2'},
        {'candidates': 'all'},
        {'graph': 'learned'},
        {'score': 'linear', 'logit_scale': 1.0},
        {'lr': 10 * base.config.lr},
        {'interaction': 'multiplicative'},
        {
            'interaction': 'multiplicative',
            'candidates': 'all',
            'calibration': 'none',
            'lr': 10 * base.config.lr,
        },
    ):
        setting = base.replace(**changes)
        if setting.key() not in {s.key() for s in grid}:
            grid.append(setting)
    return grid


#: The rows of APNet besides the chosen one, each the best setting of the
#: selection (by validation balanced accuracy) that differs from the
#: chosen one in a choice: (label, the choice as a function of a setting).
OTHER_ROWS = (
    (
        'APNet (best with the other class graph)',
        lambda s: s.config.graph == 'none',
    ),
    ('APNet (best with the other calibration)', lambda s: s.calibration),
    ('APNet (best with the other candidates)', lambda s: s.candidates),
    ('APNet (best with the other head)', lambda s: s.config.interaction),
)


def dgpn_training(base: NodeSetting) -> NodeSetting:
    r"""APNet trained as DGPN's public code trains its model, fixed in
    advance, not chosen: a seen node scored against every class's
    description (:obj:`candidates="all"`), the scores uncalibrated, each
    step on a batch of the seen nodes against all classes
    (:obj:`training="minibatch"`) at Adam's learning rate 1e-2, for the
    base's whole epoch budget (by default 30 epochs of 25 steps, where
    DGPN takes 1000 full-batch steps); the relation head multiplicative
    with an unbounded score, as DGPN's dot product with the
    descriptions."""
    return base.replace(
        interaction='multiplicative',
        candidates='all',
        calibration='none',
        training='minibatch',
        score='linear',
        logit_scale=1.0,
        lr=1e-2,
    )


#: The rows of APNet fixed in advance, beside the selection's:
#: (label, the setting as a function of the base; trained for its
#: :obj:`config.epochs`).
FIXED_ROWS = (("APNet (DGPN's training, fixed in advance)", dgpn_training),)


def combine_hop_scores(
    scores: Tensor,
    offsets: Optional[Tensor] = None,
    scales: Optional[Tensor] = None,
) -> Tensor:
    r"""The score of nodes against classes from their per-hop scores
    :math:`s^{(k)}_{ic}`, :math:`k = 0, \ldots, K`:

    .. math::
        s_{ic} = \frac{1}{K + 1} \sum_{k=0}^{K} \frac{s^{(k)}_{ic} -
        b^{(k)}_c}{a^{(k)}_c}

    with :math:`b^{(k)}_c` the :obj:`offsets` (with calibration
    :obj:`"center"` or :obj:`"standardize"`, class :math:`c`'s mean score
    over every node of the graph at hop :math:`k`; zero without) and
    :math:`a^{(k)}_c` the :obj:`scales` (with :obj:`"standardize"`, the
    standard deviation of those scores; one without).

    Args:
        scores (Tensor): Shape :obj:`[K + 1, num_nodes, num_classes]`.
        offsets (Tensor, optional): Shape :obj:`[K + 1, num_classes]`.
        scales (Tensor, optional): Shape :obj:`[K + 1, num_classes]`,
            positive.
    """
    if scores.dim() != 3:
        raise ValueError(
            f"'scores' must be [hops, nodes, classes] (got "
            f'shape {tuple(scores.shape)})'
        )
    shape = (scores.size(0), scores.size(2))
    for name, value in (('offsets', offsets), ('scales', scales)):
        if value is not None and value.shape != shape:
            raise ValueError(
                f"'{name}' must be [hops, classes] = {shape} "
                f'(got {tuple(value.shape)})'
            )
    if offsets is not None:
        scores = scores - offsets.unsqueeze(1)
    if scales is not None:
        if not bool((scales > 0).all()):
            raise ValueError(
                "'scales' must be positive (a class scored "
                'alike for every node has no scale)'
            )
        scores = scores / scales.unsqueeze(1)
    return scores.mean(dim=0)


def _predictions(score_fn, index: Tensor, classes: Tensor) -> Tensor:
    return classes[score_fn(index, classes).argmax(dim=1)]


class NodeScores:
    r"""The scores of :obj:`task`'s nodes against classes by
    :obj:`model` (a :obj:`score_fn` of node ids): the APNet logits at
    every hop of the task, calibrated by the setting's
    :obj:`calibration` and averaged (:func:`combine_hop_scores`)."""

    def __init__(self, model, task: NodeTask):
        self.task = task
        self.apnet = apnet_score_fn(model, task.dataset)
        self.num_nodes = task.nodes.data.y.numel()

    def _per_hop(self, index: Tensor, classes: Tensor) -> Tensor:
        scores = self.apnet(self.task.hop_index(index), classes)
        return scores.view(self.task.num_hops, index.numel(), -1)

    def __call__(self, index: Tensor, classes: Tensor) -> Tensor:
        offsets = scales = None
        calibration = self.task.setting.calibration
        if calibration != 'none':
            every = self._per_hop(torch.arange(self.num_nodes), classes)
            offsets = every.mean(dim=1)
            if calibration == 'standardize':
                # A class scored alike everywhere keeps its centred
                # scores (all zero).
                scales = every.std(dim=1).clamp_min(1e-12)
        return combine_hop_scores(
            self._per_hop(index, classes), offsets, scales
        )


def train_node_model(
    task: NodeTask,
    seed: int,
    epochs: int,
    on_epoch_end=None,
    device: str = 'cpu',
):
    r"""Trains a fresh APNet (seeded by :obj:`seed`) on the seen classes'
    nodes of :obj:`task` for :obj:`epochs` epochs with
    :func:`~apnet_pyg.zsl.train.train_model` (:obj:`k_shot` capped at the
    smallest seen class's node count); returns the model and its
    history."""
    from apnet_pyg.zsl.factory import build_model
    from apnet_pyg.zsl.train import train_model

    # An episode draws k_shot distinct nodes per class: at most the
    # smallest seen class's size.
    smallest = int(
        torch.bincount(task.nodes.data.y[task.seen_nodes])[
            task.split.seen
        ].min()
    )
    config = task.setting.config.replace(
        seed=seed,
        epochs=epochs,
        k_shot=min(task.setting.config.k_shot, smallest),
    )
    data = task.dataset
    negatives = None
    if task.setting.candidates == 'all':
        every = torch.arange(task.nodes.num_classes)
        negatives = every[~torch.isin(every, task.split.seen)]
    model = build_model(config, data, task.split.seen)
    history = train_model(
        model,
        data,
        task.seen_nodes,
        task.split.seen,
        config,
        device=device,
        progress=False,
        on_epoch_end=on_epoch_end,
        negative_classes=negatives,
    )
    return model, history


def validation_curve(
    task: NodeTask, seed: int, device: str = 'cpu'
) -> List[float]:
    r"""Balanced accuracy (%) on the validation classes' nodes among the
    validation classes after every epoch of a run seeded by
    :obj:`seed` (the unseen classes are not scored)."""
    if task.val_nodes.numel() == 0:
        raise ValueError(
            f'{task.split.describe()} has no validation class to choose on'
        )
    target = task.nodes.data.y[task.val_nodes]

    def validate(epoch: int, model) -> Dict[str, float]:
        score_fn = NodeScores(model, task)
        prediction = _predictions(score_fn, task.val_nodes, task.split.val)
        return {
            'val_balanced': 100.0
            * per_class_accuracy(prediction, target, task.split.val)
        }

    _, history = train_node_model(
        task, seed, task.setting.config.epochs, validate, device
    )
    return [record['val_balanced'] for record in history]


def evaluate_unseen(model, task: NodeTask) -> Dict[str, Any]:
    r"""The metrics (:func:`node_metrics`) of :obj:`model` on the unseen
    classes' nodes among the unseen classes (the class graph over the
    unseen classes)."""
    score_fn = NodeScores(model, task)
    prediction = _predictions(score_fn, task.unseen_nodes, task.split.unseen)
    return node_metrics(
        prediction, task.nodes.data.y[task.unseen_nodes], task.split.unseen
    )


def select_setting(
    nodes: ZeroShotNodes,
    csd: str,
    grid: Sequence[NodeSetting],
    seeds: Sequence[int],
    log=print,
    folds: Optional[Sequence[ClassSplit]] = None,
) -> Dict[str, Any]:
    r"""Chooses the setting and the epoch count of highest mean balanced
    accuracy on the validation classes of :obj:`folds` (default: Split II
    alone) over :obj:`seeds` (the first best in grid order, the fewest
    epochs among equals). Reads no label of the unseen classes."""
    folds = folds or [nodes.split('II')]
    rows, cache = [], {}
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
        tasks = [
            NodeTask(nodes, fold, csd, setting, cache[key]) for fold in folds
        ]
        start = time.perf_counter()
        curves = torch.tensor(
            [validation_curve(task, seed) for task in tasks for seed in seeds]
        )
        mean = curves.mean(dim=0)
        epoch = int(mean.argmax()) + 1
        rows.append(
            {
                'setting': setting,
                'epochs': epoch,
                'val_balanced': float(mean[epoch - 1]),
                'val_std': float(curves[:, epoch - 1].std())
                if len(curves) > 1
                else 0.0,
            }
        )
        log(
            f'  [{csd}] {setting.describe()}: val balanced '
            f'{rows[-1]["val_balanced"]:.2f} at epoch {epoch} '
            f'({time.perf_counter() - start:.0f} s)'
        )
    best = first_best_index([row['val_balanced'] for row in rows])
    return {'chosen': rows[best], 'rows': rows}


def run_apnet(
    nodes: ZeroShotNodes,
    split: ClassSplit,
    csd: str,
    setting: NodeSetting,
    epochs: int,
    seeds: Sequence[int],
) -> Dict[str, Any]:
    r"""APNet with :obj:`setting` trained :obj:`epochs` epochs for every
    seed, evaluated once on the unseen classes: per-seed metrics and their
    mean and standard deviation."""
    task = NodeTask(nodes, split, csd, setting)
    runs = []
    for seed in seeds:
        model, _ = train_node_model(task, seed, epochs)
        runs.append(evaluate_unseen(model, task))
    return summarise(runs)


def _closed_form_parts(
    nodes: ZeroShotNodes, split: ClassSplit, csd: str, setting: NodeSetting
):
    # One feature vector a node: the features after all K steps.
    setting = setting.replace(scoring='single')
    task = NodeTask(nodes, split, csd, setting)
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
    x, y, s, first = _closed_form_parts(nodes, folds[0], csd, setting)
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
    x, y, s, task = _closed_form_parts(nodes, split, csd, setting)
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


def run_nodes(
    nodes: ZeroShotNodes,
    splits: Sequence[ClassSplit],
    csds: Sequence[str] = DESCRIPTION_KINDS,
    seeds: Sequence[int] = tuple(range(10)),
    selection_seeds: Sequence[int] = (0, 1),
    base: Optional[NodeSetting] = None,
    grid: Optional[Sequence[NodeSetting]] = None,
    select: bool = True,
    selection: str = 'split',
    log=print,
) -> Dict[str, Any]:
    r"""The whole protocol on :obj:`nodes` for every class split of
    :obj:`splits` and CSD kind of :obj:`csds`:

    1. APNet's setting and epoch count chosen among :obj:`grid`
       (:func:`select_setting`, over :obj:`selection_seeds`; default:
       :func:`selection_grid` around :obj:`base`) on Split II's
       validation classes or its class folds (:obj:`selection`, one of
       :data:`SELECTIONS`), or, with :obj:`select=False` or where the
       dataset has no Split II, :obj:`base` (default:
       :class:`NodeSetting()`) for its :obj:`config.epochs` epochs, fixed
       in advance;
    2. APNet trained with it once per seed of :obj:`seeds` on each split,
       evaluated on the unseen classes; with a selection, also the best
       setting with the other choice of each of :data:`OTHER_ROWS`, and
       the rows fixed in advance of :data:`FIXED_ROWS`;
    3. ESZSL and SAE on DGPN's inputs (:data:`DGPN_INPUTS`), and ESZSL on
       APNet's chosen inputs, hyper-parameters chosen as APNet's (fixed
       ones without a selection, see below).

    Returns a dictionary by CSD kind (:func:`format_nodes` prints it).
    """
    if selection not in SELECTIONS:
        raise ValueError(
            f"'selection' must be one of "
            f'{", ".join(SELECTIONS)} (got {selection!r})'
        )
    base = base or NodeSetting()
    if grid is None:
        grid = selection_grid(base)
    try:
        validation_split = nodes.split('II')
    except ValueError:
        validation_split = None
    select = select and validation_split is not None
    folds = where = None
    if select and selection == 'folds':
        folds = selection_folds(validation_split)
        where = (
            f"by class-level cross-validation over Split II's seen "
            f'and validation classes ({len(folds)} folds, each '
            f'trained on {validation_split.seen.numel()} of them and '
            f'validated on the others; mean over the folds)'
        )
    elif select:
        folds = [validation_split]
        where = (
            f"on Split II's validation classes ({validation_split.describe()})"
        )
    results: Dict[str, Any] = {
        'dataset': nodes.name,
        'splits': {s.name: s.describe() for s in splits},
        'num_unseen': {s.name: s.unseen.numel() for s in splits},
        'seeds': list(seeds),
        'selection_seeds': list(selection_seeds),
        'selection': (
            f'chosen {where} by balanced accuracy, then used '
            'unchanged on every split'
        )
        if select
        else (
            'fixed in advance (no selection: '
            + (
                '--no-select'
                if validation_split is not None
                else 'the dataset has no Split II'
            )
            + ')'
        ),
        'csds': {},
    }
    for csd in csds:
        nodes.description(csd)  # A missing file fails here, named.
        log(f'{nodes.name}, {csd.upper()}-CSDs')
        rows: List[Dict[str, Any]] = []
        if select:
            selected = select_setting(
                nodes, csd, grid, selection_seeds, log, folds
            )
            chosen = selected['chosen']
            candidates = [('APNet (chosen)', chosen)]
            for label, choice in OTHER_ROWS:
                other = [
                    row
                    for row in selected['rows']
                    if choice(row['setting']) != choice(chosen['setting'])
                ]
                if other:
                    # The first best in grid order, as the selection.
                    candidates.append(
                        (
                            label,
                            other[
                                first_best_index(
                                    [row['val_balanced'] for row in other]
                                )
                            ],
                        )
                    )
            for label, make in FIXED_ROWS:
                setting = make(base)
                candidates.append(
                    (
                        label,
                        {
                            'setting': setting,
                            'val_balanced': None,
                            'epochs': setting.config.epochs,
                        },
                    )
                )
        else:
            selected = None
            setting = base
            candidates = [
                (
                    'APNet (fixed in advance)',
                    {
                        'setting': setting,
                        'val_balanced': None,
                        'epochs': setting.config.epochs,
                    },
                )
            ]
        for label, candidate in candidates:
            setting = candidate['setting']
            start = time.perf_counter()
            per_split = {
                split.name: run_apnet(
                    nodes, split, csd, setting, candidate['epochs'], seeds
                )
                for split in splits
            }
            log(
                f'  {label}: {len(seeds)} seeds x {len(splits)} splits in '
                f'{time.perf_counter() - start:.0f} s'
            )
            rows.append(
                {
                    'method': label,
                    'setting': setting.describe(),
                    'epochs': candidate['epochs'],
                    'val_balanced': candidate['val_balanced'],
                    'splits': per_split,
                }
            )
        # Without validation classes: ESZSL's middle of the grid.
        dgpn_choice = None if select else (1.0, 1.0)
        eszsl = eszsl_nodes(
            nodes, csd, DGPN_INPUTS, splits, dgpn_choice, folds
        )
        rows.append(
            {
                'method': "ESZSL (DGPN's inputs)",
                'setting': f'gamma={eszsl["gamma"]:g}, '
                f'lambda={eszsl["lam"]:g}',
                **eszsl,
            }
        )
        if select:
            sae = sae_nodes(nodes, csd, DGPN_INPUTS, splits, folds)
            rows.append(
                {
                    'method': "SAE (DGPN's inputs)",
                    'setting': f'lambda={sae["lam"]:g}, space={sae["space"]}',
                    **sae,
                }
            )
            setting = candidates[0][1]['setting']
            eszsl = eszsl_nodes(nodes, csd, setting, splits, folds=folds)
            rows.append(
                {
                    'method': "ESZSL (APNet's inputs)",
                    'setting': f'gamma={eszsl["gamma"]:g}, '
                    f'lambda={eszsl["lam"]:g}',
                    **eszsl,
                }
            )
        floor = {
            name: row['splits'][name]['floor']
            for row in rows[:1]
            for name in row['splits']
        }
        results['csds'][csd] = {
            'rows': rows,
            'floor': floor,
            'selection': None
            if selected is None
            else [
                {
                    'setting': r['setting'].describe(),
                    'epochs': r['epochs'],
                    'val_balanced': r['val_balanced'],
                    'val_std': r['val_std'],
                }
                for r in selected['rows']
            ],
            'published': PUBLISHED.get(nodes.name.lower(), {}).get(csd, {}),
        }
    return results
