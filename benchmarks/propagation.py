r"""Propagation benchmark: APNet's attention propagation, sparse vs dense,
against PyG's :class:`~torch_geometric.nn.conv.AGNNConv` and
:class:`~torch_geometric.nn.conv.GATConv`.

For every method, graph and feature size it times one layer's forward pass
(under :func:`torch.no_grad`) and forward+backward pass, and measures the
peak memory of each, every (configuration, pass) in a fresh worker process.
Configurations that would not fit in memory or take too long are skipped
before they run, from an estimate, and recorded with the reason. From the
grid it finds, for each graph size, the density above which
:class:`~apnet_pyg.nn.DenseAPNetConv` beats the sparse
:class:`~apnet_pyg.nn.APNetConv`.

Run it with ``python -m benchmarks propagation [--device cpu|cuda]
[--quick]``; see ``benchmarks/README.md``.
"""
import argparse
import datetime
import math
import os.path as osp
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import psutil
import torch

from benchmarks import common
from benchmarks.common import GB, MB

#: The output size of APNet's projection :math:`f` in every configuration
#: (but the drop-in defaults' method, ``apnet_default``).
PROJ_CHANNELS = 256

NODE_COUNTS = (100, 1_000, 10_000, 100_000)
#: Average degrees (directed edges per node, self-loops not counted);
#: ``'complete'`` is the fully connected graph.
DEGREES = (4, 16, 64, 'complete')
FEATURES = (256, 2048)
PASSES = ('forward', 'forward+backward')

#: The small real graph: Planetoid Cora, raw files read offline.
PLANETOID_ROOT = osp.join(osp.dirname(osp.dirname(osp.abspath(__file__))),
                          '..', 'shared', 'data', 'planetoid')
#: Feature sizes on Cora besides the grid's: the hidden width of PyG's AGNN
#: model on Cora, where a layer's fixed cost shows.
CORA_FEATURES = (16, )

QUICK_NODE_COUNTS = (100, )
QUICK_DEGREES = (4, 'complete')
QUICK_FEATURES = (256, )

COLUMNS = (
    'method', 'graph', 'N', 'E', 'degree', 'edge_fraction', 'F',
    'proj_channels', 'pass', 'status', 'runs', 'min_ms', 'median_ms',
    'peak_mb', 'est_peak_mb', 'setup_mb', 'device', 'threads', 'load_start',
    'load_end', 'other_cores', 'source', 'note')

# Resident memory of a worker before it builds anything (torch + PyG).
_IMPORT_BYTES = 0.5 * GB
# A pass is skipped ahead when predicted to take this many time caps.
PREDICTION_SLACK = 1.25
# A timing taken while other processes kept more cores than this busy is
# provisional.
BUSY_CORES = 0.25


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

    def forward(self, x: torch.Tensor,
                edge_index: torch.Tensor) -> torch.Tensor:
        return self.layer(x, edge_index.clone())


def _apnet_sparse(channels: int) -> torch.nn.Module:
    from apnet_pyg.nn import APNetConv
    return NewGraphEachCall(APNetConv(channels, proj_channels=PROJ_CHANNELS,
                                      temperature=10.0, num_steps=1))


def _proj_channels(method: str) -> Optional[int]:
    if method in DEFAULTS:
        import inspect

        from apnet_pyg.nn import APNetConv
        return inspect.signature(APNetConv).parameters[
            'proj_channels'].default
    return PROJ_CHANNELS if method.startswith('apnet') else None


def _apnet_default(channels: int) -> torch.nn.Module:
    from apnet_pyg.nn import APNetConv
    return APNetConv(channels)


def _apnet_default_new_graph(channels: int) -> torch.nn.Module:
    return NewGraphEachCall(_apnet_default(channels))


def _apnet_message_passing(channels: int) -> torch.nn.Module:
    from apnet_pyg.nn import APNetConv
    return NewGraphEachCall(APNetConv(channels, proj_channels=PROJ_CHANNELS,
                                      temperature=10.0, num_steps=1,
                                      fused=False))


def _apnet_dense(channels: int) -> torch.nn.Module:
    from apnet_pyg.nn import DenseAPNetConv
    return DenseAPNetConv(channels, proj_channels=PROJ_CHANNELS,
                          temperature=10.0, num_steps=1)


def _agnn(channels: int) -> torch.nn.Module:
    from torch_geometric.nn import AGNNConv
    return AGNNConv(requires_grad=True)


def _gat(channels: int) -> torch.nn.Module:
    from torch_geometric.nn import GATConv
    return GATConv(channels, channels, heads=1)


METHODS: Dict[str, Method] = {
    method.name: method
    for method in [
        Method('apnet_sparse', 'APNetConv (sparse, fused)', False,
               _apnet_sparse, lambda F: PROJ_CHANNELS),
        # The constructor defaults, as a PyG user drops the layer in, called
        # with the same edge_index (full-batch training) and with a new one
        # each call; on the small real graph only.
        Method('apnet_default', 'APNetConv (defaults)', False,
               _apnet_default, lambda F: F),
        Method('apnet_default_new_graph',
               'APNetConv (defaults, new edge_index each call)', False,
               _apnet_default_new_graph, lambda F: F),
        Method('apnet_mp', 'APNetConv (message passing)', False,
               _apnet_message_passing, lambda F: PROJ_CHANNELS),
        Method('apnet_dense', 'DenseAPNetConv', True, _apnet_dense,
               lambda F: PROJ_CHANNELS),
        Method('agnn', 'AGNNConv (PyG)', False, _agnn, lambda F: 0),
        Method('gat', 'GATConv (PyG, heads=1)', False, _gat, lambda F: F),
    ]
}
SPARSE, DENSE, DEFAULT = 'apnet_sparse', 'apnet_dense', 'apnet_default'
#: Measured on the small real graph only.
DEFAULTS = (DEFAULT, 'apnet_default_new_graph')


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
    pairs = max_pairs if degree == 'complete' else min(
        max_pairs, round(num_nodes * float(degree) / 2))
    kind = 'complete' if pairs == max_pairs else 'random'
    return GraphSpec(kind, num_nodes, 2 * pairs)


def random_undirected_edges(num_nodes: int, num_edges: int,
                            generator: torch.Generator) -> torch.Tensor:
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
            i = torch.randint(num_nodes, (draw, ), generator=generator)
            j = torch.randint(num_nodes, (draw, ), generator=generator)
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
            '\n', ' ')
    edge_index = data.edge_index
    loops = int((edge_index[0] == edge_index[1]).sum())
    return GraphSpec('wordnet', int(data.num_nodes),
                     edge_index.size(1) - loops), ''


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
    return GraphSpec('cora', int(edge_index.max()) + 1,
                     edge_index.size(1) - loops, root), ''


def _cora_edge_index(root: str) -> torch.Tensor:
    from torch_geometric.io import read_planetoid_data
    folder = osp.join(root, 'Cora', 'raw')
    if not osp.isdir(folder):
        raise FileNotFoundError(f'no folder {folder}')
    return read_planetoid_data(folder, 'cora').edge_index


def build_edge_index(graph: GraphSpec, seed: int) -> torch.Tensor:
    if graph.kind == 'wordnet':
        return _wordnet_graph().edge_index
    if graph.kind == 'cora':
        return _cora_edge_index(graph.path)
    generator = torch.Generator().manual_seed(seed)
    return random_undirected_edges(graph.num_nodes, graph.num_edges,
                                   generator)


def dense_adjacency(graph: GraphSpec, seed: int) -> torch.Tensor:
    r"""Boolean :obj:`adj[i, j]` for every edge :math:`j \to i`, built from
    the same edges as the sparse methods get."""
    N = graph.num_nodes
    if graph.kind == 'complete':
        return ~torch.eye(N, dtype=torch.bool)
    source, target = build_edge_index(graph, seed)
    adj = torch.zeros(N, N, dtype=torch.bool)
    adj[target, source] = True
    return adj


# ---------------------------------------------------------------------------
# Memory and time models, to skip what will not fit before running it
# ---------------------------------------------------------------------------
def estimate_peak_bytes(method: str, graph: GraphSpec, F: int,
                        backward: bool) -> float:
    r"""A conservative estimate of the memory one pass allocates on top of
    its inputs (float32, int64 indices), checked against the measured
    ``peak_mb`` (the CSV has both)."""
    N, P = graph.num_nodes, PROJ_CHANNELS
    E = graph.num_edges + N  # With the self-loops the layers add.
    # edge_index with loops, sort keys, permutations, CSR indices.
    indices = 100.0 * E
    if method == DENSE:
        # Several float N x N matrices (logits, softmax, masked attention and,
        # in backward, their gradients) and boolean masks.
        return (36.0 if backward else 20.0) * N * N + 4.0 * N * (P + F)
    if method == SPARSE:
        # Per-edge vectors and the CSR pattern (and its transpose in
        # backward), node features; no E x F tensor. 1.5: allocator slack
        # seen at N = 10k.
        per_node = (4 * P + 3 * F) if backward else (2 * P + F)
        return 1.5 * ((2 if backward else 1) * (indices + 24.0 * E) +
                      4.0 * N * per_node)
    # Message passing materialises E x F (and E x P) tensors.
    if method == 'apnet_mp':
        per_edge = (4 * P + 4 * F) if backward else (3 * P + 2 * F)
    elif method == 'agnn':
        per_edge = 7 * F if backward else 4 * F
    else:  # GAT: messages x_j and alpha * x_j, and their gradients.
        per_edge = 4 * F if backward else 2 * F
    return 4.0 * E * per_edge + indices + 4.0 * N * F * 3


def setup_bytes(method: str, graph: GraphSpec, F: int,
                backward: bool) -> float:
    r"""The inputs a worker holds before the timed pass."""
    N = graph.num_nodes
    features = 4.0 * N * F * (3 if backward else 1)  # x, output grad, x.grad
    if METHODS[method].dense:
        # The adjacency, plus the edge_index it was built from (freed).
        return features + N * N + 16.0 * graph.num_edges
    return features + 16.0 * graph.num_edges


def work(method: str, graph: GraphSpec, F: int) -> float:
    r"""A rough operation count, to extrapolate a measured time."""
    N = graph.num_nodes
    if METHODS[method].dense:
        return float(N) * N * (F + PROJ_CHANNELS)
    per_edge = 2 * F if method == 'agnn' else F + PROJ_CHANNELS
    # Per-node GEMMs run an order of magnitude faster than gathers.
    node_flops = N * F * METHODS[method].node_channels(F) / 16
    return float(graph.num_edges + N) * per_edge + node_flops


def predict_seconds(method: str, graph: GraphSpec, F: int, pass_: str,
                    measured: Sequence[dict]) -> Optional[Tuple[float, dict]]:
    r"""Scales the time of the largest measured configuration of the same
    method, feature size and pass by :func:`work`."""
    same = [row for row in measured
            if row['method'] == method and row['F'] == F
            and row['pass'] == pass_ and row['status'] == 'ok']
    if not same:
        return None
    reference = max(same, key=lambda row: row['_work'])
    # The min: least disturbed by other processes.
    seconds = reference['min_ms'] / 1e3 * work(method, graph, F) / \
        reference['_work']
    return seconds, reference


# ---------------------------------------------------------------------------
# The worker: one (method, graph, feature size, pass) in a fresh process
# ---------------------------------------------------------------------------
def measure(spec: dict) -> dict:
    r"""Builds the inputs and the layer, times the pass and measures its
    peak memory. Runs inside a worker process."""
    torch.set_num_threads(spec['threads'])
    device = torch.device(spec['device'])
    memory_before = common.current_rss_bytes()
    graph = GraphSpec(**spec['graph'])
    method = METHODS[spec['method']]
    F, seed = spec['F'], spec['seed']
    backward = spec['pass'] == 'forward+backward'

    if method.dense:
        graph_input = dense_adjacency(graph, seed).to(device)
    else:
        graph_input = build_edge_index(graph, seed).to(device)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(graph.num_nodes, F, generator=generator).to(device)
    torch.manual_seed(seed)
    layer = method.build(F).to(device)

    if backward:
        x.requires_grad_(True)
        out_shape = (1, graph.num_nodes, F) if method.dense else x.shape
        grad = torch.randn(out_shape, generator=generator).to(device)

        def run_pass():
            # Input gradients too: the layer sits inside a network.
            x.grad = None
            layer.zero_grad(set_to_none=True)
            layer(x, graph_input).backward(grad)
    else:

        def run_pass():
            with torch.no_grad():
                layer(x, graph_input)

    setup = common.current_rss_bytes() - memory_before
    result = {'setup_mb': setup / MB if device.type == 'cpu' else None}
    timer = spec['timing']
    load = common.LoadMonitor()
    try:
        with load, common.PeakMemory(device) as memory:
            times = common.time_runs(run_pass, device, timer['min_runs'],
                                     timer['min_time'], timer['max_runs'],
                                     timer['time_cap'])
    except common.TimeCapExceeded:
        result.update(status='skipped', note=(
            f"time cap: the first run took over {timer['time_cap']:g} s"))
        return result
    except RuntimeError as error:
        if not common.is_out_of_memory(error):
            raise
        result.update(status='skipped', note=(
            f"memory: allocation failed under the "
            f"{spec['memory_cap_bytes'] / GB:.3g} GB cap"))
        return result

    result.update(common.summarize_times(times), status='ok',
                  peak_mb=memory.peak_bytes / MB,
                  load_start=load.load_start, load_end=load.load_end,
                  other_cores=load.other_cores)
    return result


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------
@dataclass
class Options:
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


class Runner:
    r"""Runs configurations one after the other and collects the rows."""
    def __init__(self, options: Options, log=common.log):
        self.options = options
        self.rows: List[dict] = []
        self.log = log
        self.waited = 0.0  # Seconds spent waiting for a quiet machine.

    def row(self, method: str, graph: GraphSpec, F: int, pass_: str,
            source: str, **values) -> dict:
        row = {
            'method': method, 'graph': graph.kind, 'N': graph.num_nodes,
            'E': graph.num_edges, 'degree': graph.degree,
            'edge_fraction': graph.edge_fraction, 'F': F,
            'proj_channels': _proj_channels(method),
            'pass': pass_, 'device': self.options.device,
            'threads': self.options.threads, 'source': source,
            'runs': None, 'min_ms': None, 'median_ms': None,
            'peak_mb': None, 'note': '', '_work': work(method, graph, F),
        }
        row.update(values)
        self.rows.append(row)
        return row

    def memory_cap(self) -> Tuple[float, str]:
        cap = self.options.memory_cap
        if self.options.device == 'cpu':
            # Leave room for whatever else runs on the machine.
            available = psutil.virtual_memory().available - 1 * GB
            if available < cap:
                return available, ' (free RAM)'
        return cap, ''

    def skip_reason(self, method: str, graph: GraphSpec, F: int,
                    pass_: str) -> Tuple[Optional[str], float]:
        backward = pass_ == 'forward+backward'
        estimate = estimate_peak_bytes(method, graph, F, backward)
        needed = estimate + setup_bytes(method, graph, F, backward)
        cap, why = self.memory_cap()
        if self.options.device == 'cuda':
            cap = min(cap, 0.9 * torch.cuda.get_device_properties(
                torch.device(self.options.device)).total_memory)
        else:
            needed += _IMPORT_BYTES
        if needed > cap:
            return (f'memory: needs ~{needed / GB:.1f} GB (estimate) > '
                    f'{cap / GB:.3g} GB cap{why}'), estimate
        prediction = predict_seconds(method, graph, F, pass_, self.rows)
        # The operation count is a rough model: only a clear excess skips
        # here; a borderline pass runs, and its warm-up enforces the cap.
        if prediction is not None and \
                prediction[0] > PREDICTION_SLACK * self.options.time_cap:
            seconds, reference = prediction
            return (f"time cap: predicted {seconds:.0f} s per run > "
                    f"{self.options.time_cap:g} s (scaled from N="
                    f"{reference['N']}, degree {reference['degree']:g})"
                    ), estimate
        return None, estimate

    def run(self, method: str, graph: GraphSpec, F: int,
            source: str = 'grid') -> List[dict]:
        r"""Measures both passes of one configuration (forward+backward is
        skipped when forward already was: it contains a forward)."""
        rows = []
        skipped_forward = None
        for pass_ in PASSES:
            reason, estimate = self.skip_reason(method, graph, F, pass_)
            if reason is None and skipped_forward is not None:
                reason = f'forward skipped ({skipped_forward})'
            if reason is not None:
                rows.append(self.row(method, graph, F, pass_, source,
                                     status='skipped', note=reason,
                                     est_peak_mb=estimate / MB))
                skipped_forward = skipped_forward or reason
                self.log(f'  skipped {method:12s} {graph.kind:8s} '
                         f'N={graph.num_nodes:<6d} d={graph.degree_label:8s} '
                         f'F={F:<4d} {pass_:16s} {reason}')
                continue
            result = self.measure(method, graph, F, pass_)
            status = result.pop('status', 'failed')
            note = result.pop('note', result.pop('error', ''))
            row = self.row(method, graph, F, pass_, source, status=status,
                           note=note, est_peak_mb=estimate / MB, **result)
            rows.append(row)
            self.log(self.describe(row))
            if status != 'ok':
                skipped_forward = skipped_forward or note
        return rows

    def measure(self, method: str, graph: GraphSpec, F: int,
                pass_: str) -> dict:
        options = self.options
        cap, _ = self.memory_cap()
        spec = {
            'method': method, 'graph': vars(graph), 'F': F, 'pass': pass_,
            'device': options.device, 'threads': options.threads,
            'seed': options.seed, 'memory_cap_bytes': cap,
            'timing': {'min_runs': options.min_runs,
                       'min_time': options.min_time,
                       'max_runs': options.max_runs,
                       'time_cap': options.time_cap},
        }
        self.wait_for_quiet()
        # Setup (graph generation) plus the warm-up and timed runs.
        timeout = 300 + 2 * options.time_cap * (options.min_runs + 2)
        result = common.run_isolated(
            measure, spec, cap, timeout,
            preload=['torch', 'torch_geometric', 'apnet_pyg.nn',
                     'benchmarks.propagation'])
        if 'error' in result:
            kind = 'skipped' if result['error'].startswith('memory') \
                else 'failed'
            return {'status': kind, 'note': result['error']}
        return result

    def wait_for_quiet(self) -> None:
        r"""Waits (a bounded time) until other processes keep at most
        :data:`BUSY_CORES` cores busy, so that a timing is not taken in the
        middle of someone else's burst of work."""
        budget = min(self.options.quiet_wait,
                     self.options.quiet_wait_total - self.waited)
        waited = common.wait_for_quiet(BUSY_CORES, budget)
        self.waited += waited
        if waited >= 1.0:
            self.log(f'  (waited {waited:.0f} s for other processes; '
                     f'{self.waited:.0f} s in all)')

    @staticmethod
    def describe(row: dict) -> str:
        text = (f"  {row['status']:7s} {row['method']:12s} "
                f"{row['graph']:8s} N={row['N']:<6d} "
                f"d={row['degree']:<8.4g} F={row['F']:<4d} {row['pass']:16s}")
        if row['status'] == 'ok':
            text += (f" median {common.format_ms(row['median_ms']):>8s} "
                     f"({row['runs']} runs)  peak "
                     f"{common.format_mb(row['peak_mb']):>8s}  "
                     f"other load {row['other_cores']:.2f} cores")
        else:
            text += f" {row['note']}"
        return text


def grid(options: Options
         ) -> Tuple[List[Tuple[str, GraphSpec, int]], Dict[str, str]]:
    r"""The configurations, smallest first so that time predictions can
    scale from measured neighbours, and why a real graph is missing if it
    is (by kind)."""
    configurations = []
    missing = {}
    wordnet, missing['wordnet'] = (wordnet_spec() if options.wordnet else
                                   (None, ''))
    cora, missing['cora'] = (cora_spec(options.planetoid_root)
                             if options.cora else (None, ''))
    # The drop-in defaults (proj_channels and all) are measured on the
    # small real graph only; the grid compares the paper's configuration.
    methods = [m for m in options.methods if m not in DEFAULTS]
    if cora is not None:
        for F in sorted(set(CORA_FEATURES) | set(options.features)):
            for method in options.methods:
                configurations.append((method, cora, F))
    for F in options.features:
        for N in options.nodes:
            for degree in options.degrees:
                graph = random_graph_spec(N, degree)
                if degree != 'complete' and graph.kind == 'complete':
                    continue  # The complete graph comes once, as 'complete'.
                for method in methods:
                    configurations.append((method, graph, F))
        if wordnet is not None:
            for method in methods:
                configurations.append((method, wordnet, F))
    return configurations, missing


def run_grid(options: Options,
             log=common.log) -> Tuple[List[dict], Dict[str, str]]:
    runner = Runner(options, log)
    configurations, missing = grid(options)
    log(f'{len(configurations)} configurations x {len(PASSES)} passes')
    for method, graph, F in configurations:
        runner.run(method, graph, F)
    if options.refine and SPARSE in options.methods and \
            DENSE in options.methods:
        refine_crossovers(runner, options, log)
    return runner.rows, missing


# ---------------------------------------------------------------------------
# Sparse / dense crossover
# ---------------------------------------------------------------------------
def _loglog_interpolate(points: Dict[float, float], x: float) -> float:
    r"""Piecewise-linear interpolation in log-log space, constant beyond the
    measured range."""
    xs = sorted(points)
    if x <= xs[0]:
        return points[xs[0]]
    if x >= xs[-1]:
        return points[xs[-1]]
    for left, right in zip(xs, xs[1:]):
        if left <= x <= right:
            t = (math.log(x) - math.log(left)) / (math.log(right) -
                                                  math.log(left))
            return math.exp((1 - t) * math.log(points[left]) +
                            t * math.log(points[right]))
    raise AssertionError


def _min_times(rows: Sequence[dict], method: str, N: int, F: int,
               pass_: str) -> Dict[float, float]:
    # The min: a burst of work elsewhere on the machine cannot fake a
    # crossing.
    return {
        row['degree']: row['min_ms']
        for row in rows
        if row['method'] == method and row['N'] == N and row['F'] == F
        and row['pass'] == pass_ and row['status'] == 'ok'
        and row['graph'] in ('random', 'complete')
    }


def find_crossover(rows: Sequence[dict], N: int, F: int,
                   pass_: str) -> Optional[dict]:
    r"""The average degree above which the dense layer is faster than the
    sparse one, at :obj:`N` nodes.

    The ratio :math:`t_\text{dense} / t_\text{sparse}` of the min times
    is taken at every
    degree where the sparse layer was measured (the dense time, flat in the
    degree, interpolated in log-log space where it was not measured there),
    and the crossing of 1 is interpolated linearly in
    :math:`(\log d, \log t_\text{dense} / t_\text{sparse})`.
    """
    sparse = _min_times(rows, SPARSE, N, F, pass_)
    dense = _min_times(rows, DENSE, N, F, pass_)
    if not sparse or not dense:
        return None
    degrees = sorted(sparse)
    log_ratio = [math.log(_loglog_interpolate(dense, d) / sparse[d])
                 for d in degrees]
    result = {'N': N, 'F': F, 'pass': pass_, 'degrees': degrees,
              'ratios': [math.exp(r) for r in log_ratio], 'degree': None,
              'bound': None, 'bracket': None}
    if log_ratio[0] <= 0:
        # Dense already faster at the sparsest measured graph.
        result.update(bound='below', degree=degrees[0])
        return result
    for (d1, r1), (d2, r2) in zip(zip(degrees, log_ratio),
                                  zip(degrees[1:], log_ratio[1:])):
        if r1 > 0 >= r2:
            t = r1 / (r1 - r2)
            degree = math.exp(math.log(d1) + t * (math.log(d2) -
                                                  math.log(d1)))
            result.update(degree=degree, bracket=(d1, d2))
            return result
    result.update(bound='above', degree=degrees[-1])
    return result


def _extrapolated_crossing(degrees: Sequence[float],
                           ratios: Sequence[float]) -> float:
    r"""Where the ratio would reach 1 beyond the last measured degree,
    following its log-log slope over the last two degrees (at least as steep
    as :math:`d^{-1/4}`; :math:`d^{-1}`, sparse time proportional to the
    edges, from a single point)."""
    slope = -1.0
    if len(degrees) >= 2:
        slope = (math.log(ratios[-1]) - math.log(ratios[-2])) / (
            math.log(degrees[-1]) - math.log(degrees[-2]))
        slope = min(slope, -0.25)
    return degrees[-1] * math.exp(-math.log(ratios[-1]) / slope)


def _next_refinement(rows: Sequence[dict], N: int, F: int) -> Optional[float]:
    r"""A degree where measuring the sparse layer pins the forward+backward
    crossover down: its current estimate, by log-log interpolation inside a
    bracket wider than 2x, or by extrapolation (at most to the log-midpoint
    of what is left) when the sparse layer is faster everywhere measured;
    :obj:`None` when the estimate is good enough."""
    crossover = find_crossover(rows, N, F, 'forward+backward')
    if crossover is None:
        return None
    degrees, ratios = crossover['degrees'], crossover['ratios']
    if crossover['bracket'] is not None:
        low, high = crossover['bracket']
        if high / low <= 2:
            return None
        candidate = crossover['degree']
    elif crossover['bound'] == 'below':
        # Dense faster even at the sparsest graph: one step towards 1.
        candidate = degrees[0] / 4
        if candidate < 1:
            return None
    else:
        # Up to the next degree the sparse layer was attempted at (and
        # skipped), or the complete graph.
        attempted = [row['degree'] for row in rows
                     if row['method'] == SPARSE and row['N'] == N
                     and row['F'] == F and row['degree'] > degrees[-1]
                     and row['graph'] in ('random', 'complete')]
        high = min(attempted, default=N - 1)
        candidate = min(_extrapolated_crossing(degrees, ratios),
                        math.sqrt(degrees[-1] * high))
    candidate = float(round(candidate))
    # Within 20% of a degree already tried: nothing new to learn there.
    tried = [row['degree'] for row in rows
             if row['method'] == SPARSE and row['N'] == N and row['F'] == F]
    if any(abs(math.log(candidate / d)) < math.log(1.2) for d in tried):
        return None
    return candidate


def refine_crossovers(runner: Runner, options: Options, log=common.log,
                      max_steps: int = 3) -> None:
    log('refining the sparse/dense crossover')
    for F in options.features:
        for N in options.nodes:
            for _ in range(max_steps):
                degree = _next_refinement(runner.rows, N, F)
                if degree is None:
                    break
                graph = random_graph_spec(N, degree)
                runner.run(SPARSE, graph, F, source='refinement')
                # The dense time is flat in the degree: measure it at the
                # refinement point only when that is cheap.
                prediction = predict_seconds(DENSE, graph, F,
                                             'forward+backward', runner.rows)
                if prediction is not None and prediction[0] < 1.0:
                    runner.run(DENSE, graph, F, source='refinement')


def crossover_rows(rows: Sequence[dict], options: Options) -> List[dict]:
    table = []
    for F in options.features:
        for N in options.nodes:
            for pass_ in PASSES:
                crossover = find_crossover(rows, N, F, pass_)
                if crossover is not None:
                    table.append(crossover)
    return table


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------
def _degree(text: str):
    return text if text == 'complete' else float(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--nodes', type=int, nargs='+',
                        help=f'node counts (default: {NODE_COUNTS})')
    parser.add_argument('--degrees', type=_degree, nargs='+',
                        help=f'average degrees or "complete" '
                        f'(default: {DEGREES})')
    parser.add_argument('--features', type=int, nargs='+',
                        help=f'feature sizes F (default: {FEATURES})')
    parser.add_argument('--methods', nargs='+', choices=list(METHODS),
                        help='methods (default: all)')
    parser.add_argument('--no-wordnet', action='store_true',
                        help='skip the WordNet noun graph')
    parser.add_argument('--no-cora', action='store_true',
                        help='skip the small real graph (Planetoid Cora)')
    parser.add_argument('--planetoid-root', default=PLANETOID_ROOT,
                        help='folder holding Cora/raw/ind.cora.* (default: '
                        '../shared/data/planetoid beside the repository)')
    parser.add_argument('--no-refine', action='store_true',
                        help='do not add degrees around the crossover')
    parser.add_argument('--time-cap', type=float, default=10.0,
                        help='skip a pass whose single run is predicted or '
                        'found to take longer (seconds, default: 10)')
    parser.add_argument('--memory-cap-gb', type=float, default=16.0,
                        help='skip a pass estimated to need more memory '
                        '(default: 16)')
    parser.add_argument('--min-runs', type=int, default=5,
                        help='timed runs after warm-up, at least (default: 5)')
    parser.add_argument('--quiet-wait', type=float, default=20.0,
                        help='before each pass, wait up to this many seconds '
                        'for other processes to go quiet (default: 20; 0: '
                        'never wait)')
    parser.add_argument('--quiet-wait-total', type=float, default=600.0,
                        help='stop waiting for quiet after this many seconds '
                        'in all (default: 600)')
    parser.add_argument('--min-time', type=float, default=None,
                        help='keep timing until this many seconds are '
                        'spent (default: 0.3, 0.1 with --quick)')


def options_from_args(args: argparse.Namespace) -> Options:
    quick = args.quick
    return Options(
        device=args.device,
        threads=args.threads,
        nodes=tuple(args.nodes or (QUICK_NODE_COUNTS if quick else
                                   NODE_COUNTS)),
        degrees=tuple(args.degrees or (QUICK_DEGREES if quick else DEGREES)),
        features=tuple(args.features or (QUICK_FEATURES if quick else
                                         FEATURES)),
        methods=tuple(args.methods or METHODS),
        wordnet=not (args.no_wordnet or quick),
        cora=not (args.no_cora or quick),
        planetoid_root=args.planetoid_root,
        refine=not (args.no_refine or quick),
        time_cap=args.time_cap,
        memory_cap=args.memory_cap_gb * GB,
        min_runs=args.min_runs,
        quiet_wait=0.0 if quick else args.quiet_wait,
        quiet_wait_total=args.quiet_wait_total,
        min_time=args.min_time if args.min_time is not None else (
            0.1 if quick else 0.3),
        quick=quick,
    )


def run(args: argparse.Namespace) -> str:
    r"""Runs the suite and writes CSV, summary and plots; returns the
    output directory."""
    from benchmarks import propagation_report

    options = options_from_args(args)
    machine, slug, out_dir = common.prepare_run(
        options.device, options.threads, options.quick, args.machine,
        args.out)
    command = getattr(args, 'command', None) or \
        'python -m benchmarks propagation'
    common.log(f'propagation benchmark on {slug} ({machine["cpu"]}, gpu: '
               f'{machine["gpu"]}, {options.threads} threads) -> {out_dir}')

    started = datetime.datetime.now()
    rows, missing = run_grid(options)
    elapsed = datetime.datetime.now() - started

    common.write_csv(osp.join(out_dir, 'propagation.csv'), rows, COLUMNS)
    crossovers = crossover_rows(rows, options)
    summary = propagation_report.write_report(
        out_dir, rows, crossovers, machine, options, slug, command,
        started, elapsed, missing)
    print(summary)
    return out_dir
