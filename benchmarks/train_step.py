r"""ms per APNet training episode in the AWA2 configuration, by stage.

One episode of the paper's episodic training on AWA2: N = 30 classes x
K = 1 image, 85-d attributes (the real AWA2 class side shipped with the
package), 2048-d image features, 3 centroid experts, 2048-d class vectors,
relation head with 2048 hidden units, APNetConv with a 256-d projection,
Adam (fused where torch supports it). The step is timed as a whole and
stage by stage: encoder, class graph, propagation, head (+ loss),
backward, optimizer step. Image features are random non-negative numbers:
the cost of a step does not depend on their values.
"""

import argparse
import os.path as osp
import statistics
import time
from typing import Dict, List

import torch
import torch.nn.functional as F

from apnet_pyg.files import atomic_write_text
from benchmarks.common import (
    LoadMonitor,
    PeakMemory,
    fill_defaults,
    log,
    markdown_table,
    prepare_run,
    synchronize,
    write_csv,
)

STAGES = ['encoder', 'graph', 'propagation', 'head', 'backward', 'optimizer']
COLUMNS = [
    'graph',
    'stage',
    'median_ms',
    'min_ms',
    'runs',
    'peak_mb',
    'threads',
    'other_cores',
    'load_start',
    'load_end',
]


GRAPHS = ['learned', 'wordnet', 'none']
#: The defaults of --graphs, --steps and --warmup, and with --quick; an
#: explicit flag wins over both.
DEFAULTS = {'graphs': GRAPHS, 'steps': 100, 'warmup': 10}
QUICK_DEFAULTS = {'graphs': ['learned'], 'steps': 5, 'warmup': 2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--graphs',
        nargs='+',
        default=None,
        choices=GRAPHS,
        help='class graphs (default: all; learned with --quick)',
    )
    parser.add_argument(
        '--steps',
        type=int,
        default=None,
        help='timed episodes per configuration (default: 100, 5 with --quick)',
    )
    parser.add_argument(
        '--warmup',
        type=int,
        default=None,
        help='untimed episodes first (default: 10, 2 with --quick; 0: none)',
    )


def apply_defaults(args: argparse.Namespace) -> None:
    r"""Fills in the options not given (:data:`DEFAULTS`, or
    :data:`QUICK_DEFAULTS` with --quick) and refuses bad ones."""
    fill_defaults(args, DEFAULTS, QUICK_DEFAULTS)
    if args.steps < 1:
        raise ValueError(
            f'--steps must be a positive integer (got {args.steps})'
        )
    if args.warmup < 0:
        raise ValueError(
            f'--warmup must be an integer >= 0 (got {args.warmup})'
        )
    if len(set(args.graphs)) < len(args.graphs):
        raise ValueError(
            f'--graphs names a graph twice ({" ".join(args.graphs)})'
        )


def _episode_setup(graph: str, device: torch.device):
    from apnet_pyg.data import load_xlsa17
    from apnet_pyg.zsl import TrainConfig
    from apnet_pyg.zsl.factory import build_model, make_optimizer

    config = TrainConfig(graph=graph)
    data = load_xlsa17(
        None, 'AWA2', attributes=config.attributes, load_features=False
    )
    # The model training builds (seed 0), without image features.
    model = build_model(
        config, data, data.seen_classes, image_channels=2048
    ).to(device)
    torch.manual_seed(0)
    optimizer = make_optimizer(model, config)
    attributes = data.attributes.to(device)
    features = torch.rand(4096, 2048, device=device) * 2
    generator = torch.Generator().manual_seed(1)
    seen = data.seen_classes

    def sample():
        classes = seen[
            torch.randperm(seen.numel(), generator=generator)[: config.n_way]
        ].to(device)
        images = torch.randint(
            0, features.size(0), (config.n_way,), generator=generator
        ).to(device)
        return classes, features[images]

    return model, optimizer, attributes, sample


def _step(
    model, optimizer, attributes, classes, images, device
) -> Dict[str, float]:
    r"""One training episode; seconds per stage (synchronised between
    stages on CUDA)."""
    times = {}
    target = torch.arange(classes.numel(), device=device)

    def mark(stage, start):
        synchronize(device)
        now = time.perf_counter()
        times[stage] = now - start
        return now

    start = time.perf_counter()
    x0 = model.encoder(attributes[classes])
    start = mark('encoder', start)
    edge_index = edge_weight = None
    if model.conv is not None:
        edge_index, edge_weight = model.class_graph(x0, classes)
    start = mark('graph', start)
    x = (
        model.conv(x0, edge_index, edge_weight)
        if model.conv is not None
        else x0
    )
    start = mark('propagation', start)
    loss = F.cross_entropy(model.logits(model.scores(x, images)), target)
    start = mark('head', start)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    start = mark('backward', start)
    optimizer.step()
    mark('optimizer', start)
    return times


def measure(args) -> List[dict]:
    r"""Times every graph's episodes round-robin (one episode of each graph
    in turn), so that all configurations see the same machine state: run
    one after the other, the same configuration varied by up to a third
    between runs on a 2-core machine (allocator and cache state)."""
    device = torch.device(args.device)
    setups = {graph: _episode_setup(graph, device) for graph in args.graphs}
    for model, optimizer, attributes, sample in setups.values():
        for _ in range(args.warmup):
            _step(model, optimizer, attributes, *sample(), device)
    episodes = {
        graph: [setup[-1]() for _ in range(args.steps)]
        for graph, setup in setups.items()
    }
    per_stage = {
        graph: {stage: [] for stage in STAGES + ['total']} for graph in setups
    }
    with LoadMonitor() as load, PeakMemory(device) as memory:
        for step in range(args.steps):
            for graph, (model, optimizer, attributes, _) in setups.items():
                times = _step(
                    model,
                    optimizer,
                    attributes,
                    *episodes[graph][step],
                    device,
                )
                for stage in STAGES:
                    per_stage[graph][stage].append(times[stage])
                per_stage[graph]['total'].append(sum(times.values()))
    rows = []
    for graph, stages in per_stage.items():
        for stage, values in stages.items():
            rows.append(
                {
                    'graph': graph,
                    'stage': stage,
                    'median_ms': round(1e3 * statistics.median(values), 3),
                    'min_ms': round(1e3 * min(values), 3),
                    'runs': len(values),
                    # One process runs all graphs: the peak is theirs together.
                    'peak_mb': None
                    if memory.peak_mb is None
                    else round(memory.peak_mb, 1),
                    'threads': args.threads,
                    'other_cores': round(load.other_cores, 2),
                    'load_start': round(load.load_start, 2),
                    'load_end': round(load.load_end, 2),
                }
            )
    return rows


def run(args) -> None:
    apply_defaults(args)
    machine, slug, out = prepare_run(
        args.device, args.threads, args.quick, args.machine, args.out
    )
    log(
        f'train_step: graphs {", ".join(args.graphs)}, {args.steps} '
        f'episodes each, round-robin'
    )
    try:
        rows = measure(args)
    except RuntimeError as error:  # CUDA's errors among them.
        message = str(error).strip().splitlines() or [type(error).__name__]
        raise RuntimeError(
            f'nothing was measured: an episode failed ({message[0]})'
        ) from error
    write_csv(osp.join(out, 'train_step.csv'), rows, COLUMNS)

    header = ['stage'] + [f'{g} graph (ms)' for g in args.graphs]
    table = []
    for stage in STAGES + ['total']:
        table.append(
            [stage]
            + [
                f'{next(r["median_ms"] for r in rows if r["graph"] == g and r["stage"] == stage):.1f}'  # noqa: E501
                for g in args.graphs
            ]
        )
    busy = max(r['other_cores'] for r in rows)
    lines = [
        f'# Training step benchmark: `{slug}`',
        '',
        f'Generated by `{args.command}`. AWA2 configuration: 30 classes x 1 '
        f'image per episode, 85-d attributes, 2048-d features, 3 experts, '
        f'2048-d class vectors, head hidden 2048, APNetConv projection 256, '
        f'fused Adam; medians of {args.steps} episodes after {args.warmup} '
        f'warm-up episodes, the graphs taking turns episode by episode, '
        f'{args.threads} threads. Other processes kept '
        f'up to {busy:.2f} cores busy during the runs.',
        '',
        markdown_table(header, table),
        '',
        'Machine: ' + ', '.join(f'{k} {v}' for k, v in machine.items()),
        '',
    ]
    atomic_write_text('\n'.join(lines), osp.join(out, 'train_step.md'))
    log('\n'.join(lines))
