r"""What the propagation benchmark measures: the methods (layers), the
graphs, the grid of configurations and the settings of a run."""

import os.path as osp
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from benchmarks import common
from benchmarks.common import GB

#: The output size of APNet's projection :math:`f` in every configuration
#: (but the drop-in defaults' method, ``apnet_default``).
PROJ_CHANNELS = 256

NODE_COUNTS = (100, 1_000, 10_000, 100_000)
#: Average degrees (directed edges per node, self-loops not counted);
#: ``'complete'`` is the fully connected graph.
DEGREES = (4, 16, 64, 'complete')
FEATURES = (256, 2048)
PASSES = ('forward', 'forward+backward')
#: The dtypes a run can measure (features, layer and gradients);
#: float32 unless --dtypes names others.
DTYPES = ('float32', 'bfloat16', 'float16')

#: The small real graph: Planetoid Cora, raw files read offline.
PLANETOID_ROOT = osp.join(
    common.REPO_ROOT, '..', 'shared', 'data', 'planetoid'
)
#: Feature sizes on Cora besides the grid's: the hidden width of PyG's AGNN
#: model on Cora, where a layer's fixed cost shows.
CORA_FEATURES = (16,)

#: The attention dropout probability of the dropout methods.
ATTENTION_DROPOUT = 0.5

QUICK_NODE_COUNTS = (100,)
QUICK_DEGREES = (4, 'complete')
QUICK_FEATURES = (256,)


# ---------------------------------------------------------------------------
# Methods
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    name: str  # The key in the CSV and on the command line.
    label: str  # The name in tables and plots.
    dense: bool  # Takes a dense [N, N] adjacency instead of edge_index.
    build: Callable[[int], torch.nn.Module]  # in_channels -> layer
    # Width of the per-node linear map, for the time model only.
    node_channels: Callable[[int], int]


class NewGraphEachCall(torch.nn.Module):
    r"""Calls :obj:`layer` with a copy of :obj:`edge_index`, so that
    APNetConv cannot keep the CSR pattern of the previous call: the cost of
    a call on a new graph (as in mini-batch training), pattern included."""

    def __init__(self, layer: torch.nn.Module):
        super().__init__()
        self.layer = layer

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor
    ) -> torch.Tensor:
        return self.layer(x, edge_index.clone())


#: The APNet paper's configuration of the layer, the grid's APNet methods.
PAPER_CONFIG = dict(
    proj_channels=PROJ_CHANNELS,
    temperature=10.0,
    learn_temperature=False,
    num_steps=1,
    learn_step_weights=False,
    teleport=None,
)


def _apnet_paper(channels: int, kernel: str) -> torch.nn.Module:
    from apnet_pyg.nn import APNetConv

    return APNetConv(channels, kernel=kernel, **PAPER_CONFIG)


def _apnet_sparse(channels: int) -> torch.nn.Module:
    return NewGraphEachCall(_apnet_paper(channels, 'sparse'))


def _apnet_triton(channels: int) -> torch.nn.Module:
    return NewGraphEachCall(_apnet_paper(channels, 'triton'))


def _apnet_sparse_cached(channels: int) -> torch.nn.Module:
    return _apnet_paper(channels, 'sparse')


def _apnet_triton_cached(channels: int) -> torch.nn.Module:
    return _apnet_paper(channels, 'triton')


def method_proj_channels(method: str) -> Optional[int]:
    if method in DEFAULTS:
        import inspect

        from apnet_pyg.nn import APNetConv

        return inspect.signature(APNetConv).parameters['proj_channels'].default
    return PROJ_CHANNELS if method.startswith('apnet') else None


def _apnet_default(channels: int) -> torch.nn.Module:
    from apnet_pyg.nn import APNetConv

    return APNetConv(channels)


def _apnet_default_new_graph(channels: int) -> torch.nn.Module:
    return NewGraphEachCall(_apnet_default(channels))


def _apnet_default_dropout(channels: int) -> torch.nn.Module:
    from apnet_pyg.nn import APNetConv

    # Built in training mode, as every layer here: the dropout applies.
    return APNetConv(channels, dropout=ATTENTION_DROPOUT)


def _apnet_default_dropout_mp(channels: int) -> torch.nn.Module:
    from apnet_pyg.nn import APNetConv

    return APNetConv(
        channels, dropout=ATTENTION_DROPOUT, kernel='message_passing'
    )


def _apnet_message_passing(channels: int) -> torch.nn.Module:
    return NewGraphEachCall(_apnet_paper(channels, 'message_passing'))


def _apnet_dense(channels: int) -> torch.nn.Module:
    from apnet_pyg.nn import DenseAPNetConv

    return DenseAPNetConv(channels, **PAPER_CONFIG)


def _agnn(channels: int) -> torch.nn.Module:
    from torch_geometric.nn import AGNNConv

    return AGNNConv(requires_grad=True)


def _gat(channels: int) -> torch.nn.Module:
    from torch_geometric.nn import GATConv

    return GATConv(channels, channels, heads=1)


METHODS: Dict[str, Method] = {
    method.name: method
    for method in [
        Method(
            'apnet_sparse',
            'APNetConv (sparse, fused)',
            False,
            _apnet_sparse,
            lambda F: PROJ_CHANNELS,
        ),
        Method(
            'apnet_triton',
            'APNetConv (Triton kernel)',
            False,
            _apnet_triton,
            lambda F: PROJ_CHANNELS,
        ),
        # The same layers called with the same edge_index every time: the
        # CSR pattern built once and kept, as in full-batch training.
        Method(
            'apnet_sparse_cached',
            'APNetConv (sparse, pattern cached)',
            False,
            _apnet_sparse_cached,
            lambda F: PROJ_CHANNELS,
        ),
        Method(
            'apnet_triton_cached',
            'APNetConv (Triton kernel, pattern cached)',
            False,
            _apnet_triton_cached,
            lambda F: PROJ_CHANNELS,
        ),
        # The constructor defaults, as a PyG user drops the layer in, called
        # with the same edge_index (full-batch training) and with a new one
        # each call; on the small real graph only.
        Method(
            'apnet_default',
            'APNetConv (defaults)',
            False,
            _apnet_default,
            lambda F: F,
        ),
        Method(
            'apnet_default_new_graph',
            'APNetConv (defaults, new edge_index each call)',
            False,
            _apnet_default_new_graph,
            lambda F: F,
        ),
        # The defaults with attention dropout, in training: on the kernels
        # kernel='auto' picks, and through message passing, which held
        # every edge's message to drop before the kernels took it.
        Method(
            'apnet_default_dropout',
            f'APNetConv (defaults, attention dropout {ATTENTION_DROPOUT:g})',
            False,
            _apnet_default_dropout,
            lambda F: F,
        ),
        Method(
            'apnet_default_dropout_mp',
            f'APNetConv (defaults, attention dropout {ATTENTION_DROPOUT:g},'
            f' message passing)',
            False,
            _apnet_default_dropout_mp,
            lambda F: F,
        ),
        Method(
            'apnet_mp',
            'APNetConv (message passing)',
            False,
            _apnet_message_passing,
            lambda F: PROJ_CHANNELS,
        ),
        Method(
            'apnet_dense',
            'DenseAPNetConv',
            True,
            _apnet_dense,
            lambda F: PROJ_CHANNELS,
        ),
        Method('agnn', 'AGNNConv (PyG)', False, _agnn, lambda F: 0),
        Method('gat', 'GATConv (PyG, heads=1)', False, _gat, lambda F: F),
    ]
}
SPARSE, DENSE, DEFAULT = 'apnet_sparse', 'apnet_dense', 'apnet_default'
#: Measured on the small real graph only.
DEFAULTS = (
    DEFAULT,
    'apnet_default_new_graph',
    'apnet_default_dropout',
    'apnet_default_dropout_mp',
)
#: Measured on CUDA only (Triton's interpreter on CPU is for tests).
CUDA_ONLY = ('apnet_triton', 'apnet_triton_cached')
#: The layers that keep the pattern of the edge_index they were called
#: with (the grid calls them with the same one every time).
CACHED = ('apnet_sparse_cached', 'apnet_triton_cached')


def default_methods(device: str) -> List[str]:
    r"""The methods a run measures unless --methods names them."""
    return [
        method
        for method in METHODS
        if device.startswith('cuda') or method not in CUDA_ONLY
    ]


def grid_methods(
    methods: Sequence[str], defaults_on_all_graphs: bool = False
) -> List[str]:
    r"""The :obj:`methods` measured on the random graphs and the WordNet
    graph: the drop-in defaults (proj_channels and all) are measured on the
    small real graph only, unless :obj:`defaults_on_all_graphs`; the grid
    compares the paper's configuration."""
    return [
        method
        for method in methods
        if defaults_on_all_graphs or method not in DEFAULTS
    ]


# ---------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class GraphSpec:
    r"""A graph of the grid. :obj:`num_edges` counts directed edges without
    self-loops (an undirected edge counts twice); every layer adds the
    self-loops itself."""

    kind: str  # 'random', 'complete', 'wordnet' or 'cora'
    num_nodes: int
    num_edges: int
    path: str = ''  # Where a real graph is read from.

    @property
    def degree(self) -> float:
        return self.num_edges / self.num_nodes

    @property
    def edge_fraction(self) -> float:
        return self.num_edges / max(self.num_nodes * (self.num_nodes - 1), 1)

    @property
    def degree_label(self) -> str:
        return 'complete' if self.kind == 'complete' else f'{self.degree:g}'


def random_graph_spec(num_nodes: int, degree) -> GraphSpec:
    r"""An Erdos-Renyi :math:`G(N, M)` graph with average degree
    :obj:`degree`, or the complete graph for :obj:`'complete'`."""
    max_pairs = num_nodes * (num_nodes - 1) // 2
    pairs = (
        max_pairs
        if degree == 'complete'
        else min(max_pairs, round(num_nodes * float(degree) / 2))
    )
    kind = 'complete' if pairs == max_pairs else 'random'
    return GraphSpec(kind, num_nodes, 2 * pairs)


def random_undirected_edges(
    num_nodes: int, num_edges: int, generator: torch.Generator
) -> torch.Tensor:
    r"""A uniformly random simple undirected graph with exactly
    :obj:`num_edges // 2` edges, as a coalesced :obj:`edge_index` holding
    both directions."""
    pairs = num_edges // 2
    max_pairs = num_nodes * (num_nodes - 1) // 2
    if pairs == max_pairs or pairs > max_pairs // 4:
        # Dense enough to enumerate every pair and pick without replacement.
        row, col = torch.triu_indices(num_nodes, num_nodes, 1)
        if pairs < max_pairs:
            pick = torch.randperm(max_pairs, generator=generator)[:pairs]
            row, col = row[pick], col[pick]
    else:
        # Sparse: draw pairs with replacement until enough distinct ones.
        keys = torch.empty(0, dtype=torch.long)
        while keys.numel() < pairs:
            draw = int(1.1 * (pairs - keys.numel())) + 16
            i = torch.randint(num_nodes, (draw,), generator=generator)
            j = torch.randint(num_nodes, (draw,), generator=generator)
            keep = i != j
            i, j = i[keep], j[keep]
            new = torch.minimum(i, j) * num_nodes + torch.maximum(i, j)
            keys = torch.unique(torch.cat([keys, new]))
        pick = torch.randperm(keys.numel(), generator=generator)[:pairs]
        keys = keys[pick]
        row, col = keys // num_nodes, keys % num_nodes
    source = torch.cat([row, col])
    target = torch.cat([col, row])
    order = torch.argsort(source * num_nodes + target)
    return torch.stack([source[order], target[order]])


def wordnet_spec() -> Tuple[Optional[GraphSpec], str]:
    r"""The WordNet 3.0 noun graph's size, or :obj:`None` and why not."""
    try:
        data = _wordnet_graph()
    except Exception as error:  # Missing module or corpus: skip, say why.
        return None, f'WordNet noun graph unavailable ({error})'.replace(
            '\n', ' '
        )
    edge_index = data.edge_index
    loops = int((edge_index[0] == edge_index[1]).sum())
    return GraphSpec(
        'wordnet', int(data.num_nodes), edge_index.size(1) - loops
    ), ''


def _wordnet_graph():
    from apnet_pyg.graph.wordnet import wordnet_noun_graph

    return wordnet_noun_graph()


def cora_spec(root: str) -> Tuple[Optional[GraphSpec], str]:
    r"""Planetoid Cora's size, read from :obj:`root/Cora/raw`, or
    :obj:`None` and why not."""
    try:
        edge_index = _cora_edge_index(root)
    except Exception as error:  # Missing files: skip, say why.
        return None, f'Cora unavailable ({error})'.replace('\n', ' ')
    loops = int((edge_index[0] == edge_index[1]).sum())
    return GraphSpec(
        'cora', int(edge_index.max()) + 1, edge_index.size(1) - loops, root
    ), ''


def _cora_edge_index(root: str) -> torch.Tensor:
    r"""Cora's :obj:`edge_index`, read from :obj:`root/Cora/raw`; an error
    names the folder or file that is missing or does not read."""
    from apnet_pyg.data.planetoid import read_raw_planetoid

    return read_raw_planetoid(root, 'Cora').edge_index


#: Graphs with at least this many edges are built once, by the driver, and
#: read by the workers (a random graph of 10M edges takes seconds to draw).
SAVED_GRAPH_EDGES = 1_000_000


def is_saved(graph: GraphSpec) -> bool:
    r"""Whether the driver builds :obj:`graph` once for every worker: the
    WordNet noun graph (read from the corpus or its cache) and the large
    random graphs; the complete graph is enumerated faster than read."""
    return graph.kind == 'wordnet' or (
        graph.kind == 'random' and graph.num_edges >= SAVED_GRAPH_EDGES
    )


def build_edge_index(graph: GraphSpec, seed: int) -> torch.Tensor:
    if graph.kind == 'wordnet':
        return _wordnet_graph().edge_index
    if graph.kind == 'cora':
        return _cora_edge_index(graph.path)
    generator = torch.Generator().manual_seed(seed)
    return random_undirected_edges(graph.num_nodes, graph.num_edges, generator)


def dense_adjacency(
    graph: GraphSpec, seed: int, edge_index: Optional[torch.Tensor] = None
) -> torch.Tensor:
    r"""Boolean :obj:`adj[i, j]` for every edge :math:`j \to i`, built from
    the same edges as the sparse methods get (:obj:`edge_index`, or
    :func:`build_edge_index`)."""
    N = graph.num_nodes
    if graph.kind == 'complete':
        return ~torch.eye(N, dtype=torch.bool)
    if edge_index is None:
        edge_index = build_edge_index(graph, seed)
    source, target = edge_index
    adj = torch.zeros(N, N, dtype=torch.bool)
    adj[target, source] = True
    return adj


# ---------------------------------------------------------------------------
# The settings of a run, and its grid
# ---------------------------------------------------------------------------
@dataclass
class RunSettings:
    r"""The settings of one run of the suite, from its command line
    (:func:`benchmarks.propagation.settings_from_args`): the grid's axes,
    the caps that skip a pass, the timing and the waits for a quiet
    machine."""

    device: str = 'cpu'
    threads: int = 1
    nodes: Tuple[int, ...] = NODE_COUNTS
    degrees: Tuple = DEGREES
    features: Tuple[int, ...] = FEATURES
    methods: Tuple[str, ...] = tuple(METHODS)
    wordnet: bool = True
    cora: bool = True
    planetoid_root: str = PLANETOID_ROOT
    refine: bool = True
    time_cap: float = 10.0
    memory_cap: float = 16 * GB
    min_runs: int = 5
    min_time: float = 0.3
    max_runs: int = 500
    quiet_wait: float = 20.0
    quiet_wait_total: float = 600.0
    seed: int = 0
    quick: bool = False
    #: (N, degree) of each random graph, instead of nodes x degrees.
    random_graphs: Tuple[Tuple[int, Any], ...] = ()
    #: Measure the drop-in defaults' methods on every graph, not Cora only.
    defaults_on_all_graphs: bool = False
    #: Seconds after which no pass starts (None: no limit).
    budget: Optional[float] = None
    #: The dtypes of the features and the layer, by name (DTYPES).
    dtypes: Tuple[str, ...] = ('float32',)

    def random_graph_specs(self) -> List[GraphSpec]:
        r"""The random (and complete) graphs of the grid: the
        :obj:`random_graphs` given, or every node count with every degree
        (a degree of N - 1 or more gives the complete graph, measured once,
        as 'complete')."""
        if self.random_graphs:
            return [
                random_graph_spec(N, degree)
                for N, degree in self.random_graphs
            ]
        graphs = []
        for N in self.nodes:
            for degree in self.degrees:
                graph = random_graph_spec(N, degree)
                if degree != 'complete' and graph.kind == 'complete':
                    continue  # The complete graph comes once, as 'complete'.
                graphs.append(graph)
        return graphs


def grid(
    settings: RunSettings,
) -> Tuple[List[Tuple[str, GraphSpec, int, str]], Dict[str, str]]:
    r"""The configurations (method, graph, F, dtype), smallest first so
    that time predictions can scale from measured neighbours, float32
    before the half-precision dtypes of each, and why a real graph is
    missing if it is (by kind)."""
    configurations = []
    missing = {}
    wordnet, missing['wordnet'] = (
        wordnet_spec() if settings.wordnet else (None, '')
    )
    cora, missing['cora'] = (
        cora_spec(settings.planetoid_root) if settings.cora else (None, '')
    )
    methods = grid_methods(settings.methods, settings.defaults_on_all_graphs)
    if cora is not None:
        for F in sorted(set(CORA_FEATURES) | set(settings.features)):
            for dtype in settings.dtypes:
                for method in settings.methods:
                    configurations.append((method, cora, F, dtype))
    graphs = settings.random_graph_specs()
    if wordnet is not None:
        graphs.append(wordnet)
    # By size (stable: the grid's order among equal sizes), the WordNet
    # graph among the random ones.
    graphs.sort(key=lambda graph: graph.num_nodes)
    for F in settings.features:
        for graph in graphs:
            for dtype in settings.dtypes:
                for method in methods:
                    configurations.append((method, graph, F, dtype))
    return configurations, missing
