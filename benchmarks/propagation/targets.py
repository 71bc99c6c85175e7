r"""Issue 54's targets, measured in one process: the fused Triton kernel
and the layer around it on the graphs the issue names.

``python -m benchmarks propagation --device cuda --targets`` times, in
this order (the most wanted first, so that a ``--budget`` cuts the least
wanted):

* 1M nodes x degree 10, F = 64 and 256, float32: the kernel alone
  (:func:`~apnet_pyg.nn.triton_propagation.triton_attention_propagate` on
  a pattern built once, :math:`\mathbf{h}` given) and the layer
  (:class:`~apnet_pyg.nn.APNetConv` with :obj:`kernel='triton'`, called
  with the same :obj:`edge_index`: its pattern cached), forward+backward
  and forward;
* the WordNet noun graph, F = 64, float32: the layer with the pattern
  cached and rebuilt every call, the sparse layer (cached), AGNNConv, and
  the kernel and the layer captured in a CUDA graph (the static-graph path:
  the pattern reused, forward and backward replayed);
* 1M x 10 in bfloat16 and float16, then the layer rebuilding its pattern
  every call (the old benchmark's row), then the CUDA graphs at 1M x 10.

Every measurement reports its median time, its peak memory above its
inputs, its floor (the bytes it must move at the copy bandwidth measured in
the same run) and the fraction of it reached: for the layers the grid's
``gather_floor_ms`` (each entry's source rows gathered once a pass, as in
the issue's figures), for the kernel
:func:`~apnet_pyg.nn.triton_propagation.propagation_floor_bytes`, with the
kernels' own traffic (:func:`~apnet_pyg.nn.triton_propagation.
propagation_kernel_bytes`) as a fraction of the copy bandwidth beside it.
It writes ``targets.csv``, ``targets.md`` (the verdict on each target, the
tables, the autotuned configurations) and ``targets.png``.
"""

import argparse
import datetime
import os.path as osp
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch

from apnet_pyg.files import atomic_write_text, save_figure_atomically
from benchmarks import common
from benchmarks.common import format_mb, format_ms, markdown_table
from benchmarks.propagation.cost_model import element_size, gather_floor_bytes
from benchmarks.propagation.grid import (
    PAPER_CONFIG,
    PROJ_CHANNELS,
    GraphSpec,
    NewGraphEachCall,
    build_edge_index,
    wordnet_spec,
)

#: The columns of targets.csv.
COLUMNS = (
    'graph',
    'N',
    'E',
    'F',
    'dtype',
    'variant',
    'pass',
    'status',
    'runs',
    'min_ms',
    'median_ms',
    'peak_mb',
    'floor_ms',
    'floor_fraction',
    'model_gb',
    'bandwidth_fraction',
    'path',
    'note',
)

VARIANTS = {
    'kernel': 'Triton kernel alone, pattern cached',
    'layer': 'APNetConv (Triton), pattern cached',
    'layer_rebuild': 'APNetConv (Triton), pattern rebuilt every call',
    'sparse': 'APNetConv (sparse), pattern cached',
    'agnn': 'AGNNConv (PyG)',
    'kernel_graph': 'Triton kernel alone, CUDA graph',
    'layer_graph': 'APNetConv (Triton), pattern cached, CUDA graph',
}
#: Variants of the fused kernel (CUDA, or Triton's interpreter).
TRITON_VARIANTS = (
    'kernel',
    'layer',
    'layer_rebuild',
    'kernel_graph',
    'layer_graph',
)
GRAPH_VARIANTS = ('kernel_graph', 'layer_graph')

# The targets of issue 54.
TARGET_FLOOR_FRACTION = 0.5  # 1M x 10 forward+backward, F = 64 and 256
TARGET_WORDNET_MS = 1.0  # WordNet, F = 64, pattern cached, fwd+bwd
TARGET_HALF_SPEEDUP = 1.6  # bfloat16 over float32 at 1M x 10, F = 256

#: The graph of the large targets: nodes and average degree; with
#: --quick, a small one (tiny on the CPU, where the kernels run under
#: Triton's interpreter).
LARGE = (1_000_000, 10)
QUICK_LARGE = {'cuda': (20_000, 10), 'cpu': (24, 3)}


@dataclass(frozen=True)
class Measurement:
    graph: str  # 'random' or 'wordnet'
    F: int
    dtype: str
    variant: str
    pass_: str


def plan(quick: bool, wordnet: bool, cuda: bool) -> List[Measurement]:
    r"""The measurements, most wanted first."""
    both = ('forward+backward', 'forward')
    steps: List[Measurement] = []

    def add(graph, F, dtype, variants, passes=both):
        for variant in variants:
            for pass_ in passes:
                steps.append(Measurement(graph, F, dtype, variant, pass_))

    if quick and not cuda:
        # A smoke test of the whole path: Triton runs interpreted here.
        add('random', 16, 'float32', ('kernel', 'layer', 'agnn'), both[:1])
        add('random', 16, 'bfloat16', ('kernel',), both[:1])
        return steps
    widths = (16, 32) if quick else (64, 256)
    for F in widths:
        add('random', F, 'float32', ('kernel', 'layer'))
    if wordnet:
        add(
            'wordnet',
            widths[0],
            'float32',
            ('layer', 'layer_rebuild', 'agnn', 'sparse', 'kernel'),
        )
        if cuda:
            add(
                'wordnet',
                widths[0],
                'float32',
                GRAPH_VARIANTS,
                ('forward+backward',),
            )
    for F in reversed(widths):
        for dtype in ('bfloat16', 'float16'):
            add('random', F, dtype, ('kernel', 'layer'))
    for F in widths:
        add('random', F, 'float32', ('layer_rebuild',), ('forward+backward',))
    if cuda:
        for F in widths:
            add('random', F, 'float32', GRAPH_VARIANTS, ('forward+backward',))
    if not quick:
        # AGNNConv at 1M x 10 (the issue's 191 ms): for the bfloat16 ratio.
        add('random', widths[1], 'float32', ('agnn',), ('forward+backward',))
    return steps


# ---------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------
def random_undirected_graph(
    num_nodes: int, degree: float, device: torch.device, seed: int = 0
) -> torch.Tensor:
    r"""A uniformly random simple undirected graph of average degree
    :obj:`degree` (both directions stored), drawn on :obj:`device`: the
    grid's :func:`~benchmarks.propagation.grid.random_undirected_edges`
    takes seconds on the CPU at 10M edges."""
    generator = torch.Generator(device).manual_seed(seed)
    pairs = round(num_nodes * degree / 2)
    keys = torch.empty(0, dtype=torch.long, device=device)
    while keys.numel() < pairs:
        draw = int(1.1 * (pairs - keys.numel())) + 16
        i = torch.randint(
            num_nodes, (draw,), device=device, generator=generator
        )
        j = torch.randint(
            num_nodes, (draw,), device=device, generator=generator
        )
        keep = i != j
        i, j = i[keep], j[keep]
        new = torch.minimum(i, j) * num_nodes + torch.maximum(i, j)
        keys = torch.unique(torch.cat([keys, new]))
    keys = keys[
        torch.randperm(keys.numel(), device=device, generator=generator)
    ][:pairs]
    row, col = keys // num_nodes, keys % num_nodes
    source, target = torch.cat([row, col]), torch.cat([col, row])
    order = torch.argsort(source * num_nodes + target)
    return torch.stack([source[order], target[order]])


class Graphs:
    r"""The graphs of a run, each built once (on the device)."""

    def __init__(self, device: torch.device, quick: bool):
        self.device = device
        self.quick = quick
        self.built: Dict[str, Tuple[torch.Tensor, GraphSpec]] = {}
        self.patterns: Dict[str, object] = {}

    def get(self, kind: str) -> Tuple[torch.Tensor, GraphSpec]:
        if kind not in self.built:
            if kind == 'random':
                nodes, degree = (
                    QUICK_LARGE[self.device.type] if self.quick else LARGE
                )
                edge_index = random_undirected_graph(
                    nodes, degree, self.device
                )
                spec = GraphSpec('random', nodes, edge_index.size(1))
            else:
                spec, why = wordnet_spec()
                if spec is None:
                    raise RuntimeError(why)
                edge_index = build_edge_index(spec, 0).to(self.device)
            self.built[kind] = (edge_index, spec)
        return self.built[kind]

    def pattern(self, kind: str):
        r"""The CSR arrays of graph :obj:`kind`, rows the targets (as
        :class:`~apnet_pyg.nn.APNetConv` reads them), built once."""
        from apnet_pyg.nn.functional import edge_index_arrays

        if kind not in self.patterns:
            edge_index, spec = self.get(kind)
            size = (spec.num_nodes, spec.num_nodes)
            self.patterns[kind] = edge_index_arrays(edge_index, size, dim=1)[0]
        return self.patterns[kind]


# ---------------------------------------------------------------------------
# One measurement
# ---------------------------------------------------------------------------
def _layer(variant: str, F: int) -> torch.nn.Module:
    if variant == 'agnn':
        from torch_geometric.nn import AGNNConv

        return AGNNConv(requires_grad=True)
    from apnet_pyg.nn import APNetConv

    kernel = 'sparse' if variant == 'sparse' else 'triton'
    layer = APNetConv(F, kernel=kernel, **PAPER_CONFIG)
    return NewGraphEachCall(layer) if variant == 'layer_rebuild' else layer


def _step(
    m: Measurement, graphs: Graphs, device: torch.device
) -> Tuple[Callable[[], object], Dict[str, object]]:
    r"""The call a measurement times (one forward, or forward+backward),
    and what it needs kept alive."""
    from apnet_pyg.nn.triton_propagation import triton_attention_propagate

    dtype = getattr(torch, m.dtype)
    edge_index, spec = graphs.get(m.graph)
    generator = torch.Generator(device).manual_seed(0)
    backward = m.pass_ == 'forward+backward'

    def randn(*shape):
        return torch.randn(*shape, device=device, generator=generator).to(
            dtype
        )

    x = randn(spec.num_nodes, m.F)
    grad = randn(spec.num_nodes, m.F)
    if m.variant in ('kernel', 'kernel_graph'):
        pattern = graphs.pattern(m.graph)
        h = randn(spec.num_nodes, PROJ_CHANNELS)
        gamma = torch.tensor(10.0, device=device)
        kept = torch.ones(spec.num_nodes, dtype=torch.bool, device=device)
        inputs = [x, h, gamma]
        for tensor in inputs if backward else ():
            tensor.requires_grad_()

        def call():
            out = triton_attention_propagate(
                pattern, x, h, None, gamma, loop_kept=kept
            )
            if backward:
                return torch.autograd.grad(out, inputs, grad)
            return out

    else:
        torch.manual_seed(0)
        layer = _layer(m.variant, m.F).to(device, dtype)
        parameters = [p for p in layer.parameters() if p.requires_grad]
        inputs = [x] + parameters
        if backward:
            x.requires_grad_()

        def call():
            if not backward:
                with torch.no_grad():
                    return layer(x, edge_index)
            out = layer(x, edge_index)
            return torch.autograd.grad(out, inputs, grad)

    return call, {'x': x, 'grad': grad}


def _captured(call: Callable[[], object], device: torch.device):
    r""":obj:`call` captured in a CUDA graph after three eager calls on a
    side stream (which autotune and fill the pattern caches): the replay
    of the graph, and what it needs kept alive (the graph, its outputs,
    and the call, whose closure holds the inputs it reads)."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kept = call()
    # The replay reads the tensors the call's closure holds (its inputs,
    # the layer): kept alive with the graph, or their memory is reused.
    return (lambda: graph.replay()), (graph, kept, call)


def measure(
    m: Measurement,
    graphs: Graphs,
    device: torch.device,
    timing: Dict[str, float],
) -> Dict[str, object]:
    r"""Times one measurement: warm-up calls (autotuning happens there),
    then at least :obj:`timing['min_runs']` timed calls and
    :obj:`timing['min_time']` seconds of them, with the peak memory above
    the inputs."""
    call, alive = _step(m, graphs, device)
    if m.variant in GRAPH_VARIANTS:
        call, captured = _captured(call, device)
        alive['graph'] = captured
    common.warm_up(call, device, None)
    with common.PeakMemory(device) as memory:
        times = common.time_runs(
            call,
            device,
            int(timing['min_runs']),
            timing['min_time'],
            int(timing['max_runs']),
        )
    return dict(common.summarize_times(times), peak_mb=memory.peak_mb)


def _floors(
    m: Measurement,
    spec: GraphSpec,
    bandwidth: Optional[float],
    median_ms: float,
    symmetric: bool,
) -> Dict[str, Optional[float]]:
    from apnet_pyg.nn.triton_propagation import (
        propagation_floor_bytes,
        propagation_kernel_bytes,
    )

    if not bandwidth:
        return {}
    dtype = getattr(torch, m.dtype)
    backward = m.pass_ == 'forward+backward'
    values: Dict[str, Optional[float]] = {}
    if m.variant in ('kernel', 'kernel_graph'):
        N, E = spec.num_nodes, spec.num_edges
        floor = propagation_floor_bytes(
            N, N, E, m.F, PROJ_CHANNELS, dtype, loops=True, backward=backward
        )
        model = sum(
            propagation_kernel_bytes(
                N,
                N,
                E,
                m.F,
                PROJ_CHANNELS,
                dtype,
                loops=True,
                backward=backward,
                symmetric=symmetric,
            ).values()
        )
        values['model_gb'] = model / 1e9
        values['bandwidth_fraction'] = model / (median_ms / 1e3) / bandwidth
    else:
        proj = 0 if m.variant == 'agnn' else PROJ_CHANNELS
        floor = gather_floor_bytes(
            spec, m.F, m.pass_, proj, element_size(m.dtype)
        )
    values['floor_ms'] = 1e3 * floor / bandwidth
    values['floor_fraction'] = values['floor_ms'] / median_ms
    return values


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------
def run_targets(
    args: argparse.Namespace, log=common.log
) -> Tuple[List[dict], Dict[str, object]]:
    r"""Every measurement of :func:`plan` that the budget lets start; the
    rows and what the report needs besides (bandwidth, symmetry, why
    WordNet is missing)."""
    device = torch.device(args.device)
    cuda = device.type == 'cuda'
    quick = args.quick
    wordnet_missing = ''
    wordnet = not (args.no_wordnet or quick)
    if wordnet:
        spec, wordnet_missing = wordnet_spec()
        wordnet = spec is not None
    graphs = Graphs(device, quick)
    bandwidth = common.copy_bandwidth(device) if cuda else None
    if bandwidth:
        log(f'device-to-device copy bandwidth: {bandwidth / 1e9:.0f} GB/s')
    timing = dict(
        min_runs=args.min_runs,
        min_time=0.1 if args.min_time is None else args.min_time,
        max_runs=200,
    )
    triton_runs = _triton_runs_here(device)
    started = datetime.datetime.now()
    rows = []
    symmetric: Dict[str, bool] = {}
    for m in plan(quick, wordnet, cuda):
        edge_index, spec = graphs.get(m.graph)
        row = dict(
            graph=m.graph,
            N=spec.num_nodes,
            E=spec.num_edges,
            F=m.F,
            dtype=m.dtype,
            variant=m.variant,
            status='skipped',
            note='',
            **{'pass': m.pass_},
        )
        rows.append(row)
        spent = (datetime.datetime.now() - started).total_seconds()
        if args.budget is not None and spent > args.budget:
            row['note'] = f"budget: the run's --budget of {args.budget:g} s"
        elif m.variant in TRITON_VARIANTS and not triton_runs:
            row['note'] = triton_runs_why(device)
        elif m.variant in GRAPH_VARIANTS and not cuda:
            row['note'] = 'CUDA graphs need a CUDA device'
        if row['note']:
            log(_describe(row))
            continue
        if m.graph not in symmetric and m.variant in TRITON_VARIANTS:
            from apnet_pyg.nn.triton_propagation import is_symmetric_pattern

            symmetric[m.graph] = is_symmetric_pattern(graphs.pattern(m.graph))
        try:
            result = measure(m, graphs, device, timing)
        except Exception as error:  # Recorded, the next one runs.
            text = (str(error) or type(error).__name__).strip()
            row['status'] = (
                'skipped' if common.is_out_of_memory(error) else 'failed'
            )
            row['note'] = text.splitlines()[0][:200]
        else:
            row.update(result, status='ok')
            row.update(
                _floors(
                    m,
                    spec,
                    bandwidth,
                    row['median_ms'],
                    symmetric.get(m.graph, False),
                )
            )
            if m.variant in TRITON_VARIANTS:
                row['path'] = (
                    'symmetric'
                    if symmetric.get(m.graph)
                    and m.F <= PROJ_CHANNELS
                    and m.pass_ == 'forward+backward'
                    else 'general'
                    if m.pass_ == 'forward+backward'
                    else 'forward'
                )
        finally:
            if cuda:
                torch.cuda.empty_cache()
        log(_describe(row))
    extra = dict(
        bandwidth=bandwidth,
        symmetric=symmetric,
        wordnet_missing=wordnet_missing,
        elapsed=datetime.datetime.now() - started,
        started=started,
    )
    return rows, extra


def _triton_runs_here(device: torch.device) -> bool:
    from apnet_pyg.nn.triton_propagation import (
        interpreter_enabled,
        is_triton_available,
    )

    if not is_triton_available():
        return False
    return device.type == 'cuda' or interpreter_enabled()


def triton_runs_why(device: torch.device) -> str:
    from apnet_pyg.nn.triton_propagation import is_triton_available

    if not is_triton_available():
        return 'Triton is not installed'
    return (
        f'the Triton kernel runs on CUDA (here {device.type}, without '
        f'TRITON_INTERPRET=1)'
    )


def _describe(row: dict) -> str:
    text = (
        f'  {row["status"]:7s} {row["graph"]:8s} F={row["F"]:<4d} '
        f'{row["dtype"]:9s} {row["variant"]:14s} {row["pass"]:16s}'
    )
    if row['status'] != 'ok':
        return text + ' ' + row['note']
    text += (
        f' median {format_ms(row["median_ms"]):>8s} peak '
        f'{format_mb(row["peak_mb"]):>9s}'
    )
    if row.get('floor_fraction') is not None:
        text += f' floor/median {row["floor_fraction"]:.2f}'
    if row.get('bandwidth_fraction') is not None:
        text += f' traffic/copy {row["bandwidth_fraction"]:.2f}'
    return text


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def _find(rows, **match) -> Optional[dict]:
    for row in rows:
        if row['status'] == 'ok' and all(
            row.get(key) == value for key, value in match.items()
        ):
            return row
    return None


def verdicts(rows: List[dict]) -> List[str]:
    r"""The issue's targets, one line each: met, missed, or not measured
    (and why)."""
    fwd_bwd = {'pass': 'forward+backward'}
    lines = []

    def verdict(ok: bool) -> str:
        return 'meets the target' if ok else 'MISSES the target'

    widths = sorted({row['F'] for row in rows if row['graph'] == 'random'})
    large = next((row for row in rows if row['graph'] == 'random'), None)
    name = (
        f'{large["N"]:,} nodes x degree {large["E"] / large["N"]:.3g}'
        if large
        else 'the large graph'
    )
    for F in widths:
        for variant in ('layer', 'kernel'):
            row = _find(
                rows,
                graph='random',
                F=F,
                dtype='float32',
                variant=variant,
                **fwd_bwd,
            )
            what = (
                f'{name}, F = {F}, float32, {VARIANTS[variant]}, '
                'forward+backward'
            )
            if row is None or row.get('floor_fraction') is None:
                lines.append(f'- {what}: not measured')
                continue
            lines.append(
                f'- {what}: **{format_ms(row["median_ms"])}**, floor / '
                f'median **{row["floor_fraction"]:.2f}** (target >= '
                f'{TARGET_FLOOR_FRACTION:g}: '
                f'{verdict(row["floor_fraction"] >= TARGET_FLOOR_FRACTION)})'
                + (
                    f'; its traffic at {row["bandwidth_fraction"]:.2f} of '
                    f'the copy bandwidth'
                    if row.get('bandwidth_fraction') is not None
                    else ''
                )
            )
    layer = _find(rows, graph='wordnet', variant='layer', **fwd_bwd)
    agnn = _find(rows, graph='wordnet', variant='agnn', **fwd_bwd)
    if layer is None:
        lines.append('- WordNet noun graph, pattern cached: not measured')
    else:
        ok = layer['median_ms'] <= TARGET_WORDNET_MS and (
            agnn is not None and layer['median_ms'] < agnn['median_ms']
        )
        lines.append(
            f'- WordNet noun graph, F = {layer["F"]}, '
            f'{VARIANTS["layer"]}, forward+backward: '
            f'**{format_ms(layer["median_ms"])}**'
            + (
                f' against AGNNConv {format_ms(agnn["median_ms"])}'
                if agnn
                else ' (AGNNConv not measured)'
            )
            + f' (target <= {TARGET_WORDNET_MS:g} ms and below AGNNConv: '
            f'{verdict(ok)})'
        )
    F = max(widths) if widths else None
    for variant in ('layer', 'kernel'):
        same = dict(graph='random', F=F, variant=variant, **fwd_bwd)
        single = _find(rows, dtype='float32', **same)
        half = _find(rows, dtype='bfloat16', **same)
        what = f'bfloat16 / float32, {name}, F = {F}, {VARIANTS[variant]}'
        if single is None or half is None:
            lines.append(f'- {what}: not measured')
            continue
        speedup = single['median_ms'] / half['median_ms']
        lines.append(
            f'- {what}: **{speedup:.2f}x** ({format_ms(half["median_ms"])} '
            f'against {format_ms(single["median_ms"])}; target >= '
            f'{TARGET_HALF_SPEEDUP:g}x: '
            f'{verdict(speedup >= TARGET_HALF_SPEEDUP)})'
        )
    return lines


def _table(rows: List[dict], graph: str) -> Optional[str]:
    chosen = [row for row in rows if row['graph'] == graph]
    if not chosen:
        return None
    table = []
    for row in chosen:
        ok = row['status'] == 'ok'
        fraction = row.get('floor_fraction')
        traffic = row.get('bandwidth_fraction')
        table.append(
            [
                VARIANTS[row['variant']],
                row['F'],
                row['dtype'],
                row['pass'],
                format_ms(row['median_ms']) if ok else row['status'],
                format_mb(row['peak_mb']) if ok else '',
                '' if fraction is None else f'{fraction:.2f}',
                '' if traffic is None else f'{traffic:.2f}',
                row.get('path') or '',
                row['note'],
            ]
        )
    return markdown_table(
        [
            'variant',
            'F',
            'dtype',
            'pass',
            'median',
            'peak memory',
            'floor / median',
            'traffic / copy bandwidth',
            'backward',
            'note',
        ],
        table,
    )


def _configs_table() -> Optional[str]:
    from apnet_pyg.nn.triton_propagation import tuned_configs

    chosen = tuned_configs()
    if not chosen:
        return None
    return markdown_table(
        [
            'kernel',
            'num_x',
            'num_h',
            'degree',
            'dtypes',
            'BLOCK_E',
            'num_warps',
            'num_stages',
        ],
        [
            [
                c['kernel'],
                c['num_x'],
                c['num_h'],
                c['degree'],
                c['dtypes'],
                c['BLOCK_E'],
                c['num_warps'],
                c['num_stages'],
            ]
            for c in chosen
        ],
    )


def _plot(path: str, rows: List[dict]) -> bool:
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    measured = [
        row
        for row in rows
        if row['status'] == 'ok' and row['pass'] == 'forward+backward'
    ]
    if not measured:
        return False
    labels = [
        f'{row["graph"]} F={row["F"]} {row["dtype"]}\n{row["variant"]}'
        for row in measured
    ]
    figure, axis = plt.subplots(figsize=(max(6, 0.45 * len(labels)), 4.5))
    positions = range(len(measured))
    axis.bar(positions, [row['median_ms'] for row in measured], label='median')
    floors = [row.get('floor_ms') for row in measured]
    if any(floors):
        axis.scatter(
            positions,
            [f if f else float('nan') for f in floors],
            color='black',
            marker='_',
            s=200,
            label='floor',
        )
    axis.set_yscale('log')
    axis.set_ylabel('forward+backward, median (ms)')
    axis.set_xticks(list(positions))
    axis.set_xticklabels(labels, rotation=90, fontsize=6)
    axis.legend()
    figure.tight_layout()
    save_figure_atomically(figure, path)
    plt.close(figure)
    return True


def write_report(
    out_dir: str,
    rows: List[dict],
    extra: Dict[str, object],
    machine: Dict[str, str],
    slug: str,
    command: str,
) -> str:
    r"""Writes ``targets.md`` (and ``targets.png``); returns the verdicts'
    text."""
    lines = verdicts(rows)
    bandwidth = extra['bandwidth']
    plotted = _plot(osp.join(out_dir, 'targets.png'), rows)
    symmetric = extra['symmetric']
    seconds = int(extra['elapsed'].total_seconds())
    sections = [
        f'# Issue 54 targets: `{slug}`',
        f'Generated on {extra["started"]:%Y-%m-%d %H:%M} by `{command}` '
        f'({seconds // 60} min {seconds % 60} s). Every number: '
        f'[targets.csv](targets.csv).',
        '## Targets\n\n' + '\n'.join(lines),
        '## Method\n\n'
        f'One process; every measurement after warm-up calls (autotuning '
        f'happens there), the median of at least its minimum runs, each '
        f'timed with CUDA events around it once the queue was drained (on '
        f'the CPU, `time.perf_counter()`); peak memory from '
        f'`torch.cuda.max_memory_allocated()` above the inputs (the '
        f"resident set's peak on the CPU). Layers: `APNetConv(F, "
        f'proj_channels={PROJ_CHANNELS}, '
        f'temperature=10, num_steps=1, teleport=None, '
        f'kernel=...)` in the dtype named, '
        f'self-loops added; AGNNConv with a trainable beta. "pattern '
        f'cached": called with the same `edge_index` every time; "rebuilt": '
        f'a copy every call. The kernel alone: '
        f'`triton_attention_propagate` on the pattern built once, '
        f'`h` [N, {PROJ_CHANNELS}] given, every node keeping its self-loop. '
        f'CUDA graph: the step (forward and backward) captured after three '
        f'eager steps, its replay timed. Floor: '
        + (
            f'the copy bandwidth measured in this run, '
            f'{bandwidth / 1e9:.0f} GB/s, over the gather floor of the '
            f"layers (the grid's `gather_floor_ms`) or the kernel's "
            f'`propagation_floor_bytes`; "traffic / copy bandwidth" is the '
            f"kernels' own bytes (`propagation_kernel_bytes`) over the time, "
            f'as a fraction of that bandwidth.'
            if bandwidth
            else 'not measured (no CUDA device).'
        )
        + (
            ' Backward paths: '
            + ', '.join(
                f'{graph} '
                + ('symmetric (one pass)' if sym else 'general (two passes)')
                for graph, sym in symmetric.items()
            )
            + ' (F <= H takes the one pass on a symmetric pattern).'
            if symmetric
            else ''
        ),
    ]
    large = next((row for row in rows if row['graph'] == 'random'), None)
    for graph, title in (
        (
            'random',
            f'Random graph: {large["N"]:,} nodes x degree '
            f'{large["E"] / large["N"]:.3g}'
            if large
            else 'Random graph',
        ),
        ('wordnet', 'WordNet noun graph'),
    ):
        table = _table(rows, graph)
        if table:
            sections.append(f'## {title}\n\n' + table)
        elif graph == 'wordnet' and extra.get('wordnet_missing'):
            sections.append(
                f'## {title}\n\nNot measured: {extra["wordnet_missing"]}'
            )
    configs = _configs_table()
    sections.append(
        '## Autotuned configurations\n\n'
        + (configs or 'None (no launch was large enough, or none ran).')
    )
    if plotted:
        sections.append('## Plot\n\n![targets.png](targets.png)')
    sections.append(
        '## Machine\n\n'
        + ', '.join(f'{key} {value}' for key, value in machine.items())
    )
    atomic_write_text(
        '\n\n'.join(sections) + '\n', osp.join(out_dir, 'targets.md')
    )
    return '\n'.join(lines)


def run(args: argparse.Namespace) -> str:
    r"""The :obj:`--targets` run of the propagation suite; returns the
    output directory."""
    machine, slug, out_dir = common.prepare_run(
        args.device, args.threads, args.quick, args.machine, args.out
    )
    command = (
        getattr(args, 'command', None)
        or 'python -m benchmarks propagation --targets'
    )
    common.log(f'issue 54 targets on {slug} -> {out_dir}')
    rows, extra = run_targets(args)
    common.write_csv(osp.join(out_dir, 'targets.csv'), rows, COLUMNS)
    text = write_report(out_dir, rows, extra, machine, slug, command)
    configs = _configs_table()
    common.log('\nTargets:\n' + text)
    if configs:
        common.log('\nAutotuned configurations:\n' + configs)
    if not any(row['status'] == 'ok' for row in rows):
        raise RuntimeError(
            f'nothing was measured ({len(rows)} measurements; first: '
            f'{rows[0]["note"] if rows else "none planned"}); see '
            f'{osp.join(out_dir, "targets.md")}'
        )
    return out_dir
