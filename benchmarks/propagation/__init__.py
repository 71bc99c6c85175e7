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

This package is the suite's entry point (:func:`add_arguments`,
:func:`run`); its modules import one way, each only those listed before
it:

* :mod:`~benchmarks.propagation.grid`: the methods, graphs, grid and
  :class:`~benchmarks.propagation.grid.RunSettings`;
* :mod:`~benchmarks.propagation.cost_model`: memory and time estimates;
* :mod:`~benchmarks.propagation.worker`: one pass measured in a worker
  process;
* :mod:`~benchmarks.propagation.crossover`: the sparse / dense crossover;
* :mod:`~benchmarks.propagation.runner`: runs the grid, the CSV columns;
* :mod:`~benchmarks.propagation.report`: the markdown summary and plots.
"""

import argparse
import datetime
import math
import os.path as osp
import sys
from typing import List

import torch

from benchmarks import common, workers
from benchmarks.common import GB
from benchmarks.cuda_fork import PROPAGATION_PRELOAD
from benchmarks.propagation import report
from benchmarks.propagation.crossover import crossover_rows
from benchmarks.propagation.grid import (
    CUDA_ONLY,
    DEGREES,
    DTYPES,
    FEATURES,
    METHODS,
    NODE_COUNTS,
    PLANETOID_ROOT,
    QUICK_DEGREES,
    QUICK_FEATURES,
    QUICK_NODE_COUNTS,
    RunSettings,
    cora_spec,
    default_methods,
    grid_methods,
    random_graph_spec,
)
from benchmarks.propagation.runner import COLUMNS, float32_rows, run_grid

# The defaults of --quiet-wait and --min-time, which differ with --quick
# (None when not given, so that a flag given wins over --quick).
QUIET_WAIT, QUICK_QUIET_WAIT = 20.0, 0.0
MIN_TIME, QUICK_MIN_TIME = 0.3, 0.1


def _degree(text: str):
    if text == 'complete':
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number or 'complete' (got '{text}')"
        ) from None


def _random_graph(text: str):
    nodes, colon, degree = text.partition(':')
    try:
        if not colon:
            raise ValueError
        return int(nodes), _degree(degree)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f'expected NODES:DEGREE, e.g. 100000:16 or 100:complete (got '
            f"'{text}')"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--nodes',
        type=int,
        nargs='+',
        help=f'node counts (default: {NODE_COUNTS})',
    )
    parser.add_argument(
        '--degrees',
        type=_degree,
        nargs='+',
        help=f'average degrees or "complete" (default: {DEGREES})',
    )
    parser.add_argument(
        '--features',
        type=int,
        nargs='+',
        help=f'feature sizes F (default: {FEATURES})',
    )
    parser.add_argument(
        '--random-graphs',
        type=_random_graph,
        nargs='+',
        metavar='NODES:DEGREE',
        help='the random graphs, each a node count and an '
        'average degree (e.g. 100000:16 1000000:10), '
        'instead of every --nodes with every --degrees',
    )
    parser.add_argument(
        '--methods',
        nargs='+',
        choices=list(METHODS),
        help='methods (default: all)',
    )
    parser.add_argument(
        '--defaults-on-all-graphs',
        action='store_true',
        help='measure the drop-in defaults (apnet_default, '
        'apnet_default_new_graph, apnet_default_dropout, '
        'apnet_default_dropout_mp) on every graph, not on Cora only',
    )
    parser.add_argument(
        '--no-wordnet', action='store_true', help='skip the WordNet noun graph'
    )
    parser.add_argument(
        '--no-cora',
        action='store_true',
        help='skip the small real graph (Planetoid Cora)',
    )
    parser.add_argument(
        '--planetoid-root',
        default=None,
        help='folder holding Cora/raw/ind.cora.* (default: '
        '../shared/data/planetoid beside the repository, '
        'Cora skipped where it is missing; a folder named '
        'here must hold Cora)',
    )
    parser.add_argument(
        '--no-refine',
        action='store_true',
        help='do not add degrees around the crossover',
    )
    parser.add_argument(
        '--time-cap',
        type=float,
        default=10.0,
        help='skip a pass whose single run is predicted or '
        'found to take longer (seconds, default: 10)',
    )
    parser.add_argument(
        '--memory-cap-gb',
        type=float,
        default=16.0,
        help='skip a pass estimated to need more memory (default: 16)',
    )
    parser.add_argument(
        '--min-runs',
        type=int,
        default=5,
        help='timed runs after warm-up, at least (default: 5)',
    )
    parser.add_argument(
        '--quiet-wait',
        type=float,
        default=None,
        help='before each pass, wait up to this many seconds '
        f'for other processes to go quiet (default: '
        f'{QUIET_WAIT:g}, {QUICK_QUIET_WAIT:g} with --quick; '
        f'0: never wait)',
    )
    parser.add_argument(
        '--quiet-wait-total',
        type=float,
        default=600.0,
        help='stop waiting for quiet after this many seconds '
        'in all (default: 600; 0: never wait)',
    )
    parser.add_argument(
        '--budget',
        type=float,
        default=None,
        help='start no pass after this many seconds; the '
        'passes left are recorded as skipped (default: no '
        'limit)',
    )
    parser.add_argument(
        '--dtypes',
        nargs='+',
        choices=list(DTYPES),
        help='dtypes of the features and the layers, each '
        'configuration measured in each (default: float32)',
    )
    parser.add_argument(
        '--targets',
        action='store_true',
        help="measure issue 54's targets instead of the grid, "
        'in one process: the Triton kernel and layer at 1M nodes x '
        'degree 10 (F = 64, 256; float32, bfloat16, float16), the '
        'WordNet noun graph with the pattern cached and rebuilt '
        'against AGNNConv, floor fractions, peak memory and the '
        'autotuned configurations (targets.csv, targets.md, '
        'targets.png); --budget, --no-wordnet, --quick apply',
    )
    parser.add_argument(
        '--min-time',
        type=float,
        default=None,
        help='keep timing until this many seconds are '
        f'spent (default: {MIN_TIME:g}, {QUICK_MIN_TIME:g} '
        f'with --quick; 0: --min-runs runs only)',
    )


def _refuse(flag: str, values, ok, what: str) -> None:
    bad = [value for value in values if not ok(value)]
    if bad:
        raise ValueError(f'{flag} must be {what} (got {bad[0]:g})')


def _positive(value) -> bool:
    return math.isfinite(value) and value > 0


def _not_negative(value) -> bool:
    return math.isfinite(value) and value >= 0


def _too_dense(num_nodes: int, degree) -> bool:
    # The grid measures the complete graph once, as 'complete': a degree
    # that gives it (N - 1 or more) is left out on that node count.
    return (
        degree != 'complete'
        and random_graph_spec(num_nodes, degree).kind == 'complete'
    )


def _nodes(args: argparse.Namespace):
    if args.random_graphs:
        return sorted({N for N, _ in args.random_graphs})
    return args.nodes or (QUICK_NODE_COUNTS if args.quick else NODE_COUNTS)


def _degrees(args: argparse.Namespace):
    if args.random_graphs:
        return list(dict.fromkeys(d for _, d in args.random_graphs))
    return args.degrees or (QUICK_DEGREES if args.quick else DEGREES)


def check_arguments(args: argparse.Namespace) -> None:
    r"""Refuses bad input before anything runs: a negative degree would
    be measured as an edgeless graph, zero runs leave no median, a degree
    of N - 1 or more on every node count and methods measured on Cora only
    without Cora leave nothing to measure, and a :obj:`--planetoid-root`
    named explicitly must hold Cora."""
    _refuse('--nodes', args.nodes or (), lambda n: n >= 2, 'integers >= 2')
    if args.random_graphs:
        check_random_graphs(args)
    for flag in (
        '--nodes',
        '--degrees',
        '--features',
        '--methods',
        '--dtypes',
    ):
        values = getattr(args, flag[2:]) or ()
        repeated = [value for value in values if values.count(value) > 1]
        if repeated:
            # It would be measured again, and shown twice in every table.
            raise ValueError(
                f'{flag} names {repeated[0]} twice: pass each value once'
            )
    degrees = [d for d in args.degrees or () if d != 'complete']
    _refuse('--degrees', degrees, _positive, "positive numbers or 'complete'")
    _refuse(
        '--features', args.features or (), lambda n: n > 0, 'positive integers'
    )
    _refuse(
        '--min-runs', [args.min_runs], lambda n: n > 0, 'a positive integer'
    )
    _refuse(
        '--time-cap',
        [args.time_cap],
        _positive,
        'a positive number of seconds',
    )
    _refuse(
        '--memory-cap-gb', [args.memory_cap_gb], _positive, 'a positive number'
    )
    if args.budget is not None:
        _refuse(
            '--budget',
            [args.budget],
            _positive,
            'a positive number of seconds',
        )
    for flag in ('--min-time', '--quiet-wait', '--quiet-wait-total'):
        value = getattr(args, flag[2:].replace('-', '_'))
        if value is not None:
            _refuse(flag, [value], _not_negative, 'a number >= 0')
    nodes = _nodes(args)
    for N in nodes:
        for degree in degrees:
            if random_graph_spec(N, degree).num_edges == 0:
                raise ValueError(
                    f'--degrees {degree:g} gives no edge on '
                    f'{N} nodes (--nodes): pass degrees of at '
                    f'least 2 / N = {2 / N:.3g}'
                )
    for degree in degrees:
        if all(_too_dense(N, degree) for N in nodes):
            where = (
                f'{nodes[0]} nodes (--nodes)'
                if len(set(nodes)) == 1
                else f'every --nodes value (largest {max(nodes)})'
            )
            raise ValueError(
                f'--degrees {degree:g} is too dense for {where}: a random '
                f'graph on N nodes has a degree below N - 1 = '
                f"{max(nodes) - 1}; pass 'complete' for the complete graph, "
                f'or a smaller degree'
            )

    cora = not (args.no_cora or args.quick)
    cora_off = '--no-cora' if args.no_cora else '--quick'
    root = args.planetoid_root
    graph = why = None
    if root is not None:
        if not root.strip():
            raise ValueError(
                '--planetoid-root is empty: name the folder '
                'that holds Cora/raw/ind.cora.*, or leave the '
                'flag out'
            )
        if not cora:
            raise ValueError(
                f'--planetoid-root is read for Cora only, '
                f'which {cora_off} leaves out: drop one of '
                f'the two'
            )
        graph, why = cora_spec(root)
        if graph is None:
            raise ValueError(
                f"--planetoid-root '{root}': {why}; pass a "
                f'folder holding the intact Planetoid Cora files '
                f'Cora/raw/ind.cora.*'
            )
    methods = args.methods or default_methods(args.device)
    cuda_only = [method for method in methods if method in CUDA_ONLY]
    if cuda_only and not args.device.startswith('cuda'):
        raise ValueError(
            f'--methods {cuda_only[0]} runs on CUDA only: pass '
            f'--device cuda, or leave it out'
        )
    if not grid_methods(methods, args.defaults_on_all_graphs):
        # Measured on Cora only: without Cora the grid would be empty.
        named = ' '.join(methods)
        if not cora:
            raise ValueError(
                f'--methods {named} are measured on Cora only, '
                f'which {cora_off} leaves out: add a method of '
                f'the grid, e.g. apnet_sparse'
            )
        if graph is None:
            graph, why = cora_spec(PLANETOID_ROOT)
        if graph is None:
            raise ValueError(
                f'--methods {named} are measured on Cora only: '
                f'{why}; pass --planetoid-root, or add a method '
                f'of the grid, e.g. apnet_sparse'
            )


def check_random_graphs(args: argparse.Namespace) -> None:
    r"""Refuses :obj:`--random-graphs` beside :obj:`--nodes` or
    :obj:`--degrees` (two ways of naming the graphs), a graph named twice,
    and one that cannot be built: fewer than 2 nodes, no edge, or a degree
    of N - 1 or more (which is the complete graph, 'complete')."""
    for flag in ('--nodes', '--degrees'):
        if getattr(args, flag[2:]):
            raise ValueError(
                f'--random-graphs names the random graphs: drop {flag}'
            )
    seen = set()
    for N, degree in args.random_graphs:
        name = f'{N}:{degree if degree == "complete" else f"{degree:g}"}'
        if N < 2:
            raise ValueError(
                f'--random-graphs {name}: the node count must '
                f'be an integer >= 2'
            )
        if degree != 'complete':
            if not _positive(degree):
                raise ValueError(
                    f'--random-graphs {name}: the degree must '
                    f"be a positive number or 'complete'"
                )
            if random_graph_spec(N, degree).num_edges == 0:
                raise ValueError(
                    f'--random-graphs {name} gives no edge: '
                    f'pass a degree of at least 2 / N = '
                    f'{2 / N:.3g}'
                )
            if _too_dense(N, degree):
                raise ValueError(
                    f'--random-graphs {name} is too dense: a '
                    f'random graph on {N} nodes has a degree '
                    f'below N - 1 = {N - 1}; use {N}:complete'
                )
        graph = random_graph_spec(N, degree)
        if graph in seen:
            raise ValueError(
                f'--random-graphs names {name} twice: pass each graph once'
            )
        seen.add(graph)


def grid_notes(args: argparse.Namespace) -> List[str]:
    r"""What the grid leaves out of what the command line asked for: a
    degree too dense for some of the node counts (:func:`check_arguments`
    refuses one too dense for all)."""
    nodes = _nodes(args)
    notes = []
    for degree in args.degrees or ():
        dense = [N for N in nodes if _too_dense(N, degree)]
        if dense:
            notes.append(
                f'note: --degrees {degree:g} is too dense for '
                f'{", ".join(map(str, dense))} nodes (N - 1 or more): not '
                f"measured there ('complete' measures the complete graph)"
            )
    return notes


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    quick = args.quick
    return RunSettings(
        device=args.device,
        threads=args.threads,
        nodes=tuple(_nodes(args)),
        degrees=tuple(_degrees(args)),
        features=tuple(
            args.features or (QUICK_FEATURES if quick else FEATURES)
        ),
        methods=tuple(args.methods or default_methods(args.device)),
        wordnet=not (args.no_wordnet or quick),
        cora=not (args.no_cora or quick),
        planetoid_root=(
            PLANETOID_ROOT
            if args.planetoid_root is None
            else args.planetoid_root
        ),
        refine=not (args.no_refine or quick),
        time_cap=args.time_cap,
        memory_cap=args.memory_cap_gb * GB,
        min_runs=args.min_runs,
        quiet_wait=args.quiet_wait
        if args.quiet_wait is not None
        else (QUICK_QUIET_WAIT if quick else QUIET_WAIT),
        quiet_wait_total=args.quiet_wait_total,
        min_time=args.min_time
        if args.min_time is not None
        else (QUICK_MIN_TIME if quick else MIN_TIME),
        quick=quick,
        random_graphs=tuple(args.random_graphs or ()),
        defaults_on_all_graphs=args.defaults_on_all_graphs,
        budget=args.budget,
        dtypes=tuple(args.dtypes or ('float32',)),
    )


def run(args: argparse.Namespace) -> str:
    r"""Runs the suite and writes CSV, summary and plots; returns the
    output directory. With :obj:`--targets`, the targets' run instead
    (:mod:`benchmarks.propagation.targets`)."""
    if getattr(args, 'targets', False):
        from benchmarks.propagation import targets

        return targets.run(args)
    check_arguments(args)
    for note in grid_notes(args):
        common.log(note)
    settings = settings_from_args(args)
    machine, slug, out_dir = common.prepare_run(
        settings.device,
        settings.threads,
        settings.quick,
        args.machine,
        args.out,
    )
    command = (
        getattr(args, 'command', None) or 'python -m benchmarks propagation'
    )
    common.log(
        f'propagation benchmark on {slug} ({machine["cpu"]}, gpu: '
        f'{machine["gpu"]}, {settings.threads} threads) -> {out_dir}'
    )

    started = datetime.datetime.now()
    bandwidth = None
    if torch.device(settings.device).type == 'cuda':
        # The floor of every pass (floor_ms), measured in the same run, in
        # a worker like the passes (this process allocates no device
        # memory).
        result = workers.run_isolated(
            common.measure_copy_bandwidth,
            {'device': settings.device},
            settings.memory_cap,
            300,
            preload=PROPAGATION_PRELOAD,
        )
        bandwidth = result.get('bytes_per_second')
        common.log(
            f'device-to-device copy bandwidth: {bandwidth / 1e9:.0f} GB/s'
            if bandwidth
            else f'copy bandwidth not measured: {result.get("error")}'
        )
    rows, missing = run_grid(settings, bandwidth=bandwidth)
    elapsed = datetime.datetime.now() - started

    common.write_csv(osp.join(out_dir, 'propagation.csv'), rows, COLUMNS)
    crossovers = crossover_rows(float32_rows(rows), settings)
    summary = report.write_report(
        out_dir,
        rows,
        crossovers,
        machine,
        settings,
        slug,
        command,
        started,
        elapsed,
        missing,
        bandwidth,
    )
    print(summary)
    check_measured(rows, out_dir)
    return out_dir


def check_measured(rows: List[dict], out_dir: str) -> None:
    r"""Ends a run that measured no pass with an error (the command exits
    non-zero, one line saying why), and warns on standard error of the
    passes that failed in a run that measured some: the summary lists
    them, but a failure must not pass unseen."""
    failed = [row for row in rows if row['status'] == 'failed']
    where = osp.join(out_dir, 'README.md')
    if not any(row['status'] == 'ok' for row in rows):
        first = (failed or rows)[0] if rows else None
        reason = (
            f'first {"failure" if failed else "skip"}: '
            f'{first["method"]} on {first["graph"]} '
            f'N={first["N"]} F={first["F"]} {first["pass"]}: '
            f'{first["note"]}'
            if first
            else 'no pass ran'
        )
        raise RuntimeError(
            f'nothing was measured: {len(rows)} passes, {len(failed)} '
            f'failed, {len(rows) - len(failed)} skipped ({reason}); see '
            f'{where}'
        )
    if failed:
        print(
            f'warning: {len(failed)} of {len(rows)} passes failed (first: '
            f'{failed[0]["method"]} on {failed[0]["graph"]}: '
            f'{failed[0]["note"]}); see {where}',
            file=sys.stderr,
        )
