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
from typing import List

from benchmarks import common
from benchmarks.common import GB
from benchmarks.propagation import report
from benchmarks.propagation.crossover import crossover_rows
from benchmarks.propagation.grid import (
    DEGREES,
    FEATURES,
    METHODS,
    NODE_COUNTS,
    PLANETOID_ROOT,
    QUICK_DEGREES,
    QUICK_FEATURES,
    QUICK_NODE_COUNTS,
    RunSettings,
    cora_spec,
    grid_methods,
    random_graph_spec,
)
from benchmarks.propagation.runner import COLUMNS, run_grid


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
            f"expected a number or 'complete' (got '{text}')") from None


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
    parser.add_argument('--planetoid-root', default=None,
                        help='folder holding Cora/raw/ind.cora.* (default: '
                        '../shared/data/planetoid beside the repository, '
                        'Cora skipped where it is missing; a folder named '
                        'here must hold Cora)')
    parser.add_argument('--no-refine', action='store_true',
                        help='do not add degrees around the crossover')
    parser.add_argument('--time-cap', type=float, default=10.0,
                        help='skip a pass whose single run is predicted or '
                        'found to take longer (seconds, default: 10)')
    parser.add_argument('--memory-cap-gb', type=float, default=16.0,
                        help='skip a pass estimated to need more memory '
                        '(default: 16)')
    parser.add_argument('--min-runs', type=int, default=5,
                        help='timed runs after warm-up, at least (default: '
                        '5)')
    parser.add_argument('--quiet-wait', type=float, default=None,
                        help='before each pass, wait up to this many seconds '
                        f'for other processes to go quiet (default: '
                        f'{QUIET_WAIT:g}, {QUICK_QUIET_WAIT:g} with --quick; '
                        f'0: never wait)')
    parser.add_argument('--quiet-wait-total', type=float, default=600.0,
                        help='stop waiting for quiet after this many seconds '
                        'in all (default: 600; 0: never wait)')
    parser.add_argument('--min-time', type=float, default=None,
                        help='keep timing until this many seconds are '
                        f'spent (default: {MIN_TIME:g}, {QUICK_MIN_TIME:g} '
                        f'with --quick; 0: --min-runs runs only)')


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
    return degree != 'complete' and \
        random_graph_spec(num_nodes, degree).kind == 'complete'


def _nodes(args: argparse.Namespace):
    return args.nodes or (QUICK_NODE_COUNTS if args.quick else NODE_COUNTS)


def check_arguments(args: argparse.Namespace) -> None:
    r"""Refuses bad input before anything runs: a negative degree would
    be measured as an edgeless graph, zero runs leave no median, a degree
    of N - 1 or more on every node count and methods measured on Cora only
    without Cora leave nothing to measure, and a :obj:`--planetoid-root`
    named explicitly must hold Cora."""
    _refuse('--nodes', args.nodes or (), lambda n: n >= 2,
            'integers >= 2')
    for flag in ('--nodes', '--degrees', '--features', '--methods'):
        values = getattr(args, flag[2:]) or ()
        repeated = [value for value in values if values.count(value) > 1]
        if repeated:
            # It would be measured again, and shown twice in every table.
            raise ValueError(f"{flag} names {repeated[0]} twice: pass each "
                             f"value once")
    degrees = [d for d in args.degrees or () if d != 'complete']
    _refuse('--degrees', degrees, _positive,
            "positive numbers or 'complete'")
    _refuse('--features', args.features or (), lambda n: n > 0,
            'positive integers')
    _refuse('--min-runs', [args.min_runs], lambda n: n > 0,
            'a positive integer')
    _refuse('--time-cap', [args.time_cap], _positive,
            'a positive number of seconds')
    _refuse('--memory-cap-gb', [args.memory_cap_gb], _positive,
            'a positive number')
    for flag in ('--min-time', '--quiet-wait', '--quiet-wait-total'):
        value = getattr(args, flag[2:].replace('-', '_'))
        if value is not None:
            _refuse(flag, [value], _not_negative, 'a number >= 0')
    nodes = _nodes(args)
    for N in nodes:
        for degree in degrees:
            if random_graph_spec(N, degree).num_edges == 0:
                raise ValueError(f'--degrees {degree:g} gives no edge on '
                                 f'{N} nodes (--nodes): pass degrees of at '
                                 f'least 2 / N = {2 / N:.3g}')
    for degree in degrees:
        if all(_too_dense(N, degree) for N in nodes):
            where = (f'{nodes[0]} nodes (--nodes)' if len(set(nodes)) == 1
                     else f'every --nodes value (largest {max(nodes)})')
            raise ValueError(
                f"--degrees {degree:g} is too dense for {where}: a random "
                f"graph on N nodes has a degree below N - 1 = "
                f"{max(nodes) - 1}; pass 'complete' for the complete graph, "
                f"or a smaller degree")

    cora = not (args.no_cora or args.quick)
    cora_off = '--no-cora' if args.no_cora else '--quick'
    root = args.planetoid_root
    graph = why = None
    if root is not None:
        if not root.strip():
            raise ValueError('--planetoid-root is empty: name the folder '
                             'that holds Cora/raw/ind.cora.*, or leave the '
                             'flag out')
        if not cora:
            raise ValueError(f'--planetoid-root is read for Cora only, '
                             f'which {cora_off} leaves out: drop one of '
                             f'the two')
        graph, why = cora_spec(root)
        if graph is None:
            raise ValueError(f"--planetoid-root '{root}': {why}; pass a "
                             f"folder holding the intact Planetoid Cora files "
                             f"Cora/raw/ind.cora.*")
    methods = args.methods or list(METHODS)
    if not grid_methods(methods):
        # Measured on Cora only: without Cora the grid would be empty.
        named = ' '.join(methods)
        if not cora:
            raise ValueError(f'--methods {named} are measured on Cora only, '
                             f'which {cora_off} leaves out: add a method of '
                             f'the grid, e.g. apnet_sparse')
        if graph is None:
            graph, why = cora_spec(PLANETOID_ROOT)
        if graph is None:
            raise ValueError(f'--methods {named} are measured on Cora only: '
                             f'{why}; pass --planetoid-root, or add a method '
                             f'of the grid, e.g. apnet_sparse')


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
                f"note: --degrees {degree:g} is too dense for "
                f"{', '.join(map(str, dense))} nodes (N - 1 or more): not "
                f"measured there ('complete' measures the complete graph)")
    return notes


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    quick = args.quick
    return RunSettings(
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
        planetoid_root=(PLANETOID_ROOT if args.planetoid_root is None else
                        args.planetoid_root),
        refine=not (args.no_refine or quick),
        time_cap=args.time_cap,
        memory_cap=args.memory_cap_gb * GB,
        min_runs=args.min_runs,
        quiet_wait=args.quiet_wait if args.quiet_wait is not None else (
            QUICK_QUIET_WAIT if quick else QUIET_WAIT),
        quiet_wait_total=args.quiet_wait_total,
        min_time=args.min_time if args.min_time is not None else (
            QUICK_MIN_TIME if quick else MIN_TIME),
        quick=quick,
    )


def run(args: argparse.Namespace) -> str:
    r"""Runs the suite and writes CSV, summary and plots; returns the
    output directory."""
    check_arguments(args)
    for note in grid_notes(args):
        common.log(note)
    settings = settings_from_args(args)
    machine, slug, out_dir = common.prepare_run(
        settings.device, settings.threads, settings.quick, args.machine,
        args.out)
    command = getattr(args, 'command', None) or \
        'python -m benchmarks propagation'
    common.log(f'propagation benchmark on {slug} ({machine["cpu"]}, gpu: '
               f'{machine["gpu"]}, {settings.threads} threads) -> {out_dir}')

    started = datetime.datetime.now()
    rows, missing = run_grid(settings)
    elapsed = datetime.datetime.now() - started

    common.write_csv(osp.join(out_dir, 'propagation.csv'), rows, COLUMNS)
    crossovers = crossover_rows(rows, settings)
    summary = report.write_report(
        out_dir, rows, crossovers, machine, settings, slug, command,
        started, elapsed, missing)
    print(summary)
    return out_dir
