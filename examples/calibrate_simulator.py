"""Simulated vs real: the closed-form baselines (ESZSL and SAE, both tuned on
the validation classes) on features simulated with the default options of
each dataset, next to their published accuracy on the real ResNet-101
features (Xian et al., TPAMI 2018, proposed split). The calibration check of
apnet_pyg.data.simulator (see docs/simulator.md).

    python examples/calibrate_simulator.py --datasets AWA2 CUB --seeds 0 1 2

Features are simulated in memory (no .mat files written). Every simulated
number is labelled as such: none is a benchmark result.
"""
import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from apnet_pyg.data.simulator import (SIMULATOR_VERSION, default_options,
                                      simulate_dataset)
from apnet_pyg.data.xlsa17 import DATASETS
from apnet_pyg.zsl.baselines import BASELINES, hyper_parameters
from apnet_pyg.zsl.metrics import METRICS
from apnet_pyg.zsl.published import SOURCES, published

COLUMNS = ('ZSL', 'U', 'S', 'H')  # the order of METRICS


def calibrate(dataset, seeds, data_root=None, **options):
    """Per baseline, the metrics of every seed (simulated in memory), and
    summary statistics of the first seed's features."""
    runs = {name: [] for name in BASELINES}
    for seed in seeds:
        data = simulate_dataset(dataset, data_root, seed=seed, **options)
        if seed == seeds[0]:
            features = feature_statistics(data.features)
        for name, metrics in BASELINES.items():
            runs[name].append(metrics(data))
    return runs, features


def feature_statistics(features):
    """Mean value, fraction of exact zeros and mean L2 norm of the
    features (to compare with ResNet-101's pooled activations)."""
    return dict(mean=float(features.mean()),
                zeros=float((features == 0).double().mean()),
                norm=float(features.norm(dim=1).mean()))


def table(results, seeds):
    """Markdown: simulated mean (and standard deviation over seeds) next to
    the real figure of each metric."""
    lines = [
        '| dataset | method | ZSL sim (real) | U sim (real) | S sim (real) '
        '| H sim (real) | chosen per seed |', '|---|---|---|---|---|---|---|'
    ]
    for dataset, runs in results.items():
        for name, per_seed in runs.items():
            real = published(dataset, name)
            cells = []
            for key in METRICS:
                values = np.array([run[key] for run in per_seed])
                spread = f' ± {values.std():.1f}' if len(seeds) > 1 else ''
                reference = '' if real[key] is None else f' ({real[key]:.1f})'
                cells.append(f'{values.mean():.1f}{spread}{reference}')
            chosen = '; '.join(hyper_parameters(run) for run in per_seed)
            lines.append(f"| {dataset} | {name} | {' | '.join(cells)} | "
                         f"{chosen} |")
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--datasets', nargs='+', default=list(DATASETS))
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--data-root', default=None,
                        help='real class side (default: the packaged copy)')
    parser.add_argument('--set', nargs='*', default=[], metavar='KEY=VALUE',
                        help='simulator options overriding every dataset\'s '
                        'defaults (values parsed as JSON)')
    parser.add_argument('--out', default=None, help='markdown file')
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        key, sep, value = item.partition('=')
        if not sep:
            raise SystemExit(f"error: --set expects KEY=VALUE (got '{item}')")
        overrides[key] = json.loads(value)
    torch.set_num_threads(1)

    results, options, statistics = {}, {}, {}
    for dataset in args.datasets:
        start = time.perf_counter()
        results[dataset], statistics[dataset] = calibrate(
            dataset, args.seeds, args.data_root, **overrides)
        options[dataset] = {**default_options(dataset), **overrides}
        print(f'{dataset}: {time.perf_counter() - start:.0f} s', flush=True)
    lines = [
        '# Simulator calibration (SIMULATED features: not benchmark results)',
        '',
        f'ESZSL and SAE on simulated features (simulator version '
        f'{SIMULATOR_VERSION}; mean ± standard deviation (population, '
        f'ddof 0) over seeds '
        f"{', '.join(map(str, args.seeds))}) next to their published "
        f'accuracy on the real ResNet-101 features in parentheses '
        f"({SOURCES['ESZSL']}). ZSL: unseen test images among the unseen "
        f'classes; U / S: unseen / seen test images among all classes; H: '
        f'their harmonic mean; per-class mean accuracy in %. '
        f'Hyper-parameters are chosen on the validation classes '
        f'(trainclasses1 -> valclasses1) for every seed. Produced by', '',
        '```bash', 'OMP_NUM_THREADS=1 python examples/calibrate_simulator.py '
        + shlex.join(argv), '```', '',
        table(results, args.seeds), '',
        'Simulated features (seed {}): mean value, fraction of exact zeros, '
        'mean L2 norm per image:'.format(args.seeds[0]), ''
    ]
    lines += [f"- {dataset}: {stats['mean']:.2f}, {stats['zeros']:.2f}, "
              f"{stats['norm']:.1f}" for dataset, stats in statistics.items()]
    lines += ['', 'Simulator options per dataset:', '']
    lines += [f'- {dataset}: `{json.dumps(opts)}`'
              for dataset, opts in options.items()]
    text = '\n'.join(lines)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + '\n')
    return results


if __name__ == '__main__':
    main()
