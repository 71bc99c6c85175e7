r"""What APNet for zero-shot node classification reads
(:mod:`apnet_pyg.zsl.nodes.protocol`): the choices of a variant
(:class:`NodeSetting`), the parameter-free node features and prepared
class descriptions they prescribe, and :class:`NodeTask`, which presents
one dataset, class split and CSD kind to the training loop.
"""

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Optional, Tuple

import torch
from torch import Tensor

from apnet_pyg.data.xlsa17 import ZSLDataset
from apnet_pyg.data.zero_shot_nodes import ClassSplit, ZeroShotNodes
from apnet_pyg.nn.conv.apnet_conv import APNetConv
from apnet_pyg.zsl.config import TrainConfig

#: How node features enter (see :mod:`apnet_pyg.zsl.nodes.protocol`).
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
#: The classes a seen node is scored against in training: :obj:`"seen"`,
#: its episode's seen classes; :obj:`"all"`, also every other class's
#: description (validation and unseen classes as wrong answers: DGPN's
#: training, which reads their descriptions, never their nodes or labels).
CANDIDATES = ('seen', 'all')
#: How features are scaled first: :obj:`"row"` divides each node's
#: features by their sum (DGPN), :obj:`"raw"` keeps them.
FEATURE_SCALINGS = ('row', 'raw')
#: How class descriptions are prepared: :obj:`"l2"` unit rows (DGPN),
#: :obj:`"center"` minus the mean of all classes' descriptions, then unit
#: rows, :obj:`"whiten"` centred and whitened in their own span (PCA), then
#: unit rows. Centring and whitening read every class's description (side
#: information of the task), never a label.
DESCRIPTION_PREPARATIONS = ('l2', 'center', 'whiten')

#: How the calibrated score matrix of every node is smoothed over the node
#: graph before the argmax (transductive, label-free; see
#: :mod:`apnet_pyg.zsl.nodes.scores`): :obj:`"none"`, :obj:`"mean"` (the
#: mean over a node and its neighbours, :obj:`smoothing_steps` times) or
#: :obj:`"attention"` (that mean weighted by the
#: :class:`~apnet_pyg.nn.APNetConv` attention over the node features at
#: :obj:`smoothing_temperature`).
SMOOTHINGS = ('none', 'mean', 'attention')

#: How the scores of the nodes a task classifies are finally read
#: (transductive, label-free; see
#: :class:`~apnet_pyg.zsl.nodes.scores.PrototypeRefiner`): :obj:`"none"`,
#: or :obj:`"prototypes"`: every candidate class's prototype seeded by the
#: nodes it scores highest, refined by k-means over those nodes' features,
#: each node scored by its cosine to every prototype; or
#: :obj:`"clusters"`: k-means clusters of those nodes found without the
#: scores, each given one class by the scores (a different class each).
REFINEMENTS = ('none', 'prototypes', 'clusters')

#: Where the choices are made: :obj:`"split"`, on Split II's validation
#: classes (trained on its seen classes); :obj:`"folds"`, by class-level
#: cross-validation over Split II's seen and validation classes
#: (:func:`~apnet_pyg.zsl.nodes.protocol.selection_folds`: every way to
#: train on as many of them as Split II has seen classes and hold out the
#: rest), the mean over the folds. Neither reads a label of the unseen classes.
SELECTIONS = ('split', 'folds')


def default_config() -> TrainConfig:
    r"""APNet's configuration for nodes, fixed in advance: the paper's
    model at a smaller width (a few thousand nodes, not 37,322 images), 2
    centroid experts (Split II has 2 seen classes), PyTorch's
    initialisation (standardising the experts over 2 seen classes blows
    up the directions they do not span), no class graph (the learned one
    joins the nearly parallel descriptions: see
    :func:`~apnet_pyg.zsl.nodes.selection.selection_grid`; a k-NN graph,
    where a setting asks for one, over every class, as DBiGCN's: a task's
    2 or 3 seen classes are too few to have neighbours among),
    episodes of all seen classes with 32 nodes each, 25 episodes an epoch,
    Adam at 1e-4, and the epoch count chosen on validation (up to
    :obj:`epochs`)."""
    return TrainConfig(
        graph='none',
        knn_classes='all',
        num_centroids=2,
        class_channels=256,
        hidden_channels=256,
        proj_channels=128,
        n_way=30,
        k_shot=32,
        lr=1e-4,
        weight_decay=1e-4,
        epochs=30,
        lr_decay_epoch=None,
        iterations_per_epoch=25,
        model_selection='none',
        initialization='pytorch',
    )


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
        candidates (str): :data:`CANDIDATES`. (default: :obj:`"seen"`)
        smoothing (str): :data:`SMOOTHINGS`. (default: :obj:`"none"`)
        smoothing_steps (int): :math:`K` of the smoothing.
            (default: :obj:`16`)
        smoothing_temperature (float): :math:`\gamma` of
            :obj:`"attention"` smoothing. (default: :obj:`1.0`)
        ensemble (int): Models (seeds) whose calibrated scores are
            averaged. (default: :obj:`1`)
        refinement (str): :data:`REFINEMENTS`. (default: :obj:`"none"`)
        config (TrainConfig): (default: :func:`default_config`)

    The last five change how a trained model's scores are read, not its
    training (:meth:`training_key`).
    """

    propagation: str = 'mean'
    hops: int = 2
    temperature: float = 10.0
    scoring: str = 'hops'
    calibration: str = 'center'
    features: str = 'row'
    descriptions: str = 'center'
    candidates: str = 'seen'
    smoothing: str = 'none'
    smoothing_steps: int = 16
    smoothing_temperature: float = 1.0
    ensemble: int = 1
    refinement: str = 'none'
    config: TrainConfig = field(default_factory=default_config)

    def __post_init__(self):
        for name, choices in (
            ('propagation', PROPAGATIONS),
            ('scoring', SCORINGS),
            ('calibration', CALIBRATIONS),
            ('features', FEATURE_SCALINGS),
            ('descriptions', DESCRIPTION_PREPARATIONS),
            ('candidates', CANDIDATES),
            ('smoothing', SMOOTHINGS),
            ('refinement', REFINEMENTS),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"'{name}' must be one of "
                    f'{", ".join(choices)} (got '
                    f'{getattr(self, name)!r})'
                )
        for name in ('hops', 'smoothing_steps', 'ensemble'):
            value = getattr(self, name)
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < 1
            ):
                raise ValueError(
                    f"'{name}' must be a positive integer (got {value!r})"
                )
        if self.scoring == 'hops' and self.propagation == 'none':
            raise ValueError(
                "'scoring'='hops' needs a propagation (got "
                "propagation='none'): use scoring='single'"
            )
        for name in ('temperature', 'smoothing_temperature'):
            if not getattr(self, name) >= 0:
                raise ValueError(
                    f"'{name}' must be >= 0 (got {getattr(self, name)!r})"
                )
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
        elif graph == 'knn':
            graph += (
                f' (k={c.knn_k}, '
                + ('self-loops' if c.knn_loop else 'no self-loop')
                + f', over the {c.knn_space} of '
                + ('every class' if c.knn_classes == 'all' else "the task's")
                + ')'
            )
        if graph != 'none' and c.learn_propagation_temperature:
            graph += f', gamma1 learned from {c.propagation_temperature:g}'
        # The paper's additive head is not named, as before the choice.
        head = (
            ''
            if c.interaction == 'additive'
            else f', interaction={c.interaction}'
        )
        return (
            f'{nodes}, features={self.features}, descriptions='
            f'{self.descriptions}, graph={graph}, training='
            f'{c.training}, candidates={self.candidates}, k_shot='
            f'{c.k_shot}, lr={c.lr:g}, score={c.score}{head}, '
            f'logit_scale={c.logit_scale:g}{self.describe_reading()}'
        )

    def describe_reading(self) -> str:
        r"""How the scores are read (smoothing, ensemble, refinement), as
        :meth:`describe` ends; empty for none of them."""
        out = ''
        if self.smoothing == 'mean':
            out += f', scores smoothed: mean x {self.smoothing_steps}'
        elif self.smoothing == 'attention':
            out += (
                f', scores smoothed: attention (gamma='
                f'{self.smoothing_temperature:g}) x {self.smoothing_steps}'
            )
        if self.ensemble > 1:
            out += f', ensemble of {self.ensemble} seeds'
        if self.refinement == 'prototypes':
            out += ', prototypes refined (k-means over the nodes scored)'
        elif self.refinement == 'clusters':
            out += (
                ', clusters named (k-means over the nodes scored, a class '
                'each)'
            )
        return out

    def key(self) -> Tuple:
        return self.training_key() + (
            self.smoothing,
            self.smoothing_steps,
            self.smoothing_temperature,
            self.ensemble,
            self.refinement,
        )

    def training_key(self) -> Tuple:
        r"""What determines the trained models (not how their scores are
        read): settings of one key share their training runs."""
        return (
            self.propagation,
            self.hops,
            self.temperature,
            self.scoring,
            self.calibration,
            self.features,
            self.descriptions,
            self.candidates,
            tuple(
                sorted(
                    self.config.replace(seed=0).to_dict().items(),
                    key=lambda item: item[0],
                )
            ),
        )


def scale_features(x: Tensor, scaling: str) -> Tensor:
    r"""Node features scaled by :obj:`scaling` (:data:`FEATURE_SCALINGS`);
    a node without any feature stays zero."""
    if scaling not in FEATURE_SCALINGS:
        raise ValueError(
            f"'features' must be one of "
            f'{", ".join(FEATURE_SCALINGS)} (got {scaling!r})'
        )
    x = x.float()
    if scaling == 'raw':
        return x
    total = x.sum(dim=1, keepdim=True)
    return torch.where(
        total != 0,
        x / torch.where(total != 0, total, 1.0),
        torch.zeros_like(x),
    )


@torch.no_grad()
def propagate_features(
    x: Tensor,
    edge_index: Tensor,
    propagation: str,
    hops: int = 2,
    temperature: float = 10.0,
) -> Tensor:
    r"""The node features after the parameter-free propagation
    :obj:`propagation` (:data:`PROPAGATIONS`) over :obj:`edge_index`: an
    :class:`~apnet_pyg.nn.APNetConv` with the identity projection, the
    temperature 0 (:obj:`"mean"`) or :obj:`temperature`
    (:obj:`"attention"`) and :obj:`hops` steps, self-loops added."""
    if propagation not in PROPAGATIONS:
        raise ValueError(
            f"'propagation' must be one of "
            f'{", ".join(PROPAGATIONS)} (got {propagation!r})'
        )
    if propagation == 'none':
        return x
    conv = APNetConv(
        x.size(1),
        proj_channels=None,
        temperature=0.0 if propagation == 'mean' else temperature,
        learn_temperature=False,
        num_steps=hops,
        learn_step_weights=False,
        teleport=None,
    )
    return conv(x, edge_index)


@torch.no_grad()
def hop_features(
    x: Tensor,
    edge_index: Tensor,
    propagation: str,
    hops: int = 2,
    temperature: float = 10.0,
) -> Tensor:
    r"""The node features after each of :math:`0, \ldots, K`
    (:obj:`hops`) steps of the propagation :obj:`propagation` (as
    :func:`propagate_features`), stacked: shape
    :obj:`[K + 1, num_nodes, num_features]`, index :math:`k` the features
    after :math:`k` steps."""
    if propagation not in PROPAGATIONS or propagation == 'none':
        raise ValueError(
            f"'propagation' must be one of "
            f'{", ".join(PROPAGATIONS[1:])} to score at several '
            f'hops (got {propagation!r})'
        )
    out = [x]
    for _ in range(hops):
        out.append(
            propagate_features(
                out[-1], edge_index, propagation, 1, temperature
            )
        )
    return torch.stack(out)


def prepare_descriptions(descriptions: Tensor, preparation: str) -> Tensor:
    r"""The class descriptions :math:`(C, D)` prepared by
    :obj:`preparation` (:data:`DESCRIPTION_PREPARATIONS`); whitening maps
    them to :math:`C - 1` dimensions (their centred span)."""
    if preparation not in DESCRIPTION_PREPARATIONS:
        raise ValueError(
            f"'descriptions' must be one of "
            f'{", ".join(DESCRIPTION_PREPARATIONS)} (got '
            f'{preparation!r})'
        )
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
    images: :obj:`trainval_loc` the seen classes' nodes but
    :obj:`held_out`'s,
    :obj:`test_unseen_loc` the unseen classes', :obj:`val_classes` the
    split's validation classes). With :obj:`scoring="hops"` the dataset
    holds :math:`K + 1` copies of the nodes, copy :math:`k` with the
    features after :math:`k` steps (image :math:`kN + i` is node
    :math:`i` at hop :math:`k`), and training draws from every copy of
    the seen classes' nodes; :obj:`seen_nodes`, :obj:`val_nodes` and
    :obj:`unseen_nodes` are node ids (hop 0)."""

    def __init__(
        self,
        nodes: ZeroShotNodes,
        split: ClassSplit,
        csd: str,
        setting: NodeSetting,
        features: Optional[Tensor] = None,
        held_out: Optional[Tensor] = None,
    ):
        self.nodes, self.split, self.csd, self.setting = (
            nodes,
            split,
            csd,
            setting,
        )
        y = nodes.data.y
        if features is None:
            features = node_features(nodes, setting)
        self.features = features
        num_nodes = y.numel()
        self.num_hops = features.size(0) // num_nodes
        if features.size(0) != self.num_hops * num_nodes:
            raise ValueError(
                f"'features' must have a row per node and hop "
                f'(got {features.size(0)} rows for '
                f'{num_nodes} nodes)'
            )
        self.descriptions = prepare_descriptions(
            nodes.description(csd), setting.descriptions
        )
        self.seen_nodes = _nodes_of(y, split.seen)
        if held_out is not None:
            # Never trained on: generalized zero-shot's seen test nodes.
            self.seen_nodes = self.seen_nodes[
                ~torch.isin(self.seen_nodes, held_out)
            ]
        self.val_nodes = _nodes_of(y, split.val)
        self.unseen_nodes = _nodes_of(y, split.unseen)
        for role, index in (
            ('seen', self.seen_nodes),
            ('unseen', self.unseen_nodes),
        ):
            if index.numel() == 0:
                raise ValueError(
                    f'no node of the {role} classes in '
                    f"{nodes.name}'s group.txt"
                )
        empty = torch.zeros(0, dtype=torch.long)
        self.dataset = ZSLDataset(
            name=nodes.name,
            class_names=list(nodes.class_names),
            attributes=self.descriptions,
            features=features,
            labels=y.repeat(self.num_hops),
            trainval_loc=self.hop_index(self.seen_nodes),
            test_seen_loc=empty,
            test_unseen_loc=self.unseen_nodes,
            train_loc=None,
            val_loc=None,
            seen_classes=split.seen,
            unseen_classes=split.unseen,
            train_classes=split.seen,
            val_classes=split.val if split.val.numel() else None,
        )

    @property
    def propagated_features(self) -> Tensor:
        r"""The node features after all of the setting's propagation
        steps (the last hop), a row per node."""
        num_nodes = self.nodes.data.y.numel()
        return self.features.view(self.num_hops, num_nodes, -1)[-1]

    def hop_index(self, index: Tensor) -> Tensor:
        r"""The dataset's images of nodes :obj:`index` at every hop, hop
        by hop."""
        num_nodes = self.nodes.data.y.numel()
        return torch.cat([index + k * num_nodes for k in range(self.num_hops)])


def node_features(nodes: ZeroShotNodes, setting: NodeSetting) -> Tensor:
    r"""The node features of :obj:`setting`: scaled, then propagated
    (with :obj:`scoring="hops"`, the features at every hop, hop by hop:
    :obj:`[(K + 1) N, F]`)."""
    if setting.scoring == 'hops':
        return hop_features(
            scale_features(nodes.data.x, setting.features),
            nodes.data.edge_index,
            setting.propagation,
            setting.hops,
            setting.temperature,
        ).flatten(0, 1)
    return propagate_features(
        scale_features(nodes.data.x, setting.features),
        nodes.data.edge_index,
        setting.propagation,
        setting.hops,
        setting.temperature,
    )


def _nodes_of(y: Tensor, classes: Tensor) -> Tensor:
    return torch.isin(y, classes).nonzero().view(-1)
