r"""The markdown summary of the propagation benchmark (its plots:
:mod:`benchmarks.propagation.plots`)."""

import os.path as osp
from typing import Dict, List, Optional, Sequence

import torch

from apnet_pyg.files import atomic_write_text
from benchmarks import common, workers
from benchmarks.common import (
    REPO_ROOT,
    format_mb,
    format_ms,
    markdown_table,
)
from benchmarks.propagation.cost_model import PREDICTION_SLACK
from benchmarks.propagation.grid import (
    DEFAULTS,
    DTYPES,
    METHODS,
    PROJ_CHANNELS,
    SPARSE,
    grid_methods,
)
from benchmarks.propagation.plots import degree_label, degree_rows, write_plots
from benchmarks.propagation.runner import BUSY_CORES, float32_rows

# The project's targets for the WordNet noun graph at 256-d (2 CPU cores).
TARGET_RATIO_TO_AGNN = 0.5
# ... and on the small graph (Cora): no slower than AGNNConv.
TARGET_SMALL_RATIO_TO_AGNN = 1.0
TARGET_SECONDS = 1.0
TARGET_MB = 4096.0
# Issue 54: the Triton layer on the WordNet noun graph, F = 64, pattern
# cached, forward+backward, and below AGNNConv's time.
TARGET_STATIC_MS = 1.0


def _is_busy(row: dict) -> bool:
    return (
        row.get('other_cores') is not None and row['other_cores'] > BUSY_CORES
    )


def _find(rows: Sequence[dict], **match) -> Optional[dict]:
    for row in rows:
        if all(row.get(key) == value for key, value in match.items()):
            return row
    return None


def _cell(row: Optional[dict], key: str, fmt) -> str:
    if row is None:
        return ''
    if row['status'] != 'ok':
        return 'skip' if row['status'] == 'skipped' else 'fail'
    text = fmt(row[key])
    return text + '*' if _is_busy(row) else text


# ---------------------------------------------------------------------------
# Headline
# ---------------------------------------------------------------------------
def headline(
    rows: Sequence[dict], crossovers: Sequence[dict], missing: Dict[str, str]
) -> List[str]:
    lines = []
    fwd_bwd = 'forward+backward'
    apnet = _find(
        rows,
        method=SPARSE,
        graph='wordnet',
        F=256,
        status='ok',
        **{'pass': fwd_bwd},
    )
    agnn = _find(
        rows,
        method='agnn',
        graph='wordnet',
        F=256,
        status='ok',
        **{'pass': fwd_bwd},
    )

    def verdict(ok: bool) -> str:
        return 'meets the target' if ok else 'MISSES the target'

    def busy(*measured) -> str:
        loads = [row['other_cores'] for row in measured if _is_busy(row)]
        if not loads:
            return ''
        return (
            f' [provisional: other processes kept {max(loads):.2f} cores busy]'
        )

    def ratio_text(apnet: dict, agnn: dict, target: float) -> str:
        ratio = apnet['median_ms'] / agnn['median_ms']
        return (
            f'**{ratio:.2f}** ({format_ms(apnet["median_ms"])} / '
            f'{format_ms(agnn["median_ms"])}, medians; target <= '
            f'{target:g}: {verdict(ratio <= target)}){busy(apnet, agnn)}'
        )

    if apnet is not None and agnn is not None:
        lines.append(
            f'- APNetConv / AGNNConv forward+backward time on the WordNet '
            f'noun graph, 256-d: '
            f'{ratio_text(apnet, agnn, TARGET_RATIO_TO_AGNN)}'
        )
    if apnet is not None:
        seconds = apnet['median_ms'] / 1e3
        forward = _find(
            rows,
            method=SPARSE,
            graph='wordnet',
            F=256,
            status='ok',
            **{'pass': 'forward'},
        )
        lines.append(
            f'- APNetConv on the WordNet noun graph ({apnet["N"]:,} nodes, '
            f'{apnet["E"]:,} edges), 256-d, forward+backward: '
            f'**{format_ms(apnet["median_ms"])}** median, '
            f'{format_ms(apnet["min_ms"])} min (target <= {TARGET_SECONDS:g}'
            f' s: {verdict(seconds <= TARGET_SECONDS)}); peak memory '
            f'**{format_mb(apnet["peak_mb"])}** (target <= '
            f'{TARGET_MB / 1024:g} GB: '
            + (
                'not measured'
                if apnet['peak_mb'] is None
                else verdict(apnet['peak_mb'] <= TARGET_MB)
            )
            + ')'
            + (
                f'; forward alone {format_ms(forward["median_ms"])}, '
                f'{format_mb(forward["peak_mb"])}'
                if forward
                else ''
            )
            + busy(apnet)
        )
    elif missing.get('wordnet'):
        lines.append(
            f'- WordNet noun graph not measured: {missing["wordnet"]}'
        )
    else:
        tried = _find(
            rows, method=SPARSE, graph='wordnet', F=256, **{'pass': fwd_bwd}
        )
        lines.append(
            '- WordNet noun graph not measured'
            + (f' ({tried["status"]}: {tried["note"]})' if tried else '')
        )
    defaults = _find(
        rows,
        method=DEFAULTS[0],
        graph='wordnet',
        F=256,
        status='ok',
        **{'pass': fwd_bwd},
    )
    if defaults is not None and agnn is not None:
        lines.append(
            f'- {METHODS[DEFAULTS[0]].label} / AGNNConv forward+backward '
            f'time on the WordNet noun graph, 256-d: '
            f'{ratio_text(defaults, agnn, TARGET_RATIO_TO_AGNN)}'
        )

    lines.extend(_static_graph_lines(rows, ratio_text, verdict, busy))

    cora = [
        row
        for row in rows
        if row['graph'] == 'cora'
        and row['pass'] == fwd_bwd
        and row['status'] == 'ok'
    ]
    for F in sorted({row['F'] for row in cora}):
        # The drop-in configuration; the table has the others.
        agnn = _find(cora, method='agnn', F=F)
        for method in DEFAULTS:
            apnet = _find(cora, method=method, F=F)
            if apnet is None or agnn is None:
                continue
            lines.append(
                f'- Small graph (Cora, {apnet["N"]:,} nodes, '
                f'{apnet["E"]:,} edges), F = {F}: {METHODS[method].label} '
                f'/ AGNNConv forward+backward: '
                f'{ratio_text(apnet, agnn, TARGET_SMALL_RATIO_TO_AGNN)}'
            )
    if not cora and missing.get('cora'):
        lines.append(f'- Cora not measured: {missing["cora"]}')

    found = [c for c in crossovers if c['pass'] == fwd_bwd]
    if found:
        parts = [
            f'N={c["N"]:,}, F={c["F"]}: {_crossover_text(c)}' for c in found
        ]
        lines.append(
            '- Sparse/dense crossover (forward+backward; dense '
            'faster above this average degree): ' + '; '.join(parts)
        )
    return lines


def _static_graph_lines(rows, ratio_text, verdict, busy) -> List[str]:
    r"""The static graph (the pattern cached, as in full-batch training)
    on the WordNet noun graph: the Triton and sparse layers against
    AGNNConv, forward+backward, at each F measured."""
    lines = []
    fwd_bwd = {'pass': 'forward+backward'}
    for F in sorted({row['F'] for row in rows if row['graph'] == 'wordnet'}):
        agnn = _find(
            rows, method='agnn', graph='wordnet', F=F, status='ok', **fwd_bwd
        )
        for method in ('apnet_triton_cached', 'apnet_sparse_cached'):
            apnet = _find(
                rows,
                method=method,
                graph='wordnet',
                F=F,
                status='ok',
                **fwd_bwd,
            )
            if apnet is None:
                continue
            text = (
                f'- {METHODS[method].label} on the WordNet noun graph, '
                f'F = {F}, forward+backward: '
                f'**{format_ms(apnet["median_ms"])}**'
            )
            if method == 'apnet_triton_cached' and F == 64:
                met = apnet['median_ms'] <= TARGET_STATIC_MS and (
                    agnn is None or apnet['median_ms'] < agnn['median_ms']
                )
                text += (
                    f' (target <= {TARGET_STATIC_MS:g} ms and below '
                    f'AGNNConv: {verdict(met)})'
                )
            if agnn is not None:
                text += '; / AGNNConv: ' + ratio_text(apnet, agnn, 1.0)
            lines.append(text + busy(apnet))
    return lines


def _crossover_text(crossover: dict) -> str:
    degree = crossover['degree']
    if crossover['bound'] == 'below':
        return f'< {degree:g} (dense faster at every measured degree)'
    if crossover['bound'] == 'above':
        return f'> {degree:g} (sparse faster at every measured degree)'
    return f'{degree:.3g}'


# ---------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------
def _method_text(settings) -> str:
    return f"""\
- **Layers** (one layer, `in_channels = F`, output `F` channels):
  `APNetConv(F, proj_channels={PROJ_CHANNELS})` on its default sparse path
  (SDDMM + CSR SpMM, hand-written backward; `kernel='sparse'`) and on PyG's
  generic message passing (`kernel='message_passing'`), `DenseAPNetConv(F,
  proj_channels={PROJ_CHANNELS})` on a boolean `[N, N]` adjacency built from
  the same edges (batch of one graph), and PyG's peers `AGNNConv()`
  (trainable beta) and `GATConv(F, F, heads=1)`. **APNet's projection has
  {PROJ_CHANNELS} output channels in every configuration**, whatever F.
  Every layer adds the self-loops itself. APNetConv keeps the CSR pattern of
  an `edge_index` tensor it has seen; the grid's APNet layers are called
  with a copy of `edge_index` every time, so that they rebuild it in every
  call and that is timed (the cost on a new graph); the `pattern cached`
  methods are the same layers called with the same `edge_index` every time
  (built once, as in full-batch training). On Cora the defaults
  are timed both ways: called with the same `edge_index` (as in full-batch
  training) and with a new one each call. The grid's layers use the paper's
  temperature 10 and one step.
- **Graphs**: uniformly random simple undirected graphs G(N, M) (both
  directions stored), average degree d = E / N with E the directed edges
  without self-loops, edge fraction E / (N (N - 1)); the complete graph
  (d = N - 1); the WordNet 3.0 noun hierarchy from
  `apnet_pyg.graph.wordnet.wordnet_noun_graph()` (hypernym and
  instance-hypernym edges, both directions); the small real graph, Planetoid
  Cora (2,708 nodes, 10,556 directed edges, read from the raw files), at
  F = 16 (the hidden width of PyG's AGNN model on Cora) and the grid's F,
  where `APNetConv (defaults)` is `APNetConv(F)` with the constructor
  defaults, the drop-in configuration. Features: standard normal,
  seed {settings.seed}, in {', '.join(settings.dtypes)} (the layer's
  parameters in the same dtype; the tables above the half-precision
  section are float32's).
- **Passes**: `forward` runs under `torch.no_grad()`; `forward+backward`
  records the graph and back-propagates a fixed random output gradient into
  the parameters and the input features (`x.requires_grad_()`, as inside a
  network).
- **Timing**: every (method, graph, F, pass) runs in a fresh worker process
  ({_workers_text(settings)}), with
  `torch.set_num_threads({settings.threads})`. One warm-up run (two when it
  takes < 0.1 s), then at least {settings.min_runs} timed runs and at least
  {settings.min_time:g} s of them (up to {settings.max_runs}); on the CPU
  `time.perf_counter()` around each run, on CUDA two CUDA events around it
  on the device's stream, recorded once the queue was drained. Tables
  report the median (min in the CSV).
- **Memory**: on CPU, the worker's peak resident set over the timed runs
  (`VmHWM`, reset after the warm-up, whose one-time costs are not counted,
  and after freeing garbage and trimming the heap) minus its resident set
  at that moment: what the pass allocates on top of its inputs, allocator
  slack included; not measured (`-`) where the peak cannot be reset. On CUDA,
  `torch.cuda.max_memory_allocated()` minus `memory_allocated()` before the
  pass. `setup_mb` in the CSV is the inputs' memory.
- **Skipped** configurations are recorded, not run: when the memory estimate
  (`est_peak_mb` plus inputs) exceeds {settings.memory_cap / common.GB:g} GB
  (or the free RAM); when a single run is predicted to take more than
  {PREDICTION_SLACK:g} x the {settings.time_cap:g} s time cap (the min time of
  the largest measured configuration of the same method, F and pass, scaled
  by an operation count) or is found to take more than the cap (the warm-up
  run, interrupted); and forward+backward whenever forward was skipped.
- **Load**: the 1-minute load average at the start and end of every timed
  pass (`load_start`, `load_end`; it includes the benchmark's own
  threads) and `other_cores`, the cores kept busy by other processes during
  the pass (machine CPU time minus the worker's, per second). Cells marked
  `*` ran with `other_cores` > {BUSY_CORES}: provisional. Before each pass
  the driver waited for other processes to use at most {BUSY_CORES} cores,
  up to {settings.quiet_wait:g} s ({settings.quiet_wait_total:g} s over the
  run).
- **Crossover**: for each N and F, the ratio t(dense) / t(sparse) of the
  min times (robust to a burst of load elsewhere) at every
  degree where the sparse layer was measured (the dense time, flat in the
  degree, interpolated in log-log space where it was not measured), and the
  degree where it crosses 1, interpolated linearly in (log degree, log
  ratio). Up to 3 degrees per N and F were added for the sparse layer at
  the running estimate of the forward+backward crossing (`source =
  refinement` in the CSV; see `benchmarks/README.md`)."""


def _workers_text(settings) -> str:
    method = workers.worker_start_method(settings.device)
    if method == 'forkserver':
        return (
            'forked from a server that has imported torch, PyG and '
            'the worker module'
        )
    why = workers.CUDA_SPAWN_REASON
    if torch.device(settings.device).type == 'cuda':
        return (
            'run in turn by one spawned worker, started again after a '
            'failed pass' + (f', since {why}' if why else '')
        )
    return 'spawned: a fresh interpreter each' + (
        f', since {why}' if why else ''
    )


def _floor_text(bandwidth: Optional[float]) -> str:
    if not bandwidth:
        return ''
    return f"""
- **Floor**: `floor_ms` in the CSV is the time a pass would take at the
  device-to-device copy bandwidth measured in this run
  ({bandwidth / 1e9:.0f} GB/s: the median of 10 copies of 1 GiB, read and
  write counted) moving only its unavoidable bytes: input features read
  and output written (forward), plus output gradient and input read and
  input gradient written (backward), float32, and the graph read once per
  pass (4-byte index and 4-byte weight per edge, self-loops included).
  Neighbour gathers are not counted: floor_ms / median_ms is the fraction
  of the copy bandwidth a pass would reach if it moved nothing else.
  `gather_floor_ms` adds each edge's source rows gathered once a pass
  (x_j, and h_j of the projection's width for APNetConv), the floor of a
  kernel whose gathers miss the cache: gather_floor_ms / median_ms is the
  achieved fraction of the bandwidth on those bytes."""


def machine_table(machine: Dict[str, str]) -> str:
    return markdown_table(
        ['', ''], [[key, value] for key, value in machine.items()]
    )


def _real_graph_table(rows: Sequence[dict], kind: str) -> Optional[str]:
    graph_rows = [row for row in rows if row['graph'] == kind]
    if not graph_rows:
        return None
    floors = any(row.get('floor_ms') for row in graph_rows)
    table = []
    for F in sorted({row['F'] for row in graph_rows}):
        for method in METHODS:
            forward = _find(
                graph_rows, method=method, F=F, **{'pass': 'forward'}
            )
            backward = _find(
                graph_rows, method=method, F=F, **{'pass': 'forward+backward'}
            )
            if forward is None and backward is None:
                continue
            note = next(
                (
                    row['note']
                    for row in (forward, backward)
                    if row is not None and row['status'] != 'ok'
                ),
                '',
            )
            table.append(
                [
                    METHODS[method].label,
                    F,
                    _cell(forward, 'median_ms', format_ms),
                    _cell(backward, 'median_ms', format_ms),
                    _cell(forward, 'peak_mb', format_mb),
                    _cell(backward, 'peak_mb', format_mb),
                ]
                + (
                    [
                        _floor_cell(backward),
                        _floor_cell(backward, 'gather_floor_ms'),
                    ]
                    if floors
                    else []
                )
                + [note]
            )
    return markdown_table(
        [
            'method',
            'F',
            'forward',
            'forward+backward',
            'peak (forward)',
            'peak (forward+backward)',
        ]
        + (
            ['floor / median (forward+backward)', 'gather floor / median']
            if floors
            else []
        )
        + ['note'],
        table,
    )


def _floor_cell(row: Optional[dict], key: str = 'floor_ms') -> str:
    # The fraction of the copy bandwidth the pass reaches on its
    # unavoidable bytes (see the Method's Floor).
    if row is None or row['status'] != 'ok' or not row.get(key):
        return ''
    return f'{row[key] / row["median_ms"]:.3f}'


def _grid_table(rows: Sequence[dict], settings, F: int, key: str, fmt) -> str:
    grid = [
        row
        for row in rows
        if row['F'] == F
        and row['source'] == 'grid'
        and row['graph'] in ('random', 'complete')
    ]
    header = ['degree', 'method'] + [f'N={N:,}' for N in settings.nodes]
    table = []
    for degree in settings.degrees:
        at_degree = degree_rows(grid, degree)
        for method in grid_methods(
            settings.methods, settings.defaults_on_all_graphs
        ):
            cells = []
            for N in settings.nodes:
                forward = _find(
                    at_degree, method=method, N=N, **{'pass': 'forward'}
                )
                backward = _find(
                    at_degree,
                    method=method,
                    N=N,
                    **{'pass': 'forward+backward'},
                )
                if forward is None and backward is None:
                    cells.append('')
                else:
                    cells.append(
                        f'{_cell(forward, key, fmt)} / '
                        f'{_cell(backward, key, fmt)}'
                    )
            table.append([degree_label(degree), METHODS[method].label] + cells)
    return markdown_table(header, table)


def _crossover_table(crossovers: Sequence[dict]) -> str:
    table = []
    for c in crossovers:
        measured = ', '.join(
            f'{d:g}: {r:.2g}' for d, r in zip(c['degrees'], c['ratios'])
        )
        if c['bound'] is None:
            fraction = f'{c["degree"] / (c["N"] - 1):.3g}'
        else:
            fraction = ''
        table.append(
            [
                f'{c["N"]:,}',
                c['F'],
                c['pass'],
                _crossover_text(c),
                fraction,
                measured,
            ]
        )
    return markdown_table(
        [
            'N',
            'F',
            'pass',
            'crossover degree',
            'edge fraction',
            'degree: t(dense) / t(sparse)',
        ],
        table,
    )


def _dtype_table(rows: Sequence[dict]) -> Optional[str]:
    r"""Each configuration measured in another dtype than float32: its
    time and peak memory in every dtype, and float32's time over each."""
    dtypes = [
        d for d in DTYPES if any(r.get('dtype', 'float32') == d for r in rows)
    ]
    if dtypes == ['float32'] or not dtypes:
        return None
    keys = []
    for row in rows:
        key = (row['method'], row['graph'], row['N'], row['E'], row['F'])
        key += (row['pass'],)
        if key not in keys:
            keys.append(key)
    table = []
    for method, graph, N, E, F, pass_ in keys:
        same = dict(method=method, graph=graph, N=N, E=E, F=F)
        cells = {
            dtype: _find(rows, dtype=dtype, **same, **{'pass': pass_})
            for dtype in dtypes
        }
        if all(
            cell is None for dtype, cell in cells.items() if dtype != 'float32'
        ):
            continue
        base = cells.get('float32')
        texts = []
        for dtype in dtypes:
            cell = cells[dtype]
            text = (
                f'{_cell(cell, "median_ms", format_ms)} / '
                f'{_cell(cell, "peak_mb", format_mb)}'
                if cell is not None
                else ''
            )
            if (
                dtype != 'float32'
                and cell is not None
                and base is not None
                and cell['status'] == base['status'] == 'ok'
            ):
                text += f' ({base["median_ms"] / cell["median_ms"]:.2f}x)'
            texts.append(text)
        table.append(
            [METHODS[method].label, graph, f'{N:,}', F, pass_] + texts
        )
    return markdown_table(
        ['method', 'graph', 'N', 'F', 'pass'] + dtypes, table
    )


def _skipped_table(rows: Sequence[dict]) -> str:
    table = [
        [
            METHODS[row['method']].label,
            row['graph'],
            f'{row["N"]:,}',
            'N-1' if row['graph'] == 'complete' else f'{row["degree"]:.3g}',
            row['F'],
            row.get('dtype', 'float32'),
            row['pass'],
            row['status'],
            row['note'],
        ]
        for row in rows
        if row['status'] != 'ok'
    ]
    return markdown_table(
        [
            'method',
            'graph',
            'N',
            'degree',
            'F',
            'dtype',
            'pass',
            'status',
            'reason',
        ],
        table,
    )


def write_report(
    out_dir: str,
    rows: Sequence[dict],
    crossovers: Sequence[dict],
    machine: Dict[str, str],
    settings,
    slug: str,
    command: str,
    started,
    elapsed,
    missing: Dict[str, str],
    bandwidth: Optional[float] = None,
) -> str:
    r"""Writes ``README.md`` and the plots; returns the headline text.
    :obj:`bandwidth` is the device's measured copy bandwidth (bytes/s),
    where it was measured. The tables and plots are of the float32
    passes; a section compares the dtypes where others were measured."""
    every_dtype, rows = rows, float32_rows(rows)
    plots = write_plots(out_dir, rows, crossovers, settings)
    lines = headline(rows, crossovers, missing)
    if bandwidth:
        lines.append(
            f'- Device-to-device copy bandwidth measured in this '
            f'run: {bandwidth / 1e9:.0f} GB/s (the floor of '
            f'`floor_ms` in the CSV)'
        )

    timed = [row for row in rows if row['status'] == 'ok']
    busy = [row for row in timed if _is_busy(row)]
    loads = [row[key] for row in timed for key in ('load_start', 'load_end')]
    load_text = (
        f'{len(busy)} of {len(timed)} timed passes ran while other processes '
        f'kept more than {BUSY_CORES} cores busy (marked `*`): '
        + (
            'treat those numbers as provisional.'
            if busy
            else 'none is provisional.'
        )
    )
    if loads:
        load_text += (
            f' 1-minute load average over the run: '
            f'{min(loads):.2f} to {max(loads):.2f}.'
        )

    sections = [
        f'# Propagation benchmark: `{slug}`',
        f'Generated on {started:%Y-%m-%d %H:%M} by `{command}` '
        f'({_duration(elapsed)}). Every number: '
        f'[propagation.csv](propagation.csv). How to read it: '
        f'{suite_readme_link(out_dir)}.'
        + (
            ' **Quick mode: the smallest configurations only.**'
            if settings.quick
            else ''
        ),
        '## Headline\n\n' + '\n'.join(lines) + '\n\n' + load_text,
        '## Machine\n\n' + machine_table(machine),
        '## Method\n\n' + _method_text(settings) + _floor_text(bandwidth),
    ]
    for kind, title in [
        ('wordnet', 'WordNet noun graph'),
        ('cora', 'Small graph: Cora'),
    ]:
        table = _real_graph_table(rows, kind)
        if table:
            sections.append(
                f'## {title}\n\nMedian time and peak memory of '
                f'one layer.\n\n' + table
            )
    for F in settings.features:
        sections.append(
            f'## Random graphs, F = {F}: median time, forward / '
            f'forward+backward\n\n'
            + _grid_table(rows, settings, F, 'median_ms', format_ms)
        )
        sections.append(
            f'## Random graphs, F = {F}: peak memory, forward / '
            f'forward+backward\n\n'
            + _grid_table(rows, settings, F, 'peak_mb', format_mb)
        )
    half = _dtype_table(every_dtype)
    if half:
        sections.append(
            '## Half precision\n\nMedian time (and, after the slash, peak '
            'memory) of each configuration in each dtype measured; in '
            "brackets, float32 time / this dtype's time.\n\n" + half
        )
    if crossovers:
        sections.append(
            '## Sparse / dense crossover\n\nThe average degree above which '
            '`DenseAPNetConv` is faster than the sparse `APNetConv`, '
            'interpolated in log space between measured degrees (see '
            'Method).\n\n' + _crossover_table(crossovers)
        )
    if plots:
        sections.append(
            '## Plots\n\n'
            + '\n\n'.join(f'![{name}]({name})' for name in plots)
        )
    if any(row['status'] != 'ok' for row in every_dtype):
        sections.append(
            '## Skipped and failed passes\n\n' + _skipped_table(every_dtype)
        )

    atomic_write_text(
        '\n\n'.join(sections) + '\n', osp.join(out_dir, 'README.md')
    )
    return '\n'.join(['', 'Headline:'] + lines + [load_text])


def suite_readme_link(out_dir: str) -> str:
    r"""A link to ``benchmarks/README.md`` from :obj:`out_dir`: relative
    inside the repository (``results/<machine>/``, ``.../quick/`` or any
    --out there), the bare name outside it, where no link would hold."""
    out_dir = osp.abspath(out_dir)
    if osp.commonpath([out_dir, REPO_ROOT]) != REPO_ROOT:
        return '`benchmarks/README.md`'
    readme = osp.join(REPO_ROOT, 'benchmarks', 'README.md')
    return f'[benchmarks/README.md]({osp.relpath(readme, out_dir)})'


def _duration(elapsed) -> str:
    seconds = int(elapsed.total_seconds())
    return f'{seconds // 60} min {seconds % 60} s'


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------
