r"""The scores of zero-shot node classification
(:mod:`apnet_pyg.zsl.nodes.protocol`): a trained APNet's logits of every
node at every hop, calibrated and averaged (:class:`NodeScores`), then,
transductively and without a label, smoothed over the node graph
(:class:`ScoreSmoother`) and averaged over the models of a seed ensemble
(:func:`setting_scores`); last, the scores of the nodes a task classifies
may be refined into prototypes of their classes
(:class:`PrototypeRefiner`, :func:`evaluated_scores`).

Smoothing is label propagation of the scores, not of labels: the unseen
classes' score matrix :math:`\mathbf{S}` (every node of the graph against
the candidate classes) becomes :math:`\mathbf{P}^K \mathbf{S}`, with
:math:`\mathbf{P}` one step of :class:`~apnet_pyg.nn.APNetConv` over the
node graph (self-loops added): the mean over a node and its neighbours
(:obj:`"mean"`, temperature 0), or their mean weighted by
:math:`\exp(\gamma \cos(\mathbf{x}_i, \mathbf{x}_j))` of the node features
(:obj:`"attention"`). On a homophilic graph a node's neighbours mostly
share its class, so their scores vote with its own.
"""

import math
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from apnet_pyg.nn.conv.apnet_conv import APNetConv
from apnet_pyg.zsl.evaluate import apnet_score_fn
from apnet_pyg.zsl.nodes.inputs import (
    REFINEMENTS,
    SMOOTHINGS,
    NodeSetting,
    NodeTask,
)


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


class NodeScores:
    r"""The scores of :obj:`task`'s nodes against classes by
    :obj:`model`: the APNet logits at every hop of the task, calibrated by
    the setting's :obj:`calibration` and averaged
    (:func:`combine_hop_scores`); a :obj:`score_fn` of node ids."""

    def __init__(self, model, task: NodeTask):
        self.task = task
        self.apnet = apnet_score_fn(model, task.dataset)
        self.num_nodes = task.nodes.data.y.numel()

    def _per_hop(self, index: Tensor, classes: Tensor) -> Tensor:
        scores = self.apnet(self.task.hop_index(index), classes)
        return scores.view(self.task.num_hops, index.numel(), -1)

    def every_node(self, classes: Tensor) -> Tensor:
        r"""The calibrated scores :math:`(N, C)` of every node of the
        graph against :obj:`classes`."""
        every = self._per_hop(torch.arange(self.num_nodes), classes)
        offsets = scales = None
        calibration = self.task.setting.calibration
        if calibration != 'none':
            offsets = every.mean(dim=1)
            if calibration == 'standardize':
                # A class scored alike everywhere keeps its centred
                # scores (all zero).
                scales = every.std(dim=1).clamp_min(1e-12)
        return combine_hop_scores(every, offsets, scales)

    def __call__(self, index: Tensor, classes: Tensor) -> Tensor:
        return self.every_node(classes)[index]


class ScoreSmoother:
    r"""Smooths score matrices over a graph of :obj:`num_nodes` nodes
    (:obj:`edge_index`, both directions), by the module docstring's
    :math:`\mathbf{P}^K`: :math:`\mathbf{P}` is the attention of one
    :class:`~apnet_pyg.nn.APNetConv` step (identity projection,
    self-loops) over :obj:`features` (a row per node) at the temperature
    asked for (0 for :obj:`"mean"`), built once per temperature and
    applied :math:`K` times as a sparse matrix (:meth:`__call__`)."""

    def __init__(self, edge_index: Tensor, features: Tensor):
        self.edge_index, self.features = edge_index, features.float()
        self.num_nodes = features.size(0)
        self._matrices: Dict[float, Tensor] = {}

    def matrix(self, smoothing: str, temperature: float = 1.0) -> Tensor:
        r"""The row-stochastic sparse :math:`\mathbf{P}` :math:`(N, N)`
        (row = target node) of :obj:`smoothing` (:obj:`"mean"` or
        :obj:`"attention"` at :obj:`temperature`)."""
        if smoothing not in SMOOTHINGS[1:]:
            raise ValueError(
                f"'smoothing' must be one of "
                f'{", ".join(SMOOTHINGS[1:])} to build a matrix '
                f'(got {smoothing!r})'
            )
        temperature = 0.0 if smoothing == 'mean' else float(temperature)
        if temperature not in self._matrices:
            conv = APNetConv(
                self.features.size(1),
                proj_channels=None,
                temperature=temperature,
                learn_temperature=False,
                num_steps=1,
                learn_step_weights=False,
                teleport=None,
            )
            with torch.no_grad():
                _, (index, weight) = conv(
                    self.features,
                    self.edge_index,
                    return_attention_weights=True,
                )
            self._matrices[temperature] = torch.sparse_coo_tensor(
                index.flip(0),
                weight.view(-1),
                (self.num_nodes, self.num_nodes),
                check_invariants=True,
            ).to_sparse_csr()
        return self._matrices[temperature]

    @torch.no_grad()
    def at_steps(
        self,
        scores: Tensor,
        smoothing: str,
        steps: Sequence[int],
        temperature: float = 1.0,
    ) -> Dict[int, Tensor]:
        r"""The :obj:`scores` :math:`(N, \ldots)` smoothed by
        :obj:`smoothing` for each count of :obj:`steps` (one pass for all:
        the smoothing of :math:`K_2` steps continues that of
        :math:`K_1 < K_2`); :obj:`"none"` returns them unchanged."""
        if smoothing == 'none':
            return {k: scores for k in steps}
        if scores.size(0) != self.num_nodes:
            raise ValueError(
                f"'scores' must have a row per node ({self.num_nodes}; "
                f'got {scores.size(0)})'
            )
        matrix = self.matrix(smoothing, temperature)
        shape = scores.shape
        h = scores.reshape(self.num_nodes, -1).float()
        out, done = {}, 0
        for k in sorted(set(steps)):
            for _ in range(k - done):
                h = torch.sparse.mm(matrix, h)
            done = k
            out[k] = h.view(shape).to(scores.dtype)
        return out

    def __call__(
        self,
        scores: Tensor,
        smoothing: str,
        steps: int,
        temperature: float = 1.0,
    ) -> Tensor:
        return self.at_steps(scores, smoothing, [steps], temperature)[steps]


def ensembles(num_models: int, size: int) -> Tuple[Tuple[int, ...], ...]:
    r"""The seed ensembles of :obj:`size` models made of
    :obj:`num_models` trained models: consecutive, disjoint groups
    (models :math:`0..S-1`, :math:`S..2S-1`, ...); the models left over
    belong to none. At least one ensemble: :obj:`size` at most
    :obj:`num_models`."""
    if not 1 <= size <= num_models:
        raise ValueError(
            f'an ensemble of {size} models needs at least {size} '
            f'trained models (got {num_models})'
        )
    return tuple(
        tuple(range(start, start + size))
        for start in range(0, num_models - size + 1, size)
    )


def read_scores(
    model_scores: Tensor,
    ensemble: int,
    smoother: ScoreSmoother,
    smoothing: str,
    steps: Sequence[int],
    temperature: float = 1.0,
) -> Dict[int, Tensor]:
    r"""Reads the calibrated scores of :math:`M` trained models,
    :obj:`model_scores` :math:`(M, \ldots, N, C)` (any dimensions between
    the models and the nodes, e.g. epochs), as seed ensembles of
    :obj:`ensemble` models (:func:`ensembles`: their mean) smoothed by
    :obj:`smoothing` for each count of :obj:`steps`.

    Returns:
        dict: By step count, the scores :math:`(G, \ldots, N, C)` of the
        :math:`G = \lfloor M / S \rfloor` ensembles.
    """
    groups = ensembles(model_scores.size(0), ensemble)
    means = torch.stack([model_scores[list(g)].mean(dim=0) for g in groups])
    # Nodes first for the sparse product, every other dimension a column.
    by_node = means.movedim(-2, 0)
    smoothed = smoother.at_steps(by_node, smoothing, steps, temperature)
    return {k: value.movedim(0, -2) for k, value in smoothed.items()}


def setting_scores(
    model_scores: Tensor, setting: NodeSetting, smoother: ScoreSmoother
) -> Tensor:
    r"""The scores of the seed ensembles of :obj:`setting`
    (:obj:`setting.ensemble` models each, smoothed as it says) from the
    calibrated scores of its trained models, :obj:`model_scores`
    :math:`(M, \ldots, N, C)`: :func:`read_scores` at the setting's
    step count."""
    steps = setting.smoothing_steps
    return read_scores(
        model_scores,
        setting.ensemble,
        smoother,
        setting.smoothing,
        [steps],
        setting.smoothing_temperature,
    )[steps]


#: The most k-means steps of :class:`PrototypeRefiner` (it stops earlier
#: once no node changes its class).
PROTOTYPE_STEPS = 20


class PrototypeRefiner:
    r"""Refines the zero-shot scores of the :math:`n` nodes a task
    classifies into prototypes of the candidate classes, transductively
    and without a label: structured prediction for zero-shot learning
    (Zhang and Saligrama, ECCV 2016). The nodes of the unseen classes form
    clusters in feature space; the zero-shot scores only have to name
    them.

    With :math:`\mathbf{z}_i` node :math:`i`'s :obj:`features` centred
    over the :math:`n` nodes and scaled to unit length, class :math:`c`'s
    prototype starts as the normalised mean of the :math:`\lceil n / 2C
    \rceil` nodes of highest score :math:`s_{ic}` (a ranking within the
    class's column, which its calibration offset cannot change; half the
    nodes a class would have if the :math:`C` classes were equal), then
    k-means with the cosine: every node joins its most similar prototype,
    every prototype becomes the normalised mean of its nodes (a prototype
    left without a node stays), at most :obj:`steps` times. The refined
    score of node :math:`i` for class :math:`c` is
    :math:`\cos(\mathbf{z}_i, \mathbf{p}_c)`.

    :meth:`name_clusters` instead names clusters found without the
    scores: k-means with the cosine into :math:`C` clusters (k-means++
    starts drawn with a fixed seed, the best of :data:`CLUSTER_RESTARTS`
    by the summed cosine to the centres), then every cluster is given
    one class, a different class each (the assignment of highest total
    affinity, Hungarian), a cluster's affinity to class :math:`c` being
    its nodes' mean rank in class :math:`c`'s column of the scores (a
    ranking, which a calibration offset cannot change). The seeded
    prototypes can fall into one cluster when the columns of the scores
    rank the same nodes first, and a class then loses every node; named
    clusters give every class one.

    Args:
        features (Tensor): The features of the :math:`n` nodes, one row
            each (e.g. :attr:`NodeTask.propagated_features` of them).
        steps (int): The most k-means steps. (default:
            :data:`PROTOTYPE_STEPS`)
    """

    def __init__(self, features: Tensor, steps: int = PROTOTYPE_STEPS):
        if features.dim() != 2 or features.size(0) == 0:
            raise ValueError(
                "'features' must be [nodes, channels] with at least one "
                f'node (got shape {tuple(features.shape)})'
            )
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(
                f"'steps' must be a positive integer (got {steps!r})"
            )
        self.features, self.steps = features, steps
        self._z: Optional[Tensor] = None
        self._cluster_cosines: Dict[int, Tensor] = {}

    @property
    def z(self) -> Tensor:
        r"""The features centred over the nodes and scaled to unit
        length, made at the first refinement (a protocol builds a refiner
        for every task, whether or not a reading refines)."""
        if self._z is None:
            z = self.features.float()
            self._z = F.normalize(z - z.mean(dim=0), dim=1)
        return self._z

    def check_scores(self, scores: Tensor) -> None:
        r"""Refuses scores that are not :math:`(n, C)` for the :math:`n`
        nodes of :obj:`features`."""
        if scores.dim() != 2 or scores.size(0) != self.features.size(0):
            raise ValueError(
                f"'scores' must be [{self.features.size(0)} nodes, "
                f'classes] (got shape {tuple(scores.shape)})'
            )

    @torch.no_grad()
    def __call__(self, scores: Tensor) -> Tensor:
        r"""The refined scores :math:`(n, C)` of the scores
        :obj:`scores` :math:`(n, C)` of the same nodes."""
        self.check_scores(scores)
        num_classes = scores.size(1)
        top = math.ceil(scores.size(0) / (2 * num_classes))
        first = scores.topk(top, dim=0).indices  # [top, C]
        prototypes = F.normalize(self.z[first].mean(dim=0), dim=1)
        prototypes = cosine_kmeans(self.z, prototypes, self.steps)
        return (self.z @ prototypes.T).to(scores.dtype)

    def cluster_cosines(self, num_clusters: int) -> Tensor:
        r"""Every node's cosine :math:`(n, K)` to the :obj:`num_clusters`
        centres of k-means with the cosine over the nodes (found once for
        each count: they do not depend on the scores)."""
        if num_clusters not in self._cluster_cosines:
            centres = spherical_kmeans(self.z, num_clusters, self.steps)
            self._cluster_cosines[num_clusters] = self.z @ centres.T
        return self._cluster_cosines[num_clusters]

    @torch.no_grad()
    def name_clusters(self, scores: Tensor) -> Tensor:
        r"""The scores :math:`(n, C)` of the nodes as clusters named by
        :obj:`scores` :math:`(n, C)`: node :math:`i`'s cosine to the
        centre of the cluster given class :math:`c`."""
        self.check_scores(scores)
        num_classes = scores.size(1)
        cosines = self.cluster_cosines(num_classes)
        cluster = cosines.argmax(dim=1)
        # Ranks within each class's column: 0 the lowest score, 1 the top.
        ranks = scores.float().argsort(dim=0).argsort(dim=0).float()
        ranks = ranks / max(scores.size(0) - 1, 1)
        members = F.one_hot(cluster, num_classes).float()
        affinity = (members.T @ ranks) / members.sum(0).clamp(min=1)[:, None]
        clusters, classes = linear_sum_assignment(
            affinity.cpu().numpy(), maximize=True
        )
        order = torch.empty(num_classes, dtype=torch.long)
        order[torch.as_tensor(classes)] = torch.as_tensor(clusters)
        return cosines[:, order.to(cosines.device)].to(scores.dtype)


def cosine_kmeans(z: Tensor, centres: Tensor, steps: int) -> Tensor:
    r"""k-means with the cosine over the unit-length rows of :obj:`z`
    from :obj:`centres` (unit length): every row joins its most similar
    centre, every centre becomes the normalised mean of its rows (a centre
    left without a row stays), at most :obj:`steps` times, fewer once no
    row changes its centre; the centres."""
    assignment = None
    for _ in range(steps):
        nearest = (z @ centres.T).argmax(dim=1)
        if assignment is not None and torch.equal(nearest, assignment):
            break
        assignment = nearest
        members = F.one_hot(nearest, centres.size(0)).to(z.dtype)
        filled = (members.sum(dim=0) > 0).unsqueeze(1)
        centres = torch.where(
            filled, F.normalize(members.T @ z, dim=1), centres
        )
    return centres


#: The k-means++ restarts of :func:`spherical_kmeans` (the best
#: by the summed cosine of the nodes to their centres is kept).
CLUSTER_RESTARTS = 10


def spherical_kmeans(
    z: Tensor, num_clusters: int, steps: int, restarts: int = CLUSTER_RESTARTS
) -> Tensor:
    r"""The :obj:`num_clusters` unit-length centres of k-means with the
    cosine over the unit-length rows of :obj:`z`: k-means++ starts from a
    generator of fixed seed (the same centres every call), then
    :func:`cosine_kmeans` for at most :obj:`steps` steps, the best of
    :obj:`restarts` by the summed cosine of the rows to their centres."""
    if not 1 <= num_clusters <= z.size(0):
        raise ValueError(
            f"'num_clusters' must be between 1 and the {z.size(0)} rows "
            f'(got {num_clusters})'
        )
    generator = torch.Generator().manual_seed(0)
    best, best_fit = None, -math.inf
    for _ in range(restarts):
        first = int(torch.randint(z.size(0), (1,), generator=generator))
        centres = z[first : first + 1]
        while centres.size(0) < num_clusters:
            # k-means++: the next start is drawn in proportion to the
            # squared distance to the nearest start (2 - 2 cos).
            distance = (2 - 2 * (z @ centres.T).max(dim=1).values).clamp(0)
            if float(distance.sum()) == 0:
                distance = torch.ones_like(distance)
            index = torch.multinomial(distance, 1, generator=generator)
            centres = torch.cat([centres, z[index]])
        centres = cosine_kmeans(z, centres, steps)
        fit = float((z @ centres.T).max(dim=1).values.sum())
        if fit > best_fit:
            best, best_fit = centres, fit
    return best


def evaluated_scores(
    scores: Tensor,
    index: Tensor,
    refinement: str = 'none',
    refiner: Optional[PrototypeRefiner] = None,
) -> Tensor:
    r"""The scores :math:`(n, C)` of the nodes :obj:`index` a task
    classifies, from the score matrix :obj:`scores` :math:`(N, C)` of
    every node, read as :obj:`refinement` (:data:`REFINEMENTS`) says:
    as they are, or refined by :obj:`refiner` (built on the same nodes'
    features)."""
    if refinement not in REFINEMENTS:
        raise ValueError(
            f"'refinement' must be one of {', '.join(REFINEMENTS)} "
            f'(got {refinement!r})'
        )
    out = scores[index]
    if refinement != 'none' and refiner is None:
        raise ValueError(
            f"refinement={refinement!r} needs a 'refiner' (a "
            'PrototypeRefiner of the same nodes)'
        )
    if refinement == 'prototypes':
        out = refiner(out)
    elif refinement == 'clusters':
        out = refiner.name_clusters(out)
    return out
