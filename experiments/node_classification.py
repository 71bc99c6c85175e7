"""APNetConv as a drop-in layer on real graphs, homophilic and
heterophilic, next to PyG's AGNNConv, GATConv and an MLP.

The model is PyG's AGNN example (``examples/agnn.py`` in PyG): dropout 0.5,
Linear(F, 16), ReLU, two propagation layers, dropout 0.5, Linear(16, C);
Adam (lr 0.01, weight decay 5e-4), 200 epochs, the test accuracy at the
epoch of best validation accuracy. Only the two propagation layers change:

- ``MLP``: none (the identity);
- ``AGNNConv``: ``AGNNConv(requires_grad=False)`` then
  ``AGNNConv(requires_grad=True)``, as in PyG's example;
- ``GATConv``: ``GATConv(16, 16)`` twice (one head);
- ``APNetConv``: ``APNetConv(16)`` twice, the constructor defaults;
- ``APNetConv (learned weights)``: ``APNetConv(16,
  learn_step_weights=True, teleport=0.8)``, the step weights learned from
  mostly the node's own features (what ``docs/operator.md`` suggests for a
  graph with many labels);
- ``APNetConv (paper)``: ``APNetConv(16, proj_channels=256,
  temperature=10.0, learn_temperature=False, num_steps=1,
  learn_step_weights=False, teleport=None)``, the APNet paper's
  configuration.

Graphs are named as PyG names them and read offline from the raw files of
PyG's datasets: the Planetoid graphs (Cora, CiteSeer, PubMed) from
``--planetoid-root`` (``<root>/<Name>/raw/ind.<name>.*``), public split,
features row-normalised as in PyG's AGNN example, one run per seed (named
with ``-random``, e.g. ``Cora-random``: PyG's random splits, one a run);
the Geom-GCN graphs (Cornell, Texas, Wisconsin: PyG's ``WebKB``; Actor) from
``--geom-gcn-root`` (``<root>/<name>/raw``, copied to a temporary folder,
where PyG writes its processed copy), features as PyG reads them, one run
per public split (60/20/20, seed = split). Synthetic graphs, named
``cSBM:<phi>``, are contextual stochastic block models (:func:`csbm`, two
classes, 2,000 nodes, 200 Gaussian features) of homophily ``phi`` from -1
(every edge across the classes) to 1 (every edge within one), on random
60/20/20 splits, or with ``-random`` on 20 training nodes a class, 500
validation and 1,000 test nodes: the held-out check of
``node-classification-csbm.md``, never searched on. Every run is kept in a
record (JSON lines), so an interrupted run resumes and the page is rendered
from the record; a recorded run is reused only while its layers (their
``repr``) and its graph and split (a digest of them) are the same.

    python experiments/node_classification.py            # the table
    python experiments/node_classification.py --search   # choose the defaults
    python experiments/node_classification.py --search --threads 1 \\
        --workers 2                                       # two runs at a time
    python experiments/node_classification.py --audit    # after the choice
    python experiments/node_classification.py --graphs CiteSeer Wisconsin \\
        --out /tmp/held-out.md                            # other graphs
    python experiments/node_classification.py --graphs cSBM:-0.75 \\
        cSBM:-0.25 cSBM:0.25 cSBM:0.75 cSBM:-0.75-random cSBM:-0.25-random \\
        cSBM:0.25-random cSBM:0.75-random \\
        --out experiments/node-classification-csbm.md     # synthetic graphs

``--search`` is how APNetConv's constructor defaults were chosen: every
configuration of :data:`SEARCH_GRID` on every graph and split, ranked by
the gaps between its mean validation accuracy and the better of
AGNNConv's and GATConv's (the same runs): first the configurations that
lose on no graph, by their mean gap, then the others by their worst gap;
it never computes a test accuracy.

``--audit`` comes after that choice and chooses nothing: the search's
configurations again, on the table's graphs (all with test nodes),
reading test accuracy too, to show how far validation accuracy
predicts test accuracy among them (:func:`render_audit`).
"""

import argparse
import datetime
import hashlib
import inspect
import json
import math
import multiprocessing
import os.path as osp
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.data import Data
from torch_geometric.datasets import Actor, WebKB
from torch_geometric.nn import AGNNConv, GATConv

from apnet_pyg.data.planetoid import read_raw_planetoid
from apnet_pyg.files import atomic_write_text, check_output_file
from apnet_pyg.nn import APNetConv
from apnet_pyg.scripting import map_in_workers, run_script

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
SHARED = osp.join(ROOT, '..', 'shared', 'data')
HERE = osp.join(ROOT, 'experiments')
TABLE_OUT = osp.join(HERE, 'node-classification.md')
CSBM_OUT = osp.join(HERE, 'node-classification-csbm.md')
SEARCH_OUT = osp.join(HERE, 'node-classification-search.md')
AUDIT_OUT = osp.join(HERE, 'node-classification-audit.md')
HIDDEN = 16
EPOCHS = 200

PLANETOID = ('Cora', 'CiteSeer', 'PubMed')
WEBKB = ('Cornell', 'Texas', 'Wisconsin')
GEOM_GCN = WEBKB + ('Actor',)
#: A Planetoid graph's name with this suffix: PyG's random splits
#: (``Planetoid(split='random')``: 20 training nodes a class, 500
#: validation and 1000 test nodes drawn from the rest), one a run.
RANDOM = '-random'
#: A Planetoid graph's name with this suffix: random splits of the nodes
#: outside its public test split, 20 training nodes a class and every
#: other one to validate (no test node: for the search, whose validation
#: it makes three times larger and drawn anew each run).
NONTEST = '-nontest'
#: The graphs of the table: one homophilic (on its public split and on
#: random splits, which tell whether a gap is the public split's), three
#: heterophilic.
TABLE_GRAPHS = ('Cora', 'Texas', 'Cornell', 'Actor', 'Cora' + RANDOM)
#: A synthetic graph's name: ``cSBM:<phi>``, a contextual stochastic block
#: model (:func:`csbm`) of homophily :math:`\phi \in [-1, 1]` on random
#: 60/20/20 splits (one a run), or with :data:`RANDOM` on PyG's random
#: Planetoid splits (20 training nodes a class).
CSBM = 'cSBM:'
#: The synthetic graphs' size: nodes, Gaussian features, average degree.
CSBM_NODES, CSBM_FEATURES, CSBM_DEGREE = 2000, 200, 5.0
#: The synthetic graphs of the held-out check (never searched on): from
#: heterophilic to homophilic, with many labels and with few.
CSBM_GRAPHS = tuple(
    f'{CSBM}{phi}{suffix}'
    for suffix in ('', RANDOM)
    for phi in (-0.75, -0.25, 0.25, 0.75)
)
#: The graphs of the search: Cora on its public split and on random
#: splits of its non-test nodes, and the three heterophilic graphs.
GRAPHS = ('Cora', 'Cora' + NONTEST, 'Texas', 'Cornell', 'Actor')
#: The audit's graphs (:func:`render_audit`): the table's, every one with
#: test nodes.
AUDIT_GRAPHS = TABLE_GRAPHS
OTHER_GRAPHS = tuple(
    g for g in PLANETOID + GEOM_GCN if g not in GRAPHS
) + tuple(
    g + suffix
    for suffix in (RANDOM, NONTEST)
    for g in PLANETOID
    if g + suffix not in TABLE_GRAPHS + GRAPHS
)

#: The layers of the table, by name: a function of the layer's index (0 or
#: 1) that makes it.
LAYERS: Dict[str, Callable[[int], torch.nn.Module]] = {
    'MLP': lambda i: torch.nn.Identity(),
    'AGNNConv': lambda i: AGNNConv(requires_grad=i == 1),
    'GATConv': lambda i: GATConv(HIDDEN, HIDDEN),
    'APNetConv': lambda i: APNetConv(HIDDEN),
    'APNetConv (learned weights)': lambda i: APNetConv(
        HIDDEN, learn_step_weights=True, teleport=0.8
    ),
    'APNetConv (paper)': lambda i: APNetConv(
        HIDDEN,
        proj_channels=256,
        temperature=10.0,
        learn_temperature=False,
        num_steps=1,
        learn_step_weights=False,
        teleport=None,
    ),
}
#: The layers a search configuration is measured against.
REFERENCES = ('AGNNConv', 'GATConv')


def search_config(
    num_steps: int,
    learn_step_weights: bool = True,
    teleport: Optional[float] = None,
    proj_channels: Optional[int] = None,
    temperature: float = 1.0,
    learn_temperature: bool = True,
) -> dict:
    r"""A configuration of the search, every argument of
    :class:`APNetConv` it varies given, in one order (its name, and so its
    records, do not change with the defaults)."""
    return {
        'proj_channels': proj_channels,
        'temperature': temperature,
        'learn_temperature': learn_temperature,
        'num_steps': num_steps,
        'learn_step_weights': learn_step_weights,
        'teleport': teleport,
    }


#: The configurations of the defaults' search, APNetConv(16, **config):
#: the projection (none: the attention compares the features themselves,
#: as AGNNConv's), the temperature (fixed or learned, and where it starts),
#: the number of steps and whether the output is the last step's or a
#: learned combination of the input and every step. The finalists of a
#: wider screening (a learned self-loop weight, a learned mix with the
#: input, the temperature learned as exp of a parameter, 1 or 2 steps; the
#: closing notes of issue 51), then the learned combination over 1 to 4
#: steps, started at one step's output (``teleport=None``) or at
#: personalized PageRank's weights (teleport 0.1 to 0.8); at the chosen
#: start, 2 and 8 steps and a fixed temperature (8 steps cost twice the
#: four propagations a layer a drop-in layer may have: tried to see
#: whether more hops help); then fixed weights, as APPNP's, at teleport
#: 0.1, 0.2 and 0.3 with the temperature learned from 1, 3, 4 or 5 (a
#: validation screening had shown learned weights pulled towards the
#: node's own features by the few training labels of Cora, and a higher
#: temperature letting the attention keep a node whose neighbours differ:
#: docs/operator.md, "The defaults").
SEARCH_GRID: List[dict] = [
    *(search_config(4, teleport=t) for t in (0.1, 0.2, 0.5, 0.8)),
    search_config(2, teleport=0.2),
    search_config(8, teleport=0.2),
    search_config(4, teleport=0.2, learn_temperature=False),
    *(search_config(steps) for steps in (1, 2, 3, 4)),
    *(
        search_config(
            4, learn_step_weights=False, teleport=t, temperature=gamma
        )
        for t in (0.1, 0.2, 0.3)
        for gamma in (1.0, 3.0, 4.0, 5.0)
    ),
    search_config(1, learn_step_weights=False),
    search_config(2, learn_step_weights=False),
    search_config(1, learn_step_weights=False, temperature=2.0),
    search_config(1, learn_step_weights=False, learn_temperature=False),
    search_config(1, learn_step_weights=False, proj_channels=16),
    search_config(
        2, learn_step_weights=False, proj_channels=16, temperature=0.5
    ),
    search_config(
        2,
        learn_step_weights=False,
        proj_channels=16,
        temperature=0.5,
        learn_temperature=False,
    ),
]


class Graph(NamedTuple):
    name: str
    data: Data
    #: (train, validation, test) masks, one triple a run.
    splits: List[tuple]
    #: What a run's seed is: the split's index, or a seed on one split.
    runs: str


def load_graph(
    name: str, planetoid_root: str, geom_gcn_root: str, num_runs: int
) -> Graph:
    r"""The graph :obj:`name` with :obj:`num_runs` runs: a Planetoid graph
    on its public split (a seed a run) or, named with :data:`RANDOM`, on
    :obj:`num_runs` random splits (split and seed: the run), a Geom-GCN
    graph on its first :obj:`num_runs` splits."""
    if name.startswith(CSBM):
        return load_csbm(name, num_runs)
    planetoid = name
    for suffix in (RANDOM, NONTEST):
        if name.endswith(suffix):
            planetoid = name[: -len(suffix)]
    if planetoid in PLANETOID:
        try:
            data = read_raw_planetoid(planetoid_root, planetoid)
        except (OSError, ValueError) as error:  # The message names the file.
            raise type(error)(f'--planetoid-root: {error}') from None
        data = T.NormalizeFeatures()(data)
        if planetoid == name:
            split = (data.train_mask, data.val_mask, data.test_mask)
            return Graph(name, data, [split] * num_runs, 'seeds, public split')
        if name.endswith(NONTEST):
            splits = [
                nontest_split(data.y, data.test_mask, run)
                for run in range(num_runs)
            ]
            return Graph(name, data, splits, 'random splits of non-test nodes')
        try:
            splits = [random_split(data.y, run) for run in range(num_runs)]
        except ValueError as error:
            raise ValueError(f'--graphs {name}: {error}') from None
        return Graph(name, data, splits, 'random splits')
    if name not in GEOM_GCN:
        raise ValueError(
            f"--graphs: unknown graph '{name}'; choose among "
            f'{", ".join(PLANETOID + GEOM_GCN)}'
        )
    folder = osp.join(geom_gcn_root, name.lower(), 'raw')
    if name == 'Actor':
        folder = osp.join(geom_gcn_root, 'Actor', 'raw')
    if not osp.isdir(folder):
        raise FileNotFoundError(
            f"--geom-gcn-root: no folder '{folder}' of {name}'s raw files"
        )
    with tempfile.TemporaryDirectory() as tmp:
        # PyG writes its processed copy beside raw/: a copy of raw/ there.
        if name == 'Actor':
            shutil.copytree(folder, osp.join(tmp, 'raw'))
            dataset = Actor(tmp)
        else:
            shutil.copytree(folder, osp.join(tmp, name.lower(), 'raw'))
            dataset = WebKB(tmp, name)
        data = dataset[0]
    masks = (data.train_mask, data.val_mask, data.test_mask)
    if masks[0].dim() != 2 or masks[0].size(1) < num_runs:
        raise ValueError(
            f'{name} has {masks[0].size(-1)} splits, fewer than --runs '
            f'{num_runs}'
        )
    splits = [tuple(mask[:, i] for mask in masks) for i in range(num_runs)]
    return Graph(name, data, splits, 'public splits')


def csbm(
    phi: float,
    seed: int = 0,
    num_nodes: int = CSBM_NODES,
    num_features: int = CSBM_FEATURES,
    degree: float = CSBM_DEGREE,
    epsilon: float = 3.25,
) -> Data:
    r"""A contextual stochastic block model graph (Deshpande et al., 2018,
    as GPR-GNN's experiments draw it): two balanced classes
    :math:`v_i = \pm 1`; an edge joins two nodes of one class with
    probability :math:`(d + \lambda \sqrt{d}) / n`, of two classes with
    :math:`(d - \lambda \sqrt{d}) / n`; features :math:`\mathbf{x}_i =
    \sqrt{\mu / n}\, v_i \mathbf{u} + \mathbf{z}_i / \sqrt{p}`, with
    :math:`\mathbf{u} \sim \mathcal{N}(0, I / p)` and :math:`\mathbf{z}_i
    \sim \mathcal{N}(0, I)`. :math:`\lambda` and :math:`\mu` split a fixed
    signal, :math:`\lambda^2 + \mu^2 / \xi = 1 + \epsilon` (:math:`\xi =
    n / p`), by :obj:`phi` :math:`= \frac{2}{\pi} \arctan(\lambda
    \sqrt{\xi} / \mu)`: :math:`-1` every edge across classes, :math:`0`
    edges that say nothing (the features alone), :math:`1` every edge within
    a class. Drawn with :obj:`seed`."""
    if not -1.0 <= phi <= 1.0:
        raise ValueError(f'phi must be in [-1, 1] (got {phi})')
    generator = torch.Generator().manual_seed(seed)
    xi = num_nodes / num_features
    lam = math.sqrt(1 + epsilon) * math.sin(math.pi * phi / 2)
    mu = math.sqrt(xi * (1 + epsilon)) * math.cos(math.pi * phi / 2)
    y = torch.arange(num_nodes) % 2
    y = y[torch.randperm(num_nodes, generator=generator)]
    same = y.view(-1, 1) == y.view(1, -1)
    within = (degree + lam * math.sqrt(degree)) / num_nodes
    across = (degree - lam * math.sqrt(degree)) / num_nodes
    probability = torch.where(same, within, across)
    upper = torch.rand(num_nodes, num_nodes, generator=generator)
    adjacency = (upper < probability).triu(diagonal=1)
    adjacency = adjacency | adjacency.t()
    edge_index = adjacency.nonzero().t().contiguous()
    u = torch.randn(num_features, generator=generator) / math.sqrt(
        num_features
    )
    sign = (2 * y - 1).float().view(-1, 1)
    z = torch.randn(num_nodes, num_features, generator=generator)
    x = math.sqrt(mu / num_nodes) * sign * u + z / math.sqrt(num_features)
    return Data(x=x, edge_index=edge_index, y=y)


def load_csbm(name: str, num_runs: int) -> Graph:
    r"""The :data:`CSBM` graph :obj:`name` (drawn with seed 0) and its
    :obj:`num_runs` random splits (split and seed: the run)."""
    text = name[len(CSBM) :]
    planetoid_split = text.endswith(RANDOM)
    if planetoid_split:
        text = text[: -len(RANDOM)]
    try:
        data = csbm(float(text))  # Refuses a phi outside [-1, 1].
    except ValueError:
        raise ValueError(
            f'--graphs {name}: a synthetic graph is named {CSBM}<phi> with '
            f'phi in [-1, 1], e.g. {CSBM}0.5 or {CSBM}-0.5{RANDOM}'
        ) from None
    if planetoid_split:
        splits = [random_split(data.y, run) for run in range(num_runs)]
        return Graph(name, data, splits, 'random splits, 20 a class')
    splits = [fraction_split(data.y.numel(), run) for run in range(num_runs)]
    return Graph(name, data, splits, 'random 60/20/20 splits')


def fraction_split(num_nodes: int, seed: int) -> tuple:
    r"""A random split of the nodes, drawn with :obj:`seed`: 60% to
    train, 20% to validate, the rest to test (Geom-GCN's fractions);
    (train, validation, test) masks."""
    order = torch.randperm(
        num_nodes, generator=torch.Generator().manual_seed(seed)
    )
    bounds = (0, int(0.6 * num_nodes), int(0.8 * num_nodes), num_nodes)
    masks = []
    for start, end in zip(bounds[:-1], bounds[1:]):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[order[start:end]] = True
        masks.append(mask)
    return tuple(masks)


def random_split(y: torch.Tensor, seed: int) -> tuple:
    r"""PyG's random Planetoid split (``Planetoid(split='random')``):
    20 training nodes a class, then 500 validation and 1000 test nodes
    from the rest, drawn with :obj:`seed`; (train, validation, test)
    masks."""
    generator = torch.Generator().manual_seed(seed)
    train = torch.zeros(y.numel(), dtype=torch.bool)
    for c in range(int(y.max()) + 1):
        nodes = (y == c).nonzero().view(-1)
        order = torch.randperm(nodes.numel(), generator=generator)
        train[nodes[order[:20]]] = True
    rest = (~train).nonzero().view(-1)
    rest = rest[torch.randperm(rest.numel(), generator=generator)]
    if rest.numel() < 1500:
        raise ValueError(
            f'a random split needs 1500 nodes beyond the training ones '
            f'(got {rest.numel()}); use the public split'
        )
    val, test = torch.zeros_like(train), torch.zeros_like(train)
    val[rest[:500]] = True
    test[rest[500:1500]] = True
    return train, val, test


def nontest_split(y: torch.Tensor, test: torch.Tensor, seed: int) -> tuple:
    r"""A random split of the nodes outside :obj:`test`, drawn with
    :obj:`seed`: 20 training nodes a class (fewer where a class has fewer),
    every other one to validate, and no test node; (train, validation,
    :obj:`None`) masks, so that a test accuracy cannot be computed."""
    generator = torch.Generator().manual_seed(seed)
    pool = (~test).nonzero().view(-1)
    pool = pool[torch.randperm(pool.numel(), generator=generator)]
    train = torch.zeros(y.numel(), dtype=torch.bool)
    for c in range(int(y.max()) + 1):
        train[pool[y[pool] == c][:20]] = True
    val = torch.zeros_like(train)
    val[pool] = True
    return train, val & ~train, None


class Net(torch.nn.Module):
    r"""PyG's AGNN example network with :obj:`make_conv(i)` as propagation
    layer :obj:`i` (0 or 1)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        make_conv: Callable[[int], torch.nn.Module],
    ):
        super().__init__()
        self.lin1 = torch.nn.Linear(in_channels, HIDDEN)
        self.prop1 = make_conv(0)
        self.prop2 = make_conv(1)
        self.lin2 = torch.nn.Linear(HIDDEN, out_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor):
        if x.layout == torch.sparse_csr:
            # Dropout on the stored entries of the sparse features: the
            # same distribution as dense dropout (dropping a zero does
            # nothing), many times faster on CPU.
            x = torch.sparse_csr_tensor(
                x.crow_indices(),
                x.col_indices(),
                F.dropout(x.values(), p=0.5, training=self.training),
                x.shape,
            )
            x = F.relu(x @ self.lin1.weight.t() + self.lin1.bias)
        else:
            x = F.relu(self.lin1(F.dropout(x, p=0.5, training=self.training)))
        x = self.propagate(self.prop1, x, edge_index)
        x = self.propagate(self.prop2, x, edge_index)
        x = F.dropout(x, p=0.5, training=self.training)
        return F.log_softmax(self.lin2(x), dim=1)

    @staticmethod
    def propagate(conv, x, edge_index):
        return (
            conv(x)
            if isinstance(conv, torch.nn.Identity)
            else conv(x, edge_index)
        )


def train(
    graph: Graph,
    run: int,
    make_conv: Callable[[int], torch.nn.Module],
    epochs: int = EPOCHS,
    test: bool = True,
) -> Dict[str, Optional[float]]:
    r"""Trains one model on run :obj:`run` (its split, and its seed);
    returns the best validation accuracy and the test accuracy at its
    epoch (:obj:`None` with :obj:`test=False`: then the test nodes are
    never evaluated), with which test nodes it got right
    (``test_correct``, :func:`pack_bits`)."""
    train_mask, val_mask, test_mask = graph.splits[run]
    data = graph.data
    torch.manual_seed(run)
    model = Net(data.num_features, int(data.y.max()) + 1, make_conv)
    optimizer = torch.optim.Adam(
        model.parameters(), lr=0.01, weight_decay=5e-4
    )
    x = data.x
    if x.count_nonzero() < x.numel() / 2:  # Bag-of-words features.
        x = x.to_sparse_csr()
    best_val, test_acc, test_correct = -1.0, None, None
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        out = model(x, data.edge_index)
        F.nll_loss(out[train_mask], data.y[train_mask]).backward()
        optimizer.step()

        model.eval()
        with torch.no_grad():
            pred = model(x, data.edge_index).argmax(dim=-1)
        val = float((pred[val_mask] == data.y[val_mask]).float().mean())
        if val > best_val:
            best_val = val
            if test:
                correct = pred[test_mask] == data.y[test_mask]
                test_acc = float(correct.float().mean())
                test_correct = pack_bits(correct)
    row = {'val': best_val, 'test': test_acc}
    if test_correct is not None:
        row['test_correct'] = test_correct
    return row


def pack_bits(mask: torch.Tensor) -> str:
    r"""A boolean vector as text, ``<size>:<hexadecimal>`` with 8 entries a
    byte: which test nodes a run classified correctly, small enough for
    every record row."""
    padded = torch.cat([mask, mask.new_zeros(-mask.numel() % 8)])
    weights = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1])
    packed = (padded.view(-1, 8).long() * weights).sum(1)
    return f'{mask.numel()}:{bytes(packed.tolist()).hex()}'


def unpack_bits(text: str) -> torch.Tensor:
    r"""The boolean vector :func:`pack_bits` gave :obj:`text` for."""
    size, hexadecimal = text.split(':')
    packed = torch.tensor(list(bytes.fromhex(hexadecimal)), dtype=torch.long)
    bits = (packed.view(-1, 1) >> torch.arange(7, -1, -1)) & 1
    return bits.view(-1)[: int(size)].bool()


# Records: one line a run, so that an interrupted job resumes #################


def graph_fingerprints(graph: Graph, num_runs: int) -> List[str]:
    r"""What each of the first :obj:`num_runs` runs of :obj:`graph` trains
    on, as a short digest of its features, edges, labels and split: a
    recorded run is reused only while this is the same (a changed file,
    reader or generator, such as :func:`csbm`'s defaults, would otherwise
    pass)."""

    def update(digest, tensors) -> None:
        for tensor in tensors:
            if tensor is not None:
                tensor = tensor.contiguous()
                shape = f'{tensor.dtype} {tuple(tensor.shape)};'
                digest.update(shape.encode())
                digest.update(tensor.numpy().tobytes())

    data = hashlib.sha256()
    update(data, (graph.data.x, graph.data.edge_index, graph.data.y))
    digests = []
    for run in range(num_runs):
        digest = data.copy()
        update(digest, graph.splits[run])
        digests.append(digest.hexdigest()[:16])
    return digests


def record_key(graph: str, layer: str, run: int, epochs: int) -> str:
    return json.dumps([graph, layer, run, epochs])


def describe_layers(make_conv: Callable[[int], torch.nn.Module]) -> str:
    r"""The two layers a name builds, as a run records them: each one's
    repr and what it trains (a default that changes, a temperature that
    becomes learned, shows here, so the record's runs of the old layer
    are not reused)."""

    def describe(layer: torch.nn.Module) -> str:
        trained = ', '.join(
            f'{name} {list(parameter.shape)}'
            for name, parameter in layer.named_parameters()
            if parameter.requires_grad
        )
        return f'{layer} training {trained or "nothing"}'

    first, second = (describe(make_conv(i)) for i in (0, 1))
    return first if first == second else f'{first}, then {second}'


def read_records(path: Optional[str]) -> Dict[str, dict]:
    records = {}
    if path is None or not osp.exists(path):
        return records
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                key = record_key(
                    row['graph'], row['layer'], row['run'], row['epochs']
                )
            except (ValueError, KeyError, TypeError):
                raise ValueError(
                    f'--record {path}: line {number} is not a record of '
                    f'this script; pass another file'
                ) from None
            records[key] = row
    return records


def measure(
    graphs: Sequence[Graph],
    layers: Dict[str, Callable[[int], torch.nn.Module]],
    num_runs: int,
    epochs: int,
    record: Optional[str],
    test: bool,
    stamp: Dict[str, str],
    log=print,
    workers: int = 1,
) -> Dict[str, Dict[str, List[dict]]]:
    r"""Every layer on every graph and run (what :obj:`record` holds is
    reused), the missing runs in :obj:`workers` forked processes of the
    current torch threads each (a run's result does not depend on where
    it ran: its seed is its own); the results by layer and graph."""
    done = read_records(record)
    built = {name: describe_layers(make) for name, make in layers.items()}
    contents = {
        graph.name: graph_fingerprints(graph, num_runs) for graph in graphs
    }
    todo = []
    for name in layers:
        for graph in graphs:
            for run in range(num_runs):
                row = done.get(record_key(graph.name, name, run, epochs))
                # Rows written before a field was recorded match anything.
                stale = row is not None and (
                    row.get('layers', built[name]) != built[name]
                    or row.get('data', contents[graph.name][run])
                    != contents[graph.name][run]
                )
                if row is None or stale or (test and row['test'] is None):
                    todo.append((name, graph.name, run))

    def rows(name: str, graph: str) -> List[dict]:
        return [
            done[record_key(graph, name, run, epochs)]
            for run in range(num_runs)
        ]

    def summarise(name: str, graph: str) -> None:
        runs = rows(name, graph)
        log(
            f'{name} on {graph}: val {mean_std([r["val"] for r in runs])}'
            + (f', test {mean_std([r["test"] for r in runs])}' if test else '')
            + f' ({sum(r["seconds"] for r in runs):.0f} s of training)'
        )

    # Inherited by forked workers, never pickled: the layers are closures.
    state = ({graph.name: graph for graph in graphs}, layers, epochs, test)
    threads = torch.get_num_threads()
    left = Counter((name, graph) for name, graph, _ in todo)
    for name, graph, run, row in map_in_workers(
        run_job, todo, state, workers, threads
    ):
        row.update(
            graph=graph,
            layer=name,
            layers=built[name],
            data=contents[graph][run],
            run=run,
            epochs=epochs,
            **stamp,
        )
        if record is not None:
            with open(record, 'a') as f:
                f.write(json.dumps(row) + '\n')
        done[record_key(graph, name, run, epochs)] = row
        left[name, graph] -= 1
        if not left[name, graph]:
            summarise(name, graph)
    for name in layers:
        for graph in graphs:
            if (name, graph.name) not in left:  # Every run reused.
                summarise(name, graph.name)
    return {
        name: {graph.name: rows(name, graph.name) for graph in graphs}
        for name in layers
    }


def run_job(state: tuple, job: tuple) -> tuple:
    r"""One run of :func:`measure`'s: (layer, graph, run) and its row;
    :obj:`state` holds the graphs by name, the layers, the epochs and
    whether to test."""
    graphs, layers, epochs, test = state
    name, graph, run = job
    started = time.perf_counter()
    row = train(graphs[graph], run, layers[name], epochs, test)
    row['seconds'] = time.perf_counter() - started
    return (name, graph, run, row)


def mean_std(values: Sequence[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f'{100 * statistics.mean(values):.1f} ± {100 * std:.1f}'


def mean(rows: List[dict], key: str) -> float:
    return 100 * statistics.mean(row[key] for row in rows)


# The search ##################################################################


def better_references(
    results: Dict[str, Dict[str, List[dict]]],
    graphs: Sequence[str],
    key: str,
) -> Dict[str, str]:
    r"""The better reference on each graph: the one of :data:`REFERENCES`
    with the higher mean :obj:`key` (``'val'`` or ``'test'``) accuracy."""
    return {
        graph: max(REFERENCES, key=lambda ref: mean(results[ref][graph], key))
        for graph in graphs
    }


def rank(
    results: Dict[str, Dict[str, List[dict]]],
    graphs: Sequence[str],
    configs: Sequence[str],
) -> List[dict]:
    r"""The configurations ranked on validation only, by the gap between
    their mean validation accuracy and the better of the references' on
    each graph: first those that lose on no graph (worst gap at least 0),
    by their mean gap; then the others, by their worst gap. The issue's
    test criteria, read on validation: the better of AGNNConv and GATConv
    on every graph, then as far above them as can be."""
    better = better_references(results, graphs, 'val')
    best_reference = {
        graph: mean(results[better[graph]][graph], 'val') for graph in graphs
    }
    ranked = []
    for config in configs:
        vals = {graph: mean(results[config][graph], 'val') for graph in graphs}
        gaps = [vals[graph] - best_reference[graph] for graph in graphs]
        ranked.append(
            {
                'config': config,
                'val': vals,
                'worst_gap': min(gaps),
                'mean_gap': statistics.mean(gaps),
            }
        )
    ranked.sort(
        key=lambda row: (
            (0, -row['mean_gap'])
            if row['worst_gap'] >= 0
            else (1, -row['worst_gap'])
        )
    )
    return ranked


# Pages #######################################################################


def describe_runs(rows: List[dict]) -> str:
    machines = sorted({row['machine'] for row in rows})
    dates = sorted({row['date'] for row in rows})
    minutes = sum(row['seconds'] for row in rows) / 60
    when = dates[0] if len(dates) == 1 else f'{dates[0]} to {dates[-1]}'
    return (
        f'{len(rows)} runs on {when}, {minutes:.0f} min of training in all '
        f'({"; ".join(machines)})'
    )


def all_runs(results: Dict[str, Dict[str, List[dict]]]) -> List[dict]:
    r"""Every run of :obj:`results` (by layer, then graph), one list."""
    return [
        r
        for by_graph in results.values()
        for rs in by_graph.values()
        for r in rs
    ]


def render_table(
    results: Dict[str, Dict[str, List[dict]]],
    graphs: Sequence[str],
    command: str,
) -> str:
    rows = all_runs(results)
    kinds = ', '.join(
        f'{name}: {mean_std_count(results, name)}' for name in graphs
    )
    epochs = ', '.join(sorted({str(r['epochs']) for r in rows}))
    synthetic = all(name.startswith(CSBM) for name in graphs)
    lines = [
        '# APNetConv as a drop-in layer on '
        + (
            'synthetic graphs (contextual stochastic block models)'
            if synthetic
            else 'homophilic and heterophilic graphs'
        ),
        '',
        f'Produced by `{command}`: {describe_runs(rows)}.',
        '',
    ]
    if synthetic:
        lines += [
            f'`{CSBM}<phi>`: two classes, {CSBM_NODES:,} nodes, '
            f'{CSBM_FEATURES} Gaussian features, average degree '
            f'{CSBM_DEGREE:g}, homophily phi from -1 (every edge '
            'across the classes) to 1 (every edge within one), on random '
            f'60/20/20 splits; with `{RANDOM}`, 20 training nodes a class, '
            '500 validation and 1,000 test nodes (`csbm()` in '
            '`experiments/node_classification.py`). A held-out check: '
            "these graphs never took part in choosing APNetConv's "
            'defaults.',
            '',
        ]
    lines += [
        "PyG's AGNN model (Linear-ReLU-conv-conv-Linear, hidden 16, "
        f'dropout 0.5, Adam 0.01 with weight decay 5e-4, {epochs} epochs), '
        'only '
        'the two propagation layers changed; the test accuracy at the epoch '
        'of best validation accuracy, mean ± standard deviation over the '
        f'runs ({kinds}). See `experiments/node_classification.py` for '
        'each layer and how the graphs are read. The layers, as the runs '
        'built them (first, then second, where they differ):',
        '',
    ]
    for name, by_graph in results.items():
        built = sorted(
            {r.get('layers', '?') for rs in by_graph.values() for r in rs}
        )
        lines.append(f'- {name}: `' + '`; `'.join(built) + '`')
    lines += [
        '',
        '| layer | ' + ' | '.join(graphs) + ' |',
        '|---' * (len(graphs) + 1) + '|',
    ]
    for name, by_graph in results.items():
        cells = [mean_std([r['test'] for r in by_graph[g]]) for g in graphs]
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    lines += render_against_references(results, graphs)
    lines += [
        '',
        'Validation accuracy (%), the same runs:',
        '',
        '| layer | ' + ' | '.join(graphs) + ' |',
        '|---' * (len(graphs) + 1) + '|',
    ]
    for name, by_graph in results.items():
        cells = [mean_std([r['val'] for r in by_graph[g]]) for g in graphs]
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def paired_differences(
    ours: List[dict], theirs: List[dict], key: str
) -> tuple:
    r"""The differences in :obj:`key` accuracy (points) of two layers'
    runs, run by run (the same split and seed), and the standard error of
    their mean (NaN for one run)."""
    diffs = [100 * (a[key] - b[key]) for a, b in zip(ours, theirs)]
    error = (
        statistics.stdev(diffs) / math.sqrt(len(diffs))
        if len(diffs) > 1
        else float('nan')
    )
    return diffs, error


def render_against_references(
    results: Dict[str, Dict[str, List[dict]]], graphs: Sequence[str]
) -> List[str]:
    r"""Each APNetConv row against the better reference on each graph (of
    AGNNConv and GATConv, the one with the higher mean test accuracy),
    paired by run, as the drop-in claim is judged: the mean test accuracy
    difference, the standard error of the paired differences, and the runs
    above, level and below. Nothing without both references."""
    if any(ref not in results for ref in REFERENCES):
        return []
    layers = [n for n in results if n not in REFERENCES and n != 'MLP']
    if not layers:
        return []
    better = better_references(results, graphs, 'test')
    lines = [
        '',
        'Against the better of AGNNConv and GATConv on each graph (the one '
        'with the higher mean test accuracy, named in the header), paired by '
        'run: the mean difference in test accuracy (points) ± the standard '
        'error of the paired differences, then the runs above, level and '
        'below it:',
        '',
        '| layer | '
        + ' | '.join(f'{g} (vs {better[g]})' for g in graphs)
        + ' |',
        '|---' * (len(graphs) + 1) + '|',
    ]
    for name in layers:
        cells = []
        for g in graphs:
            diffs, error = paired_differences(
                results[name][g], results[better[g]][g], 'test'
            )
            above = sum(d > 1e-9 for d in diffs)
            below = sum(d < -1e-9 for d in diffs)
            counts = f'{above}/{len(diffs) - above - below}/{below}'
            cells.append(
                f'{statistics.mean(diffs):+.1f} ± {error:.1f} ({counts})'
            )
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    for g in graphs:
        if g not in PLANETOID:  # Each run has its own test nodes.
            continue
        errors = {
            name: test_node_error(results[name][g], results[better[g]][g])
            for name in layers
        }
        if None in errors.values():
            continue
        lines += [
            '',
            f'On {g} every run shares one test split, so the ± above (the '
            "seeds' noise) leaves out the sampling of its test nodes. The "
            'standard error of the mean difference over those nodes (each '
            "node's right or wrong averaged over the runs, then the "
            'difference node by node): '
            + ', '.join(f'{name} {errors[name]:.1f}' for name in layers)
            + ' points.',
        ]
    return lines


def test_node_error(ours: List[dict], theirs: List[dict]) -> Optional[float]:
    r"""The standard error (points) of the mean test accuracy difference
    of two layers' runs on one shared test split, over its test nodes:
    each node's correctness averaged over a layer's runs, the difference
    taken node by node; :obj:`None` where a run lacks ``test_correct``
    (records from before it was kept)."""
    if any('test_correct' not in row for row in (*ours, *theirs)):
        return None

    def rate(rows: List[dict]) -> torch.Tensor:
        masks = [unpack_bits(row['test_correct']) for row in rows]
        return torch.stack(masks).double().mean(0)

    diffs = rate(ours) - rate(theirs)
    return 100 * float(diffs.std()) / math.sqrt(diffs.numel())


def mean_std_count(results, graph: str) -> str:
    rows = next(iter(results.values()))[graph]
    return f'{len(rows)} {"seeds" if graph in PLANETOID else "splits"}'


def median_gap_error(
    results: Dict[str, Dict[str, List[dict]]],
    configs: Sequence[str],
    graph: str,
    reference: str,
    key: str,
) -> float:
    r"""The median over :obj:`configs` of the standard error of a
    configuration's :obj:`key` gap to :obj:`reference` on :obj:`graph`,
    from its runs paired with the reference's: how far a gap can be
    trusted."""
    return statistics.median(
        paired_differences(
            results[config][graph], results[reference][graph], key
        )[1]
        for config in configs
    )


def render_search(
    results: Dict[str, Dict[str, List[dict]]],
    graphs: Sequence[str],
    ranked: List[dict],
    command: str,
) -> str:
    rows = all_runs(results)
    lines = [
        "# APNetConv's constructor defaults: the validation search",
        '',
        f'Produced by `{command}`: {describe_runs(rows)}.',
        '',
        'Every configuration is `APNetConv(16, **config)` as both '
        "propagation layers of PyG's AGNN model (see "
        '`experiments/node_classification.py`), trained on every graph '
        'and run; the score of a graph is the mean best validation '
        'accuracy over the runs. The gap of a graph is the score less the '
        "better of AGNNConv's and GATConv's on that graph (the same runs). "
        'First come the configurations that lose on no graph (worst gap '
        'at least 0), ranked by their mean gap; then the others, by their '
        'worst gap. Only the training and validation nodes are used: '
        'the search never computes a test accuracy. The first row became '
        'the constructor defaults.',
        '',
        '| layer | ' + ' | '.join(graphs) + ' | worst gap | mean gap |',
        '|---' * (len(graphs) + 3) + '|',
    ]
    for name in REFERENCES:
        cells = [f'{mean(results[name][g], "val"):.1f}' for g in graphs]
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' | | |')
    for row in ranked:
        cells = [f'{row["val"][g]:.1f}' for g in graphs]
        lines.append(
            f'| `{row["config"]}` | '
            + ' | '.join(cells)
            + f' | {row["worst_gap"]:+.1f} | {row["mean_gap"]:+.1f} |'
        )
    better = better_references(results, graphs, 'val')
    errors = {
        g: median_gap_error(
            results, [row['config'] for row in ranked], g, better[g], 'val'
        )
        for g in graphs
    }
    lines += [
        '',
        'How far a gap can be trusted: the standard error of a '
        "configuration's gap on a graph, from its runs paired with the "
        "better reference's (the same split and seed), is, as the median "
        'over the configurations, '
        + ', '.join(f'{errors[g]:.1f} ({g})' for g in graphs)
        + ' points. A worst gap within one of these of zero is a tie, which '
        'the rule above still reads as a win or a loss.',
    ]
    return '\n'.join(lines) + '\n'


# The audit ###################################################################


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    r"""Pearson's correlation of two equally long sequences (NaN where
    either is constant)."""
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float('nan')


def is_default(name: str) -> bool:
    r"""Whether the search configuration :obj:`name` is APNetConv's
    constructor defaults (by its signature today)."""
    config = {config_name(c): c for c in SEARCH_GRID}.get(name)
    if config is None:
        return False
    parameters = inspect.signature(APNetConv).parameters
    return all(parameters[k].default == v for k, v in config.items())


def render_audit(
    results: Dict[str, Dict[str, List[dict]]],
    graphs: Sequence[str],
    configs: Sequence[str],
    command: str,
) -> str:
    r"""The search's configurations read on test after the choice: each
    one's validation and test gaps to the better reference on each graph,
    and per graph how far the first predicts the second."""
    better = {
        key: better_references(results, graphs, key) for key in ('val', 'test')
    }

    def gap(config: str, graph: str, key: str) -> float:
        reference = results[better[key][graph]][graph]
        return mean(results[config][graph], key) - mean(reference, key)

    gaps = {
        config: {
            (graph, key): gap(config, graph, key)
            for graph in graphs
            for key in ('val', 'test')
        }
        for config in configs
    }
    order = sorted(
        configs,
        key=lambda c: -statistics.mean(gaps[c][g, 'val'] for g in graphs),
    )
    defaults = [c for c in configs if is_default(c)]
    lines = [
        "# APNetConv's defaults search, read on test after the choice",
        '',
        f'Produced by `{command}`: {describe_runs(all_runs(results))}.',
        '',
        '**This page reads the test nodes.** It was made after the '
        'constructor defaults were chosen on validation accuracy alone '
        '([the search](node-classification-search.md)), and it chose '
        "nothing. The search's configurations and references, trained as "
        "there, on graphs with test nodes. A configuration's gap on a graph "
        "is its mean accuracy less the better reference's (of AGNNConv and "
        'GATConv, the one with the higher mean of that accuracy, the same '
        'runs), on validation and on test. The question: among these '
        'configurations, how far does the validation gap predict the test '
        'gap? Gaps in points, to two decimals.',
        '',
        'The references: '
        + '; '.join(
            f'{g}: {better["val"][g]} on validation '
            f'{mean(results[better["val"][g]][g], "val"):.1f}, '
            f'{better["test"][g]} on test '
            f'{mean(results[better["test"][g]][g], "test"):.1f}'
            for g in graphs
        )
        + '.',
        '',
        '| layer | '
        + ' | '.join(f'{g} validation | {g} test' for g in graphs)
        + ' |',
        '|---' * (2 * len(graphs) + 1) + '|',
    ]
    for config in order:
        label = f'`{config}`' + (
            ' (the defaults)' if config in defaults else ''
        )
        cells = [
            f'{gaps[config][g, key]:+.2f}'
            for g in graphs
            for key in ('val', 'test')
        ]
        lines.append(f'| {label} | ' + ' | '.join(cells) + ' |')
    lines.append('')
    for g in graphs:
        val = [gaps[c][g, 'val'] for c in configs]
        test = [gaps[c][g, 'test'] for c in configs]
        top = max(configs, key=lambda c: gaps[c][g, 'val'])
        error = median_gap_error(
            results, configs, g, better['test'][g], 'test'
        )
        r = pearson(val, test)
        lines.append(
            f'- **{g}**: over the {len(configs)} configurations the '
            f'validation and test gaps correlate at r = {r:.2f}'
            f' (validation gaps {min(val):+.2f} to {max(val):+.2f}, test '
            f"gaps {min(test):+.2f} to {max(test):+.2f}, a test gap's "
            "standard error from its runs paired with the reference's "
            f'{error:.1f} as the median). The largest '
            f'validation gap ({gaps[top][g, "val"]:+.2f}) has a test gap of '
            f'{gaps[top][g, "test"]:+.2f}; '
            + ''.join(
                f'the defaults: {gaps[c][g, "val"]:+.2f} and '
                f'{gaps[c][g, "test"]:+.2f}; '
                for c in defaults
            )
            + f'{sum(t >= 0 for t in test)} of {len(configs)} '
            'configurations are level with the reference or above it on '
            'test.'
        )
    return '\n'.join(lines) + '\n'


# Command line ################################################################


def config_name(config: dict) -> str:
    r"""A search configuration's name: its arguments, in its order."""
    return ', '.join(f'{k}={v!r}' for k, v in config.items())


def search_configs() -> Dict[str, Callable[[int], torch.nn.Module]]:
    r"""The search's layers, named by their arguments."""

    def make(config: dict) -> Callable[[int], torch.nn.Module]:
        return lambda i: APNetConv(HIDDEN, **config)

    return {config_name(config): make(config) for config in SEARCH_GRID}


def machine() -> str:
    processor = platform.processor() or platform.machine()
    return (
        f'{processor}, torch {torch.__version__}, '
        f'{torch.get_num_threads()} thread(s)'
    )


def check_arguments(args: argparse.Namespace) -> None:
    r"""Refuses bad flags with a one-line error before any graph is read."""
    if args.runs < 1:
        raise ValueError(
            f'--runs must be a positive integer (got {args.runs})'
        )
    if args.epochs < 1:
        raise ValueError(
            f'--epochs must be a positive integer (got {args.epochs})'
        )
    if args.threads is not None and args.threads < 1:
        raise ValueError(
            f'--threads must be a positive integer (got {args.threads})'
        )
    if args.workers < 1:
        raise ValueError(
            f'--workers must be a positive integer (got {args.workers})'
        )
    if args.workers > 1 and (
        'fork' not in multiprocessing.get_all_start_methods()
    ):
        raise ValueError(
            '--workers above 1 needs forked processes, which this '
            'platform lacks; pass --workers 1'
        )
    for flag in ('graphs', 'layers'):
        values = getattr(args, flag) or []
        if len(set(values)) < len(values):
            raise ValueError(f'--{flag} names one twice ({" ".join(values)})')
    if not args.search and any(g.endswith(NONTEST) for g in args.graphs or []):
        raise ValueError(
            f'--graphs: a graph named with {NONTEST} has no test nodes; '
            f'use it with --search'
        )
    if args.search and args.audit:
        raise ValueError(
            '--search and --audit are two pages: pass one of them'
        )
    if (args.search or args.audit) and args.layers is not None:
        raise ValueError(
            '--layers goes with the table, not --search or --audit (they '
            'train AGNNConv, GATConv and every configuration of the grid)'
        )
    for flag in ('out', 'record'):
        if getattr(args, flag) is not None:
            check_output_file(getattr(args, flag), f'--{flag}', 'a file name')


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--graphs',
        nargs='+',
        default=None,
        help='graphs, as PyG names them, a Planetoid one with '
        f'{RANDOM} on random splits, with {NONTEST} on random splits of '
        f'its non-test nodes (search only) (default: '
        f'{" ".join(TABLE_GRAPHS)}; '
        f'with --search {" ".join(GRAPHS)}; also '
        f'{", ".join(OTHER_GRAPHS)}; synthetic: {CSBM}<phi> with phi in '
        f'[-1, 1], e.g. {" ".join(CSBM_GRAPHS)})',
    )
    parser.add_argument(
        '--planetoid-root',
        default=osp.join(SHARED, 'planetoid'),
        help='folder of <Name>/raw/ind.<name>.* (default: '
        '../shared/data/planetoid)',
    )
    parser.add_argument(
        '--geom-gcn-root',
        default=osp.join(SHARED, 'geom_gcn'),
        help='folder of <name>/raw (default: ../shared/data/geom_gcn)',
    )
    parser.add_argument(
        '--runs', type=int, default=10, help='runs a graph (default: 10)'
    )
    parser.add_argument(
        '--epochs', type=int, default=EPOCHS, help='epochs a run (default 200)'
    )
    parser.add_argument(
        '--layers',
        nargs='+',
        choices=list(LAYERS),
        default=None,
        help='layers of the table (default: all)',
    )
    parser.add_argument(
        '--search',
        action='store_true',
        help='choose the defaults: the validation search of APNetConv '
        'configurations, instead of the table',
    )
    parser.add_argument(
        '--audit',
        action='store_true',
        help="after the choice: the search's configurations on graphs with "
        'test nodes, validation beside test accuracy (reads the test '
        'labels; chooses nothing)',
    )
    parser.add_argument(
        '--out',
        help=f'the page (default: {osp.relpath(TABLE_OUT, ROOT)}, with '
        f'--search {osp.relpath(SEARCH_OUT, ROOT)}, with --audit '
        f'{osp.relpath(AUDIT_OUT, ROOT)})',
    )
    parser.add_argument(
        '--record',
        help='the runs, one JSON line each, reused when they are there '
        '(default: the page with .jsonl for .md)',
    )
    parser.add_argument(
        '--threads',
        type=int,
        default=None,
        help="torch threads (default: torch's)",
    )
    parser.add_argument(
        '--workers',
        type=int,
        default=1,
        help='runs trained side by side in forked processes, each with '
        '--threads torch threads (default: 1; the records are the same)',
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    check_arguments(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    # The sparse features: only the CSR products used here, which are stable.
    warnings.filterwarnings('ignore', 'Sparse CSR tensor support is in beta')
    warnings.filterwarnings('ignore', 'Sparse invariant checks')

    if args.search:
        out, default_graphs = SEARCH_OUT, GRAPHS
    elif args.audit:
        out, default_graphs = AUDIT_OUT, AUDIT_GRAPHS
    else:
        out, default_graphs = TABLE_OUT, TABLE_GRAPHS
    out = args.out or out
    record = args.record or osp.splitext(out)[0] + '.jsonl'
    graphs = [
        load_graph(name, args.planetoid_root, args.geom_gcn_root, args.runs)
        for name in args.graphs or default_graphs
    ]
    if args.search or args.audit:
        layers = {name: LAYERS[name] for name in REFERENCES}
        layers.update(search_configs())
    else:
        layers = {name: LAYERS[name] for name in args.layers or LAYERS}
    spec = {
        'search': args.search,
        'graphs': [graph.name for graph in graphs],
        'layers': list(layers),
        'runs': args.runs,
        'epochs': args.epochs,
        'record': osp.relpath(record, osp.dirname(osp.abspath(out))),
        'command': ' '.join(
            ['python experiments/node_classification.py', *argv]
        ),
    }
    if args.audit:  # Pages from before the audit have no such key.
        spec['audit'] = True
    stamp = {'machine': machine(), 'date': str(datetime.date.today())}
    measure(
        graphs,
        layers,
        args.runs,
        args.epochs,
        record,
        test=not args.search,
        stamp=stamp,
        log=lambda line: print(line, flush=True),
        workers=args.workers,
    )
    page = render_page(spec, read_records(record))
    atomic_write_text(page, out)
    print(f'wrote {out} (runs in {record})')


# The page from its record ####################################################

SPEC = '<!-- generated by experiments/node_classification.py: {} -->'


def render_page(spec: dict, records: Dict[str, dict]) -> str:
    r"""The page :obj:`spec` describes (its graphs, layers, runs and
    epochs, table or search), from the runs of :obj:`records`; the spec
    heads the page, so that :func:`check` can render it again."""
    results: Dict[str, Dict[str, List[dict]]] = {}
    for layer in spec['layers']:
        for graph in spec['graphs']:
            rows = []
            for run in range(spec['runs']):
                row = records.get(
                    record_key(graph, layer, run, spec['epochs'])
                )
                if row is None or (not spec['search'] and row['test'] is None):
                    raise ValueError(
                        f'the record lacks run {run} of {layer} on {graph}: '
                        f'run the command again to complete it'
                    )
                rows.append(row)
            results.setdefault(layer, {})[graph] = rows
    head = SPEC.format(json.dumps(spec, sort_keys=True)) + '\n'
    if spec.get('audit'):
        configs = [name for name in spec['layers'] if name not in REFERENCES]
        return head + render_audit(
            results, spec['graphs'], configs, spec['command']
        )
    if spec['search']:
        configs = [name for name in spec['layers'] if name not in REFERENCES]
        ranked = rank(results, spec['graphs'], configs)
        return head + render_search(
            results, spec['graphs'], ranked, spec['command']
        )
    return head + render_table(results, spec['graphs'], spec['command'])


def check(page: str) -> List[str]:
    r"""What is stale in the generated :obj:`page`: empty when rendering it
    again from its record gives the same text."""
    text = open(page).read()
    first = text.split('\n', 1)[0]
    prefix, suffix = SPEC.split('{}')
    if not (first.startswith(prefix) and first.endswith(suffix)):
        return [f'{page}: no spec line; generate it again']
    spec = json.loads(first[len(prefix) : -len(suffix)])
    record = osp.join(osp.dirname(page), spec['record'])
    try:
        again = render_page(spec, read_records(record))
    except ValueError as error:
        return [f'{page}: {error}']
    if again != text:
        return [
            f'{page} differs from what its record {record} gives: run '
            f'`{spec["command"]}` again, or restore the page'
        ]
    return []


if __name__ == '__main__':
    sys.exit(run_script(main))
