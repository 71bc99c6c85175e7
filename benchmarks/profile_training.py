r"""Profile of APNet's training episodes: kernel launches, host
synchronisations and copies per episode, and where the time goes.

It profiles the package's own training loop
(:func:`apnet_pyg.zsl.train.train_model`) in the AWA2 configuration of
``train_step`` (30 classes x 1 image per episode, 85-d attributes, 2048-d
features, the learned class graph unless ``--graph`` says otherwise), on
random image features (20 per seen class): once for ``S`` episodes and once
for ``S + N`` under :mod:`torch.profiler`, after an unprofiled warm-up. A
figure per episode is the difference of the two runs divided by ``N``, so
the one-time work of a call (model and features moved to the device, the
optimizer built) cancels out.

On CUDA it counts the kernel launches (``cudaLaunchKernel`` and its
kin), the host synchronisations (``cudaStreamSynchronize``,
``cudaDeviceSynchronize``, ``cudaEventSynchronize``, synchronous
``cudaMemcpy``), the device-to-host copies (each one waits for the device)
and the host-to-device copies from pageable memory (staged and synchronous
with the host), and lists the kernels that take the device's time. On the
CPU there are no launches or copies: it lists the operators that take the
CPU's time.

Run it with ``python -m benchmarks profile [--device cuda]``; see
``benchmarks/README.md``.
"""

import argparse
import dataclasses
import os.path as osp
import warnings
from typing import Dict, List

import torch

from apnet_pyg.files import atomic_write_text
from benchmarks.common import (
    fill_defaults,
    format_ms,
    log,
    markdown_table,
    prepare_run,
    synchronize,
)

#: Runtime calls that launch work on the device.
LAUNCH_CALLS = (
    'cudaLaunchKernel',
    'cudaLaunchKernelExC',
    'cuLaunchKernel',
    'cuLaunchKernelEx',
    'cudaLaunchCooperativeKernel',
    'cudaGraphLaunch',
)
#: Runtime calls that make the host wait for the device.
SYNC_CALLS = (
    'cudaStreamSynchronize',
    'cudaDeviceSynchronize',
    'cudaEventSynchronize',
    'cuStreamSynchronize',
    'cuCtxSynchronize',
    'cudaMemcpy',
)
#: Images per seen class in the profiled data set.
IMAGES_PER_CLASS = 20
GRAPHS = ['learned', 'wordnet', 'none']
#: The defaults of --episodes and --skip, and with --quick.
DEFAULTS = {'episodes': 50, 'skip': 5}
QUICK_DEFAULTS = {'episodes': 5, 'skip': 2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--episodes',
        type=int,
        default=None,
        help='N: the episodes a figure per episode is taken '
        'over (default: 50, 5 with --quick)',
    )
    parser.add_argument(
        '--skip',
        type=int,
        default=None,
        help='S: the episodes of the shorter profiled run, '
        'whose one-time costs cancel (default: 5, 2 with '
        '--quick)',
    )
    parser.add_argument(
        '--graph',
        default='learned',
        choices=GRAPHS,
        help='class graph (default: learned)',
    )
    parser.add_argument(
        '--top',
        type=int,
        default=15,
        help='kernels (operators on the CPU) listed (default: 15)',
    )


def apply_defaults(args: argparse.Namespace) -> None:
    r"""Fills in the options not given and refuses bad ones."""
    fill_defaults(args, DEFAULTS, QUICK_DEFAULTS)
    for flag, low in (('--episodes', 1), ('--skip', 1), ('--top', 1)):
        value = getattr(args, flag[2:])
        if value < low:
            raise ValueError(
                f'{flag} must be a positive integer (got {value})'
            )


# ---------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------
def event_totals(averages) -> Dict[str, dict]:
    r"""The profiler's :meth:`key_averages` as plain numbers by event name:
    ``count``, ``device_us`` (self time on the device), ``cpu_us`` (self
    time on the CPU) and ``on_device`` (a kernel or copy, not a host
    call)."""
    totals: Dict[str, dict] = {}
    for average in averages:
        device_us = getattr(average, 'self_device_time_total', None)
        if device_us is None:  # torch < 2.4
            device_us = getattr(average, 'self_cuda_time_total', 0.0)
        entry = totals.setdefault(
            average.key,
            {
                'count': 0,
                'device_us': 0.0,
                'cpu_us': 0.0,
                'on_device': str(average.device_type).endswith('CUDA'),
            },
        )
        entry['count'] += average.count
        entry['device_us'] += float(device_us or 0.0)
        entry['cpu_us'] += float(average.self_cpu_time_total or 0.0)
    return totals


def per_episode(
    long: Dict[str, dict], short: Dict[str, dict], episodes: int
) -> Dict[str, dict]:
    r"""The events of :obj:`episodes` episodes: those of the longer run
    minus those of the shorter one (whose one-time costs the longer run
    pays too), divided by :obj:`episodes`."""
    result = {}
    for name, entry in long.items():
        other = short.get(name, {})
        result[name] = {
            'count': (entry['count'] - other.get('count', 0)) / episodes,
            'device_us': (entry['device_us'] - other.get('device_us', 0.0))
            / episodes,
            'cpu_us': (entry['cpu_us'] - other.get('cpu_us', 0.0)) / episodes,
            'on_device': entry['on_device'],
        }
    return result


def _is_copy(name: str) -> bool:
    return name.startswith(('Memcpy', 'Memset'))


def counts(events: Dict[str, dict]) -> Dict[str, float]:
    r"""The figures of :obj:`events` (per episode, :func:`per_episode`):
    kernel launches (runtime calls), kernels run (on the device), host
    synchronisations, device-to-host copies, host-to-device copies (from
    pageable memory, and all) and the device time of kernels and copies
    (microseconds)."""

    def total(keep) -> float:
        return sum(
            entry['count']
            for name, entry in events.items()
            if keep(name, entry)
        )

    return {
        'launches': total(lambda n, e: n in LAUNCH_CALLS),
        'kernels': total(lambda n, e: e['on_device'] and not _is_copy(n)),
        'syncs': total(lambda n, e: n in SYNC_CALLS),
        'd2h': total(lambda n, e: n.startswith('Memcpy DtoH')),
        'h2d_pageable': total(
            lambda n, e: n.startswith('Memcpy HtoD (Pageable')
        ),
        'h2d': total(lambda n, e: n.startswith('Memcpy HtoD')),
        'device_us': sum(
            entry['device_us']
            for entry in events.values()
            if entry['on_device']
        ),
    }


def top_events(
    events: Dict[str, dict], on_device: bool, top: int
) -> List[dict]:
    r"""The :obj:`top` events that take the most time: kernels and copies
    by device time (:obj:`on_device`), else operators by self CPU time."""
    key = 'device_us' if on_device else 'cpu_us'
    chosen = [
        dict(entry, name=name)
        for name, entry in events.items()
        if entry['on_device'] == on_device and entry[key] > 0
    ]
    chosen.sort(key=lambda entry: -entry[key])
    return chosen[:top]


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------
def training_setup(graph: str, seed: int = 0):
    r"""The configuration, data set (AWA2's packaged class side, with
    :data:`IMAGES_PER_CLASS` random image features per seen class) and
    model of the profiled training."""
    from apnet_pyg.data import load_xlsa17
    from apnet_pyg.zsl import TrainConfig
    from apnet_pyg.zsl.factory import build_model

    config = TrainConfig(graph=graph, seed=seed)
    data = load_xlsa17(
        None, 'AWA2', attributes=config.attributes, load_features=False
    )
    labels = data.seen_classes.repeat_interleave(IMAGES_PER_CLASS)
    generator = torch.Generator().manual_seed(seed)
    # Image features are non-negative (ResNet's pooled ReLU outputs); their
    # values do not change the cost of a step.
    features = 2 * torch.rand(labels.numel(), 2048, generator=generator)
    data = dataclasses.replace(
        data,
        features=features,
        labels=labels,
        trainval_loc=torch.arange(labels.numel()),
    )
    torch.manual_seed(seed)
    model = build_model(config, data, data.seen_classes, image_channels=2048)
    return config, data, model


def profile_training(
    device: torch.device, graph: str, episodes: int, skip: int
) -> Dict[str, Dict[str, dict]]:
    r"""Runs the training loop for :obj:`skip` episodes (warm-up), then
    under the profiler for :obj:`skip` and :obj:`skip + episodes`
    episodes; returns the events of each profiled run
    (:func:`event_totals`) and :obj:`per_episode`."""
    from torch.profiler import ProfilerActivity, profile

    from apnet_pyg.zsl.train import train_model

    config, data, model = training_setup(graph)
    activities = [ProfilerActivity.CPU]
    if device.type == 'cuda':
        activities.append(ProfilerActivity.CUDA)

    def train(iterations: int) -> None:
        run_config = dataclasses.replace(
            config, iterations_per_epoch=iterations
        )
        with warnings.catch_warnings():
            # A run of a few episodes learns little, and says so.
            warnings.simplefilter('ignore')
            train_model(
                model,
                data,
                data.trainval_loc,
                data.seen_classes,
                run_config,
                epochs=1,
                device=device,
                progress=False,
            )
        synchronize(device)

    train(skip)  # Lazy initialisation, kernel caches: not profiled.
    runs = {}
    for name, iterations in (('short', skip), ('long', skip + episodes)):
        with profile(activities=activities) as profiler:
            train(iterations)
        runs[name] = event_totals(profiler.key_averages())
    runs['per_episode'] = per_episode(runs['long'], runs['short'], episodes)
    return runs


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def _us(value: float) -> str:
    return format_ms(value / 1e3)


def report(
    events: Dict[str, dict],
    device: torch.device,
    args,
    slug: str,
    machine: Dict[str, str],
) -> str:
    r"""The markdown report of :obj:`events` (per episode)."""
    cuda = device.type == 'cuda'
    figures = counts(events)
    na = 'not applicable (CPU)'

    def figure(key: str) -> str:
        return f'{figures[key]:.1f}' if cuda else na

    rows = [
        ['kernel launches (cudaLaunchKernel and kin)', figure('launches')],
        ['kernels run on the device', figure('kernels')],
        [
            'host synchronisations (stream, device and event '
            'synchronisations, synchronous cudaMemcpy)',
            figure('syncs'),
        ],
        ['device-to-host copies (each waits for the device)', figure('d2h')],
        ['host-to-device copies from pageable memory', figure('h2d_pageable')],
        ['host-to-device copies, all', figure('h2d')],
        [
            'device time of kernels and copies',
            _us(figures['device_us']) if cuda else na,
        ],
    ]
    top = top_events(events, cuda, args.top)
    what = (
        'kernels and copies by device time'
        if cuda
        else 'operators by self CPU time'
    )
    key = 'device_us' if cuda else 'cpu_us'
    total = (
        sum(
            entry[key]
            for entry in events.values()
            if entry['on_device'] == cuda
        )
        or 1.0
    )
    top_rows = [
        [
            entry['name'][:90].replace('|', '/'),
            f'{entry["count"]:.1f}',
            _us(entry[key]),
            f'{100 * entry[key] / total:.1f}%',
        ]
        for entry in top
    ]
    lines = [
        f'# Training profile: `{slug}`',
        '',
        f'Generated by `{args.command}`. The training loop '
        f'(`apnet_pyg.zsl.train.train_model`) in the AWA2 configuration, '
        f'{args.graph} class graph, 30 classes x 1 image per episode, '
        f'random 2048-d image features ({IMAGES_PER_CLASS} per seen class), '
        f'on `{device}`, {args.threads} threads. Per episode: the events '
        f'of a profiled run of {args.skip + args.episodes} episodes minus '
        f'those of one of {args.skip}, over {args.episodes}, after '
        f'{args.skip} unprofiled episodes (times under the profiler are '
        f'longer than without it; train_step has those).',
        '',
        markdown_table(['per episode', 'value'], rows),
        '',
        f'## Top {len(top_rows)} {what}, per episode',
        '',
        markdown_table(['name', 'calls', 'time', 'share'], top_rows),
        '',
        'Machine: ' + ', '.join(f'{k} {v}' for k, v in machine.items()),
        '',
    ]
    return '\n'.join(lines)


def run(args) -> None:
    apply_defaults(args)
    machine, slug, out = prepare_run(
        args.device, args.threads, args.quick, args.machine, args.out
    )
    device = torch.device(args.device)
    log(
        f'profile: {args.skip} + {args.episodes} episodes of training, '
        f'{args.graph} class graph, on {device}'
    )
    runs = profile_training(device, args.graph, args.episodes, args.skip)
    text = report(runs['per_episode'], device, args, slug, machine)
    atomic_write_text(text, osp.join(out, 'profile.md'))
    log(text)
