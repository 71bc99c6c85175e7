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
accuracy (a constant predictor scores :math:`1 / C_{val}` there), then
used unchanged on every split: no unseen-class label is read before the
final evaluation. ESZSL and SAE are tuned the same way.
"""
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.data.zero_shot_nodes import (DESCRIPTION_KINDS, ClassSplit,
                                            ZeroShotNodes)
from apnet_pyg.nn.conv.apnet_conv import APNetConv
from apnet_pyg.zsl.config import TrainConfig
from apnet_pyg.zsl.eszsl import (fit_eszsl, fit_eszsl_validated,
                                  predict_eszsl)
from apnet_pyg.zsl.evaluate import apnet_score_fn
from apnet_pyg.zsl.metrics import first_best_index, per_class_accuracy
from apnet_pyg.zsl.sae import fit_sae, fit_sae_validated, predict_sae

#: How node features enter (see the module docstring).
PROPAGATIONS = ('none', 'mean', 'attention')
#: How a node is scored: :obj:`"single"` from its features after
#: :obj:`hops` propagation steps, :obj:`"hops"` from its features after
#: each of 0..:obj:`hops` steps (locality, as DGPN), the per-hop logits
#: averaged; the model is trained on every hop's features of the seen
#: classes' nodes.
SCORINGS = ('single', 'hops')
#: How each class's scores are calibrated before the argmax:
#: :obj:`"none"`, or :obj:`"center"`: minus that class's mean score over
#: every node of the graph (per hop). Transductive but label-free, as
#: DGPN's setting: it removes the per-class offsets that make a model
#: answer one class for every node.
#: :obj:`"standardize"`: centred, then divided by that class's standard
#: deviation over every node (per hop).
CALIBRATIONS = ('none', 'center', 'standardize')
#: How features are scaled first: :obj:`"row"` divides each node's
#: features by their sum (DGPN), :obj:`"raw"` keeps them.
FEATURE_SCALINGS = ('row', 'raw')
#: How class descriptions are prepared: :obj:`"l2"` unit rows (DGPN),
#: :obj:`"center"` minus the mean of all classes' descriptions, then unit
#: rows, :obj:`"whiten"` centred and whitened in their own span (PCA), then
#: unit rows. Centring and whitening read every class's description (side
#: information of the task), never a label.
DESCRIPTION_PREPARATIONS = ('l2', 'center', 'whiten')

#: ESZSL's grid of gamma and lambda (each), as
#: :func:`~apnet_pyg.zsl.eszsl.fit_eszsl_validated`'s default.
ESZSL_GRID = tuple(10.0**p for p in range(-3, 4))

#: DGPN's Table 3 (TEXT-CSDs, Split I and II) and Table 4 (LABEL-CSDs,
#: Split I), accuracy % as (mean, std), by dataset folder name in lower
#: case, CSD kind, split and method.
PUBLISHED = {
    'cora': {
        'text': {
            'I': {'RandomGuess': (25.35, 1.28), 'DAP': (26.56, 0.37),
                  'ESZSL': (27.35, 0.00), 'ZS-GCN': (25.73, 0.46),
                  'WDVSc': (30.62, 0.38), 'Hyperbolic-ZSL': (26.36, 0.41),
                  'DGPN': (33.78, 0.28)},
            'II': {'RandomGuess': (32.69, 1.48), 'DAP': (30.22, 1.21),
                   'ESZSL': (38.82, 0.00), 'ZS-GCN': (29.53, 0.91),
                   'WDVSc': (34.13, 0.67), 'Hyperbolic-ZSL': (37.02, 0.28),
                   'DGPN': (46.40, 0.31)},
        },
        'label': {'I': {'ESZSL': (25.79, None), 'DGPN': (32.55, None)}},
    },
}
PUBLISHED_SOURCE = 'Wang et al., KDD 2021 (DGPN), Tables 3 and 4'


def default_config() -> TrainConfig:
    r"""APNet's configuration for nodes, fixed in advance: the paper's
    model at a smaller width (a few thousand nodes, not 37,322 images), 2
    centroid experts (Split II has 2 seen classes), PyTorch's
    initialisation (standardising the experts over 2 seen classes blows
    up the directions they do not span), no class graph (the learned one
    joins the nearly parallel descriptions: see :func:`selection_grid`),
    episodes of all seen classes with 32 nodes each, 25 episodes an epoch,
    Adam at 1e-4, and the epoch count chosen on validation (up to
    :obj:`epochs`)."""
    return TrainConfig(
        graph='none', num_centroids=2, class_channels=256,
        hidden_channels=256, proj_channels=128, n_way=30, k_shot=32,
        lr=1e-4, weight_decay=1e-4, epochs=30, lr_decay_epoch=None,
        iterations_per_epoch=25, model_selection='none',
        initialization='pytorch')


@dataclass(frozen=True)
class NodeSetting:
    r"""One APNet variant for nodes: the node side, the class side and the
    model and training configuration (:class:`TrainConfig`; its
    :obj:`epochs` is the most a selection looks at, its :obj:`seed` is
    replaced by each run's).

    Args:
        propagation (str): :data:`PROPAGATIONS`. (default: :obj:`"mean"`)
        hops (int): Propagation steps :math:`K`. (default: :obj:`2`)
        temperature (float): :math:`\gamma` of :obj:`"attention"`.
            (default: :obj:`10.0`)
        scoring (str): :data:`SCORINGS`. (default: :obj:`"hops"`)
        calibration (str): :data:`CALIBRATIONS`.
            (default: :obj:`"center"`)
        features (str): :data:`FEATURE_SCALINGS`. (default: :obj:`"row"`)
        descriptions (str): :data:`DESCRIPTION_PREPARATIONS`.
            (default: :obj:`"center"`)
        config (TrainConfig): (default: :func:`default_config`)
    """
    propagation: str = 'mean'
    hops: int = 2
    temperature: float = 10.0
    scoring: str = 'hops'
    calibration: str = 'center'
    features: str = 'row'
    descriptions: str = 'center'
    config: TrainConfig = field(default_factory=default_config)

    def __post_init__(self):
        for name, choices in (('propagation', PROPAGATIONS),
                              ('scoring', SCORINGS),
                              ('calibration', CALIBRATIONS),
                              ('features', FEATURE_SCALINGS),
                              ('descriptions', DESCRIPTION_PREPARATIONS)):
            if getattr(self, name) not in choices:
                raise ValueError(f"'{name}' must be one of "
                                 f"{', '.join(choices)} (got "
                                 f"{getattr(self, name)!r})")
        if not isinstance(self.hops, int) or self.hops < 1:
            raise ValueError(f"'hops' must be a positive integer (got "
                             f"{self.hops!r})")
        if self.scoring == 'hops' and self.propagation == 'none':
            raise ValueError("'scoring'='hops' needs a propagation (got "
                             "propagation='none'): use scoring='single'")
        if not self.temperature >= 0:
            raise ValueError(f"'temperature' must be >= 0 (got "
                             f"{self.temperature!r})")
        if not isinstance(self.config, TrainConfig):
            raise ValueError("'config' must be a TrainConfig")

    def replace(self, **changes) -> 'NodeSetting':
        r"""A copy with :obj:`changes`; keys of :class:`TrainConfig` go to
        :obj:`config`."""
        own = {f.name for f in dataclasses.fields(self)}
        config_changes = {k: v for k, v in changes.items() if k not in own}
        changes = {k: v for k, v in changes.items() if k in own}
        if config_changes:
            changes['config'] = self.config.replace(**config_changes)
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        c = self.config
        if self.propagation == 'none':
            nodes = 'propagation=none'
        else:
            nodes = f'propagation={self.propagation}, hops={self.hops}'
            if self.propagation == 'attention':
                nodes += f', temperature={self.temperature:g}'
        if self.scoring == 'hops':
            nodes += ' (scored at hops 0..K)'
        nodes += f', calibration={self.calibration}'
        graph = c.graph
        if graph == 'learned':
            graph += f' (cos {math.degrees(math.acos(c.threshold)):.0f} deg)'
        return (f'{nodes}, features={self.features}, descriptions='
                f'{self.descriptions}, graph={graph}, training='
                f'{c.training}, k_shot={c.k_shot}, lr={c.lr:g}, score='
                f'{c.score}, logit_scale={c.logit_scale:g}')

    def key(self) -> Tuple:
        return (self.propagation, self.hops, self.temperature,
                self.scoring, self.calibration, self.features,
                self.descriptions,
                tuple(sorted(self.config.replace(seed=0).to_dict().items(),
                             key=lambda item: item[0])))


def selection_grid(base: Optional[NodeSetting] = None) -> List[NodeSetting]:
    r"""The settings tried on Split II's validation classes, fixed in
    advance: :obj:`base` (default: :class:`NodeSetting()`), then each
    choice changed one at a time: the calibration, the scoring (one
    propagated vector instead of every hop), the node propagation (none,
    attention, more hops), the description preparation, the class graph
    (learned, at the paper's cos 40 degrees), the score and the learning
    rate."""
    base = base or NodeSetting()
    grid = [base]
    for changes in ({'calibration': 'none'},
                    {'scoring': 'single'},
                    {'propagation': 'none', 'scoring': 'single'},
                    {'propagation': 'attention'},
                    {'hops': 2 * base.hops},
                    {'descriptions': 'l2'},
                    {'graph': 'learned'},
                    {'score': 'linear', 'logit_scale': 1.0},
                    {'lr': 10 * base.config.lr}):
        setting = base.replace(**changes)
        if setting.key() not in {s.key() for s in grid}:
            grid.append(setting)
    return grid


#: The rows of APNet besides the chosen one, each the best setting of the
#: selection (by validation balanced accuracy) that differs from the
#: chosen one in a choice: (label, the choice as a function of a setting).
OTHER_ROWS = (
    ('APNet (best with the other class graph)',
     lambda s: s.config.graph == 'none'),
    ('APNet (best with the other calibration)', lambda s: s.calibration),
)


def scale_features(x: Tensor, scaling: str) -> Tensor:
    r"""Node features scaled by :obj:`scaling` (:data:`FEATURE_SCALINGS`);
    a node without any feature stays zero."""
    if scaling not in FEATURE_SCALINGS:
        raise ValueError(f"'features' must be one of "
                         f"{', '.join(FEATURE_SCALINGS)} (got {scaling!r})")
    x = x.float()
    if scaling == 'raw':
        return x
    total = x.sum(dim=1, keepdim=True)
    return torch.where(total != 0, x / torch.where(total != 0, total, 1.0),
                       torch.zeros_like(x))


@torch.no_grad()
def propagate_features(x: Tensor, edge_index: Tensor, propagation: str,
                       hops: int = 2, temperature: float = 10.0) -> Tensor:
    r"""The node features after the parameter-free propagation
    :obj:`propagation` (:data:`PROPAGATIONS`) over :obj:`edge_index`: an
    :class:`~apnet_pyg.nn.APNetConv` with the identity projection, the
    temperature 0 (:obj:`"mean"`) or :obj:`temperature`
    (:obj:`"attention"`) and :obj:`hops` steps, self-loops added."""
    if propagation not in PROPAGATIONS:
        raise ValueError(f"'propagation' must be one of "
                         f"{', '.join(PROPAGATIONS)} (got {propagation!r})")
    if propagation == 'none':
        return x
    conv = APNetConv(x.size(1), proj_channels=None,
                     temperature=0.0 if propagation == 'mean'
                     else temperature, num_steps=hops)
    return conv(x, edge_index)


@torch.no_grad()
def hop_features(x: Tensor, edge_index: Tensor, propagation: str,
                 hops: int = 2, temperature: float = 10.0) -> Tensor:
    r"""The node features after each of :math:`0, \ldots, K`
    (:obj:`hops`) steps of the propagation :obj:`propagation` (as
    :func:`propagate_features`), stacked: shape
    :obj:`[K + 1, num_nodes, num_features]`, index :math:`k` the features
    after :math:`k` steps."""
    if propagation not in PROPAGATIONS or propagation == 'none':
        raise ValueError(f"'propagation' must be one of "
                         f"{', '.join(PROPAGATIONS[1:])} to score at several "
                         f"hops (got {propagation!r})")
    out = [x]
    for _ in range(hops):
        out.append(propagate_features(out[-1], edge_index, propagation, 1,
                                      temperature))
    return torch.stack(out)


def combine_hop_scores(scores: Tensor, offsets: Optional[Tensor] = None,
                       scales: Optional[Tensor] = None) -> Tensor:
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
        raise ValueError(f"'scores' must be [hops, nodes, classes] (got "
                         f"shape {tuple(scores.shape)})")
    shape = (scores.size(0), scores.size(2))
    for name, value in (('offsets', offsets), ('scales', scales)):
        if value is not None and value.shape != shape:
            raise ValueError(f"'{name}' must be [hops, classes] = {shape} "
                             f"(got {tuple(value.shape)})")
    if offsets is not None:
        scores = scores - offsets.unsqueeze(1)
    if scales is not None:
        if not bool((scales > 0).all()):
            raise ValueError("'scales' must be positive (a class scored "
                             "alike for every node has no scale)")
        scores = scores / scales.unsqueeze(1)
    return scores.mean(dim=0)


def prepare_descriptions(descriptions: Tensor, preparation: str) -> Tensor:
    r"""The class descriptions :math:`(C, D)` prepared by
    :obj:`preparation` (:data:`DESCRIPTION_PREPARATIONS`); whitening maps
    them to :math:`C - 1` dimensions (their centred span)."""
    if preparation not in DESCRIPTION_PREPARATIONS:
        raise ValueError(f"'descriptions' must be one of "
                         f"{', '.join(DESCRIPTION_PREPARATIONS)} (got "
                         f"{preparation!r})")
    s = descriptions.double()
    if preparation != 'l2':
        s = s - s.mean(dim=0, keepdim=True)
    if preparation == 'whiten':
        u, sigma, _ = torch.linalg.svd(s, full_matrices=False)
        keep = sigma > 1e-9 * sigma.max()
        # The principal coordinates at unit variance each.
        s = u[:, keep] * math.sqrt(s.size(0))
    return torch.nn.functional.normalize(s, dim=1).float()


class NodeTask:
    r"""One dataset, class split and CSD kind, with the node features and
    class descriptions of a :class:`NodeSetting`, presented to the
    training loop as a :class:`~apnet_pyg.data.xlsa17.ZSLDataset` (nodes as
    images: :obj:`trainval_loc` the seen classes' nodes,
    :obj:`test_unseen_loc` the unseen classes', :obj:`val_classes` the
    split's validation classes). With :obj:`scoring="hops"` the dataset
    holds :math:`K + 1` copies of the nodes, copy :math:`k` with the
    features after :math:`k` steps (image :math:`kN + i` is node
    :math:`i` at hop :math:`k`), and training draws from every copy of
    the seen classes' nodes; :obj:`seen_nodes`, :obj:`val_nodes` and
    :obj:`unseen_nodes` are node ids (hop 0)."""
    def __init__(self, nodes: ZeroShotNodes, split: ClassSplit,
                 csd: str, setting: NodeSetting,
                 features: Optional[Tensor] = None):
        self.nodes, self.split, self.csd, self.setting = (nodes, split, csd,
                                                          setting)
        y = nodes.data.y
        if features is None:
            features = node_features(nodes, setting)
        self.features = features
        num_nodes = y.numel()
        self.num_hops = features.size(0) // num_nodes
        if features.size(0) != self.num_hops * num_nodes:
            raise ValueError(f"'features' must have a row per node and hop "
                             f"(got {features.size(0)} rows for "
                             f"{num_nodes} nodes)")
        self.descriptions = prepare_descriptions(nodes.description(csd),
                                                 setting.descriptions)
        self.seen_nodes = _nodes_of(y, split.seen)
        self.val_nodes = _nodes_of(y, split.val)
        self.unseen_nodes = _nodes_of(y, split.unseen)
        for role, index in (('seen', self.seen_nodes),
                            ('unseen', self.unseen_nodes)):
            if index.numel() == 0:
                raise ValueError(f"no node of the {role} classes in "
                                 f"{nodes.name}'s group.txt")
        empty = torch.zeros(0, dtype=torch.long)
        self.dataset = ZSLDataset(
            name=nodes.name, class_names=list(nodes.class_names),
            attributes=self.descriptions, features=features,
            labels=y.repeat(self.num_hops),
            trainval_loc=self.hop_index(self.seen_nodes), test_seen_loc=empty,
            test_unseen_loc=self.unseen_nodes, train_loc=None,
            val_loc=None, seen_classes=split.seen,
            unseen_classes=split.unseen, train_classes=split.seen,
            val_classes=split.val if split.val.numel() else None)


    def hop_index(self, index: Tensor) -> Tensor:
        r"""The dataset's images of nodes :obj:`index` at every hop, hop
        by hop."""
        num_nodes = self.nodes.data.y.numel()
        return torch.cat([index + k * num_nodes
                          for k in range(self.num_hops)])


def node_features(nodes: ZeroShotNodes, setting: NodeSetting) -> Tensor:
    r"""The node features of :obj:`setting`: scaled, then propagated
    (with :obj:`scoring="hops"`, the features at every hop, hop by hop:
    :obj:`[(K + 1) N, F]`)."""
    if setting.scoring == 'hops':
        return hop_features(
            scale_features(nodes.data.x, setting.features),
            nodes.data.edge_index, setting.propagation, setting.hops,
            setting.temperature).flatten(0, 1)
    return propagate_features(
        scale_features(nodes.data.x, setting.features),
        nodes.data.edge_index, setting.propagation, setting.hops,
        setting.temperature)


def _nodes_of(y: Tensor, classes: Tensor) -> Tensor:
    return torch.isin(y, classes).nonzero().view(-1)


def node_metrics(prediction: Tensor, target: Tensor,
                 classes: Tensor) -> Dict[str, Any]:
    r"""Accuracy (%) of :obj:`prediction` against :obj:`target`, balanced
    accuracy (%), the constant-predictor floor (%, the largest class's
    share) and the number of :obj:`classes` predicted at all."""
    counts = torch.bincount(target, minlength=int(classes.max()) + 1)
    return {
        'acc': 100.0 * float((prediction == target).double().mean()),
        'balanced': 100.0 * per_class_accuracy(prediction, target, classes),
        'floor': 100.0 * float(counts[classes].max()) / target.numel(),
        'predicted_classes': int(torch.isin(classes,
                                            prediction.unique()).sum()),
    }


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
        return combine_hop_scores(self._per_hop(index, classes), offsets,
                                  scales)


def train_node_model(task: NodeTask, seed: int, epochs: int,
                     on_epoch_end=None, device: str = 'cpu'):
    r"""Trains a fresh APNet (seeded by :obj:`seed`) on the seen classes'
    nodes of :obj:`task` for :obj:`epochs` epochs with
    :func:`~apnet_pyg.zsl.train.train_model` (:obj:`k_shot` capped at the
    smallest seen class's node count); returns the model and its
    history."""
    from apnet_pyg.zsl.train import build_model, train_model
    # An episode draws k_shot distinct nodes per class: at most the
    # smallest seen class's size.
    smallest = int(torch.bincount(task.nodes.data.y[task.seen_nodes])
                   [task.split.seen].min())
    config = task.setting.config.replace(
        seed=seed, epochs=epochs,
        k_shot=min(task.setting.config.k_shot, smallest))
    data = task.dataset
    model = build_model(config, data, task.split.seen)
    history = train_model(model, data, task.seen_nodes, task.split.seen,
                          config, device=device, progress=False,
                          on_epoch_end=on_epoch_end)
    return model, history


def validation_curve(task: NodeTask, seed: int,
                     device: str = 'cpu') -> List[float]:
    r"""Balanced accuracy (%) on the validation classes' nodes among the
    validation classes after every epoch of a run seeded by
    :obj:`seed` (the unseen classes are not scored)."""
    if task.val_nodes.numel() == 0:
        raise ValueError(f"{task.split.describe()} has no validation "
                         f"class to choose on")
    target = task.nodes.data.y[task.val_nodes]

    def validate(epoch: int, model) -> Dict[str, float]:
        score_fn = NodeScores(model, task)
        prediction = _predictions(score_fn, task.val_nodes, task.split.val)
        return {'val_balanced': 100.0 * per_class_accuracy(
            prediction, target, task.split.val)}

    _, history = train_node_model(task, seed, task.setting.config.epochs,
                                  validate, device)
    return [record['val_balanced'] for record in history]


def evaluate_unseen(model, task: NodeTask) -> Dict[str, Any]:
    r"""The metrics (:func:`node_metrics`) of :obj:`model` on the unseen
    classes' nodes among the unseen classes (the class graph over the
    unseen classes)."""
    score_fn = NodeScores(model, task)
    prediction = _predictions(score_fn, task.unseen_nodes, task.split.unseen)
    return node_metrics(prediction, task.nodes.data.y[task.unseen_nodes],
                        task.split.unseen)


def select_setting(nodes: ZeroShotNodes, csd: str,
                   grid: Sequence[NodeSetting], seeds: Sequence[int],
                   log=print) -> Dict[str, Any]:
    r"""Chooses the setting and the epoch count of highest mean balanced
    accuracy on Split II's validation classes over :obj:`seeds` (the first
    best in grid order, the fewest epochs among equals). Reads no label of
    the unseen classes."""
    split = nodes.split('II')
    rows, cache = [], {}
    for setting in grid:
        key = (setting.features, setting.propagation, setting.hops,
               setting.temperature, setting.scoring)
        if key not in cache:
            cache[key] = node_features(nodes, setting)
        task = NodeTask(nodes, split, csd, setting, cache[key])
        start = time.perf_counter()
        curves = torch.tensor([validation_curve(task, seed)
                               for seed in seeds])
        mean = curves.mean(dim=0)
        epoch = int(mean.argmax()) + 1
        rows.append({'setting': setting, 'epochs': epoch,
                     'val_balanced': float(mean[epoch - 1]),
                     'val_std': float(curves[:, epoch - 1].std())
                     if len(seeds) > 1 else 0.0})
        log(f'  [{csd}] {setting.describe()}: val balanced '
            f'{rows[-1]["val_balanced"]:.2f} at epoch {epoch} '
            f'({time.perf_counter() - start:.0f} s)')
    best = first_best_index([row['val_balanced'] for row in rows])
    return {'chosen': rows[best], 'rows': rows}


def run_apnet(nodes: ZeroShotNodes, split: ClassSplit, csd: str,
              setting: NodeSetting, epochs: int,
              seeds: Sequence[int]) -> Dict[str, Any]:
    r"""APNet with :obj:`setting` trained :obj:`epochs` epochs for every
    seed, evaluated once on the unseen classes: per-seed metrics and their
    mean and standard deviation."""
    task = NodeTask(nodes, split, csd, setting)
    runs = []
    for seed in seeds:
        model, _ = train_node_model(task, seed, epochs)
        runs.append(evaluate_unseen(model, task))
    return summarise(runs)


def summarise(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    r"""Mean and standard deviation of per-seed metrics, and how many seeds
    predicted a single class for every node."""
    out: Dict[str, Any] = {'runs': runs, 'seeds': len(runs)}
    for key in ('acc', 'balanced'):
        values = torch.tensor([run[key] for run in runs], dtype=torch.double)
        out[key] = float(values.mean())
        out[key + '_std'] = float(values.std()) if len(runs) > 1 else 0.0
    out['floor'] = runs[0]['floor']
    out['one_class_seeds'] = sum(run['predicted_classes'] == 1
                                 for run in runs)
    return out


def _closed_form_parts(nodes: ZeroShotNodes, split: ClassSplit, csd: str,
                       setting: NodeSetting):
    # One feature vector a node: the features after all K steps.
    setting = setting.replace(scoring='single')
    task = NodeTask(nodes, split, csd, setting)
    return (task.features.double(), nodes.data.y,
            task.descriptions.double(), task)


def _validation_arguments(nodes: ZeroShotNodes, csd: str,
                          setting: NodeSetting) -> Dict[str, Any]:
    # Fitted on Split II's seen classes, validated on its validation
    # classes, refitted on the same seen classes (DGPN trains on the seen
    # classes only).
    x, y, s, task = _closed_form_parts(nodes, nodes.split('II'), csd,
                                       setting)
    return dict(features=x, labels=y, attributes=s,
                train_classes=task.split.seen, train_images=task.seen_nodes,
                val_classes=task.split.val, val_images=task.val_nodes,
                refit_classes=task.split.seen, refit_images=task.seen_nodes)


def _unseen_metrics(nodes, split, csd, setting, fit, predict):
    x, y, s, task = _closed_form_parts(nodes, split, csd, setting)
    weights = fit(x[task.seen_nodes], y[task.seen_nodes], s, split.seen)
    prediction = predict(weights, x[task.unseen_nodes], s, split.unseen)
    return summarise([node_metrics(prediction, y[task.unseen_nodes],
                                   split.unseen)])


def eszsl_nodes(nodes: ZeroShotNodes, csd: str, setting: NodeSetting,
                splits: Sequence[ClassSplit],
                choice: Optional[Tuple[float, float]] = None
                ) -> Dict[str, Any]:
    r"""ESZSL (:func:`~apnet_pyg.zsl.eszsl.fit_eszsl_validated`) fitted on
    the seen classes' nodes, :math:`(\gamma, \lambda)` chosen on Split
    II's validation classes by balanced accuracy (the first best in
    :data:`ESZSL_GRID` order) unless :obj:`choice` fixes them, then used
    unchanged on every split of :obj:`splits`."""
    validation = None
    if choice is None:
        _, gamma, lam, validation = fit_eszsl_validated(
            **_validation_arguments(nodes, csd, setting), grid=ESZSL_GRID)
        choice = (gamma, lam)

    def fit(x, y, s, classes):
        return fit_eszsl(x, y, s, classes, *choice)

    return {'gamma': choice[0], 'lam': choice[1], 'val_balanced': validation,
            'splits': {split.name: _unseen_metrics(nodes, split, csd,
                                                   setting, fit,
                                                   predict_eszsl)
                       for split in splits}}


def sae_nodes(nodes: ZeroShotNodes, csd: str, setting: NodeSetting,
              splits: Sequence[ClassSplit]) -> Dict[str, Any]:
    r"""SAE (:func:`~apnet_pyg.zsl.sae.fit_sae_validated`) fitted on the
    seen classes' nodes, :math:`\lambda` and the prediction space chosen on
    Split II's validation classes by balanced accuracy, then used
    unchanged on every split of :obj:`splits`."""
    _, lam, space, validation = fit_sae_validated(
        **_validation_arguments(nodes, csd, setting))

    def fit(x, y, s, classes):
        return fit_sae(x, y, s, classes, lam)

    def predict(w, x, s, classes):
        return predict_sae(w, x, s, classes, space)

    return {'lam': lam, 'space': space, 'val_balanced': validation,
            'splits': {split.name: _unseen_metrics(nodes, split, csd,
                                                   setting, fit, predict)
                       for split in splits}}


#: DGPN's inputs, on which ESZSL and SAE reproduce its table: row-scaled
#: features, no propagation, unit-norm descriptions.
DGPN_INPUTS = NodeSetting(propagation='none', scoring='single',
                          calibration='none', features='row',
                          descriptions='l2')


def run_nodes(nodes: ZeroShotNodes, splits: Sequence[ClassSplit],
              csds: Sequence[str] = DESCRIPTION_KINDS,
              seeds: Sequence[int] = tuple(range(10)),
              selection_seeds: Sequence[int] = (0, 1),
              base: Optional[NodeSetting] = None,
              grid: Optional[Sequence[NodeSetting]] = None,
              select: bool = True, log=print) -> Dict[str, Any]:
    r"""The whole protocol on :obj:`nodes` for every class split of
    :obj:`splits` and CSD kind of :obj:`csds`:

    1. APNet's setting and epoch count chosen on Split II's validation
       classes among :obj:`grid` (:func:`select_setting`, over
       :obj:`selection_seeds`; default: :func:`selection_grid` around
       :obj:`base`), or, with :obj:`select=False` or where the dataset has
       no Split II, :obj:`base` (default: :class:`NodeSetting()`) for its
       :obj:`config.epochs` epochs, fixed in advance;
    2. APNet trained with it once per seed of :obj:`seeds` on each split,
       evaluated on the unseen classes; with a selection, also the best
       setting with the other kind of class graph (learned or none);
    3. ESZSL and SAE on DGPN's inputs (:data:`DGPN_INPUTS`), and ESZSL on
       APNet's chosen inputs, hyper-parameters chosen on Split II's
       validation classes (fixed ones otherwise, see below).

    Returns a dictionary by CSD kind (:func:`format_nodes` prints it).
    """
    base = base or NodeSetting()
    if grid is None:
        grid = selection_grid(base)
    try:
        validation_split = nodes.split('II')
    except ValueError:
        validation_split = None
    select = select and validation_split is not None
    results: Dict[str, Any] = {
        'dataset': nodes.name, 'splits': {s.name: s.describe()
                                          for s in splits},
        'num_unseen': {s.name: s.unseen.numel() for s in splits},
        'seeds': list(seeds), 'selection_seeds': list(selection_seeds),
        'selection': ('chosen on Split II\'s validation classes '
                      f'({validation_split.describe()}) by balanced '
                      'accuracy, then used unchanged on every split')
        if select else ('fixed in advance (no selection: ' +
                        ('--no-select' if validation_split is not None
                         else 'the dataset has no Split II') + ')'),
        'csds': {},
    }
    for csd in csds:
        nodes.description(csd)  # A missing file fails here, named.
        log(f'{nodes.name}, {csd.upper()}-CSDs')
        rows: List[Dict[str, Any]] = []
        if select:
            selection = select_setting(nodes, csd, grid, selection_seeds,
                                       log)
            chosen = selection['chosen']
            candidates = [('APNet (chosen)', chosen)]
            for label, choice in OTHER_ROWS:
                other = [row for row in selection['rows']
                         if choice(row['setting']) !=
                         choice(chosen['setting'])]
                if other:
                    # The first best in grid order, as the selection.
                    candidates.append((label, other[first_best_index(
                        [row['val_balanced'] for row in other])]))
        else:
            selection = None
            setting = base
            candidates = [('APNet (fixed in advance)',
                           {'setting': setting, 'val_balanced': None,
                            'epochs': setting.config.epochs})]
        for label, candidate in candidates:
            setting = candidate['setting']
            start = time.perf_counter()
            per_split = {split.name: run_apnet(nodes, split, csd, setting,
                                               candidate['epochs'], seeds)
                         for split in splits}
            log(f'  {label}: {len(seeds)} seeds x {len(splits)} splits in '
                f'{time.perf_counter() - start:.0f} s')
            rows.append({'method': label, 'setting': setting.describe(),
                         'epochs': candidate['epochs'],
                         'val_balanced': candidate['val_balanced'],
                         'splits': per_split})
        # Without validation classes: ESZSL's middle of the grid.
        dgpn_choice = None if select else (1.0, 1.0)
        eszsl = eszsl_nodes(nodes, csd, DGPN_INPUTS, splits, dgpn_choice)
        rows.append({'method': 'ESZSL (DGPN\'s inputs)',
                     'setting': f"gamma={eszsl['gamma']:g}, "
                     f"lambda={eszsl['lam']:g}", **eszsl})
        if select:
            sae = sae_nodes(nodes, csd, DGPN_INPUTS, splits)
            rows.append({'method': 'SAE (DGPN\'s inputs)',
                         'setting': f"lambda={sae['lam']:g}, "
                         f"space={sae['space']}", **sae})
            setting = candidates[0][1]['setting']
            eszsl = eszsl_nodes(nodes, csd, setting, splits)
            rows.append({'method': 'ESZSL (APNet\'s inputs)',
                         'setting': f"gamma={eszsl['gamma']:g}, "
                         f"lambda={eszsl['lam']:g}", **eszsl})
        floor = {name: row['splits'][name]['floor']
                 for row in rows[:1] for name in row['splits']}
        results['csds'][csd] = {
            'rows': rows, 'floor': floor,
            'selection': None if selection is None else [
                {'setting': r['setting'].describe(), 'epochs': r['epochs'],
                 'val_balanced': r['val_balanced'],
                 'val_std': r['val_std']} for r in selection['rows']],
            'published': PUBLISHED.get(nodes.name.lower(), {}).get(csd, {}),
        }
    return results


def _cell(summary: Optional[Dict[str, Any]], key: str) -> str:
    if summary is None:
        return ''
    text = f'{summary[key]:.2f}'
    if summary['seeds'] > 1:
        text += f' ± {summary[key + "_std"]:.2f}'
    return text


def format_nodes(results: Dict[str, Any]) -> str:
    r"""The tables of :func:`run_nodes`: for each CSD kind, accuracy and
    balanced accuracy (%) on the unseen classes' nodes for every split, the
    constant-predictor floor, and the published rows marked
    "published"."""
    names = list(results['splits'])
    lines = [f"{results['dataset']}: zero-shot node classification; "
             f"{'; '.join(results['splits'].values())}",
             f"choices: {results['selection']}",
             f"APNet: mean ± std over {len(results['seeds'])} seeds; "
             f"the baselines are closed-form (one fit)"]
    for csd, block in results['csds'].items():
        header = '| method | ' + ' | '.join(
            f'{name}: acc | {name}: balanced' for name in names) + \
            ' | chosen |'
        lines += ['', f'{csd.upper()}-CSDs', '', header,
                  '|' + '---|' * (2 * len(names) + 2)]
        for row in block['rows']:
            cells = []
            for name in names:
                summary = row['splits'].get(name)
                cells += [_cell(summary, 'acc'), _cell(summary, 'balanced')]
            note = row['setting']
            if 'epochs' in row:
                note = f"{row['epochs']} epochs, {note}"
            flags = [f"{name}: one class in {summary['one_class_seeds']}/"
                     f"{summary['seeds']} runs"
                     for name, summary in row['splits'].items()
                     if summary['one_class_seeds']]
            if flags:
                note += ' (PREDICTS ONE CLASS: ' + '; '.join(flags) + ')'
            lines.append(f"| {row['method']} | " + ' | '.join(cells) +
                         f' | {note} |')
        lines.append('| constant predictor (largest unseen class) | ' +
                     ' | '.join(f"{block['floor'][name]:.2f} | "
                                f"{100.0 / results['num_unseen'][name]:.2f}"
                                for name in names) + ' | |')
        for method in sorted({m for split in block['published'].values()
                              for m in split}):
            cells = []
            for name in names:
                figure = block['published'].get(name, {}).get(method)
                if figure is None:
                    cells += ['', '']
                else:
                    std = '' if figure[1] is None else f' ± {figure[1]:.2f}'
                    cells += [f'{figure[0]:.2f}{std}', '']
            if any(cells):
                lines.append(f'| {method} (published) | ' +
                             ' | '.join(cells) + f' | {PUBLISHED_SOURCE} |')
    return '\n'.join(lines)

