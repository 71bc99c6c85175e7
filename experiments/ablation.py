"""The layout of Table 4 of the APNet paper, on one dataset: meta-training
(episodic) or not (mini-batch) x class graph none / WordNet / learned,
GZSL S, U and H (raw and with calibrated stacking), plus ZSL accuracy, and
rows for the closed-form ESZSL and SAE baselines. Every APNet configuration
selects its epochs (and calibration constant) on the validation task, the
baselines their hyper-parameters on the validation classes and their
calibration constant on the same validation task; never on test data.
With several --variants, one block of rows per variant (the readings of
the paper, the authors' code and v0.1: docs/apnet-fidelity.md).

    python experiments/ablation.py --dataset AWA2 --root data --out ablation.md

Without --root the dataset is simulated first (into OUT_DIR/data), and the
table says so: accuracies on simulated features are not benchmark results.
"""

import argparse
import dataclasses
import itertools
import math
import sys
from pathlib import Path

from apnet_pyg.data import load_xlsa17, simulate_xlsa17
from apnet_pyg.data.xlsa17 import load_attributes
from apnet_pyg.files import atomic_write_text, check_output_file
from apnet_pyg.scripting import run_script
from apnet_pyg.zsl import RECIPES, VARIANTS, run
from apnet_pyg.zsl.baselines.benchmark import BASELINES, hyper_parameters
from apnet_pyg.zsl.reporting.tables import SIMULATED_LABEL
from apnet_pyg.zsl.rundir import (
    METRICS_FILE,
    data_differences,
    read_run_metrics,
)
from apnet_pyg.zsl.train import validation_task

GRAPHS = ['none', 'wordnet', 'learned']
HEADER = (
    '| variant | meta-training | graph | val ZSL acc (epoch) | '
    'val H (epoch) | ZSL acc | S | U | H | calibrated S | U | H |'
)


def table_row(variant, training, graph, metrics):
    """One markdown row from a run's ``metrics.json``: the validation
    metrics that chose the epochs, then the test metrics."""
    selection = metrics['model_selection']
    zsl, gzsl = selection['zsl'], selection['gzsl']
    return (
        f'| {variant} | {"yes" if training == "episodic" else "no"} | '
        f'{graph} | {zsl["val_zsl_acc"]:.1f} ({zsl["epoch"]}) | '
        f'{gzsl["val_gzsl_h"]:.1f} ({gzsl["epoch"]}) | '
        f'{metrics["zsl_acc"]:.1f} | {metrics["gzsl_seen"]:.1f} | '
        f'{metrics["gzsl_unseen"]:.1f} | {metrics["gzsl_h"]:.1f} | '
        f'{metrics["gzsl_cal_seen"]:.1f} | '
        f'{metrics["gzsl_cal_unseen"]:.1f} | '
        f'{metrics["gzsl_cal_h"]:.1f} |'
    )


def baseline_row(name, metrics):
    """One markdown row for a closed-form baseline (its hyper-parameters,
    chosen on the validation classes, and its calibration constant, chosen
    on the validation task as APNet's, in the first cell)."""
    return (
        f'| {name} (closed form; {hyper_parameters(metrics)}; c = '
        f'{metrics["calibration"]:.3g}) | - | - | - | - | '
        f'{metrics["zsl_acc"]:.1f} | {metrics["gzsl_seen"]:.1f} | '
        f'{metrics["gzsl_unseen"]:.1f} | {metrics["gzsl_h"]:.1f} | '
        f'{metrics["gzsl_cal_seen"]:.1f} | '
        f'{metrics["gzsl_cal_unseen"]:.1f} | '
        f'{metrics["gzsl_cal_h"]:.1f} |'
    )


def finished_run(run_dir, config, data):
    """The metrics of a finished run of the same configuration on the same
    data in :obj:`run_dir` (so that an interrupted table resumes), else
    :obj:`None`."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return None
    metrics = read_run_metrics(run_dir)  # A damaged file: named.
    # The same data: dataset, features, splits and the row's attributes
    # (another --dataset or --root writes into the same --out-dir).
    if metrics['config'] != config.to_dict() or data_differences(
        metrics.get('data'), data.fingerprint()
    ):
        return None
    print(f'reusing the finished run in {run_dir}', flush=True)
    return metrics


#: The simulator's options among the flags: they act only without --root.
SIMULATOR_FLAGS = ('shared_strength',)


def check_arguments(args):
    """Refuses bad flags with a one-line error before the dataset is
    simulated or read and before any training."""
    for name in SIMULATOR_FLAGS:
        flag = '--' + name.replace('_', '-')
        value = getattr(args, name)
        if value is None:
            continue
        if args.root is not None:
            raise ValueError(
                f'{flag} is a simulator option: it goes without '
                f'--root (the data under --root is used as it '
                f'is)'
            )
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(
                f'{flag} must be a finite number >= 0 (got {value})'
            )
    if Path(args.out_dir).exists() and not Path(args.out_dir).is_dir():
        raise ValueError(
            f"--out-dir '{args.out_dir}' is a file: give a folder"
        )
    if args.out is not None:
        check_output_file(args.out, '--out', 'a markdown file name')


def configs(args, overrides):
    """The configuration of every row, checked before any work; a one-line
    error naming the flag otherwise."""
    recipe = RECIPES[args.recipe]
    for key, value in {**overrides, 'seed': args.seed}.items():
        try:
            recipe.replace(**{key: value})
        except ValueError as error:
            raise ValueError(f'--{key.replace("_", "-")}: {error}') from None
    result = {}
    for variant in args.variants:
        for training, graph in itertools.product(args.trainings, args.graphs):
            result[variant, training, graph] = recipe.replace(
                **VARIANTS[variant],
                graph=graph,
                training=training,
                seed=args.seed,
                **overrides,
            )
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', default='AWA2')
    parser.add_argument(
        '--root',
        default=None,
        help='folder with <DATASET>/res101.mat (default: simulate one)',
    )
    parser.add_argument('--out-dir', default='runs/ablation')
    parser.add_argument('--out', default=None, help='markdown file')
    parser.add_argument('--recipe', choices=sorted(RECIPES), default='fast')
    parser.add_argument(
        '--variants', nargs='+', default=['paper'], choices=list(VARIANTS)
    )
    parser.add_argument(
        '--epochs', type=int, default=None, help='overrides the recipe'
    )
    parser.add_argument(
        '--iterations-per-epoch',
        type=int,
        default=None,
        help='overrides the recipe',
    )
    parser.add_argument(
        '--n-way',
        type=int,
        default=None,
        help='classes per episode (overrides the recipe)',
    )
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument(
        '--trainings',
        nargs='+',
        default=['minibatch', 'episodic'],
        choices=['minibatch', 'episodic'],
    )
    parser.add_argument('--graphs', nargs='+', default=GRAPHS, choices=GRAPHS)
    parser.add_argument('--no-baselines', action='store_true')
    parser.add_argument(
        '--shared-strength',
        type=float,
        default=None,
        help='simulator option (0: the control without '
        'information shared between related classes)',
    )
    args = parser.parse_args(argv)

    check_arguments(args)
    overrides = {
        key: getattr(args, key)
        for key in ('epochs', 'iterations_per_epoch', 'n_way')
        if getattr(args, key) is not None
    }
    row_configs = configs(args, overrides)

    out_dir = Path(args.out_dir)
    root = args.root
    if root is None:
        root = out_dir / 'data'
        options = (
            {}
            if args.shared_strength is None
            else {'shared_strength': args.shared_strength}
        )
        simulate_xlsa17(args.dataset, root, seed=args.seed, **options)
    data = load_xlsa17(root, args.dataset)  # 'att', as the baselines read

    rows = []
    for variant in args.variants:
        recipe = RECIPES[args.recipe].replace(**VARIANTS[variant])
        model_data = dataclasses.replace(
            data,
            attributes=load_attributes(root, args.dataset, recipe.attributes),
        )
        for training, graph in itertools.product(args.trainings, args.graphs):
            config = row_configs[variant, training, graph]
            print(
                f'variant: {variant}, training: {training}, graph: {graph}',
                flush=True,
            )
            metrics = finished_run(
                out_dir / f'{variant}-{training}-{graph}', config, model_data
            )
            if metrics is None:
                metrics = run(
                    model_data,
                    config,
                    out_dir / f'{variant}-{training}-{graph}',
                    progress=False,
                    overwrite=True,
                )
            rows.append(table_row(variant, training, graph, metrics))
    if not args.no_baselines:
        # Calibrated on the validation task the APNet rows select on.
        split = validation_task(data, next(iter(row_configs.values())))
        rows += [
            baseline_row(name, metrics(data, split))
            for name, metrics in BASELINES.items()
        ]

    simulated = f', {SIMULATED_LABEL}' if data.simulated else ''
    lines = [
        f'### {data.name}{simulated}',
        '',
        f'Recipe: {args.recipe} {overrides or ""}; epochs and calibration '
        f'selected on the validation task; seed {args.seed}. '
        + (
            f'Simulator version {data.simulation["version"]}, options: '
            f'{data.simulation["options"]}.'
            if data.simulated
            else ''
        ),
        '',
        HEADER,
        '|---' * (HEADER.count(' | ') + 1) + '|',
    ]
    table = '\n'.join(lines + rows)
    print(table)
    if args.out:
        atomic_write_text(table + '\n', args.out)


if __name__ == '__main__':
    sys.exit(run_script(main))
