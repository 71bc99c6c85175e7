r"""What each :obj:`apnet-zsl` subcommand does, given its parsed flags
(:mod:`apnet_pyg.zsl.cli` parses them and dispatches through
:data:`COMMANDS`)."""

import argparse
import dataclasses
import filecmp
import json
import time
from pathlib import Path
from typing import Dict

import torch

from apnet_pyg.data.simulator import (
    DEFAULT_OPTIONS,
    SIMULATOR_VERSION,
    default_options,
    simulate_xlsa17,
)
from apnet_pyg.data.xlsa17 import dataset_dir, packaged_root
from apnet_pyg.data.xlsa17_files import (
    CLASS_LIST_FILES,
    SIMULATED_SIDECAR,
    SPLITS_FILE,
)
from apnet_pyg.files import atomic_write_text, check_output_file
from apnet_pyg.zsl.config import RECIPES, VARIANTS, TrainConfig
from apnet_pyg.zsl.reporting.expected import expected_line
from apnet_pyg.zsl.reporting.tables import (
    SIMULATED_LABEL,
    format_baselines,
    format_comparison,
    format_per_class,
    format_table,
    format_tuning,
)


def check_device(name: str) -> str:
    if name == 'cuda' and not torch.cuda.is_available():
        raise ValueError(
            '--device cuda, but torch sees no CUDA device: use --device cpu'
        )
    return name


def simulator_options(args: argparse.Namespace) -> Dict:
    return {
        key: getattr(args, key)
        for key in DEFAULT_OPTIONS
        if getattr(args, key, None) is not None
    }


def simulate_command(args: argparse.Namespace) -> Path:
    start = time.perf_counter()
    folder = simulate_xlsa17(
        args.dataset,
        args.out,
        args.data_root,
        seed=args.seed,
        compress=args.compress,
        **simulator_options(args),
    )
    print(
        f'wrote SIMULATED features to {folder} '
        f'({time.perf_counter() - start:.1f} s)'
    )
    return folder


def check_simulated_data(folder: Path, args: argparse.Namespace) -> None:
    r"""Data the pipeline reuses must be what it would simulate now."""
    sidecar = folder / SIMULATED_SIDECAR
    if not sidecar.is_file():
        raise ValueError(
            f"'{folder}' holds features that are not simulated "
            f'(no {SIMULATED_SIDECAR}): the pipeline only '
            f'reuses its own simulated data; choose another '
            f'--out'
        )
    saved = json.loads(sidecar.read_text())
    wanted = {
        'version': SIMULATOR_VERSION,
        'seed': args.seed,
        'options': {**default_options(folder.name), **simulator_options(args)},
    }
    different = [
        f'{key} {saved.get(key)!r} (asked: {value!r})'
        for key, value in wanted.items()
        if key != 'options' and saved.get(key) != value
    ]
    different += [
        f'{key}={saved["options"].get(key)!r} (asked: {value!r})'
        for key, value in wanted['options'].items()
        if saved.get('options', {}).get(key) != value
    ]
    if different:
        raise ValueError(
            f"'{folder}' was simulated differently: "
            f'{"; ".join(different)}; choose another --out or '
            f"delete '{folder}'"
        )
    # The class side it was simulated from: the simulator copied its files.
    source = dataset_dir(
        args.data_root if args.data_root is not None else packaged_root(),
        args.dataset,
    )
    for filename in (SPLITS_FILE, *CLASS_LIST_FILES.values()):
        ours, theirs = folder / filename, source / filename
        if (
            ours.is_file() != theirs.is_file()
            or ours.is_file()
            and not filecmp.cmp(ours, theirs, shallow=False)
        ):
            raise ValueError(
                f"'{folder}' was simulated from another class "
                f'side ({saved.get("source")}): its {filename} '
                f"differs from '{theirs}'; choose another --out "
                f"or delete '{folder}'"
            )


def config_from_flags(args: argparse.Namespace) -> TrainConfig:
    changes = {
        option.name: getattr(args, option.name)
        for option in dataclasses.fields(TrainConfig)
        if hasattr(args, option.name)
    }
    return (
        RECIPES[args.recipe]
        .replace(**VARIANTS[args.variant])
        .replace(**changes)
    )


def train_command(args: argparse.Namespace, root: str) -> Dict:
    from apnet_pyg.zsl.rundir import METRICS_FILE, check_run_dir, load_dataset
    from apnet_pyg.zsl.train import run, validation_task

    # Everything checked before the data is read.
    config = config_from_flags(args)
    check_run_dir(args.out, args.resume, args.overwrite)
    check_device(args.device)
    data = load_dataset(root, args.dataset, config)
    print(f'{data}; config: {json.dumps(config.to_dict())}')
    metrics = run(
        data,
        config,
        args.out,
        device=args.device,
        resume=args.resume,
        progress=not args.no_progress,
        data_root=str(Path(root).resolve()),
        overwrite=args.overwrite,
        compile_step=args.compile,
    )
    print(format_table(metrics))
    metrics_path = Path(args.out) / METRICS_FILE
    if args.baselines:
        from apnet_pyg.zsl.baselines.benchmark import fit_baselines

        metrics['baselines'] = fit_baselines(
            data, root, validation_task(data, config)
        )
        print(format_baselines(metrics['baselines']))
        atomic_write_text(json.dumps(metrics, indent=2), metrics_path)
    print(
        f'wrote {metrics_path} and the models '
        f'{", ".join(sorted(set(metrics["models"].values())))}'
    )
    return metrics


def tune_command(args: argparse.Namespace) -> Dict:
    from apnet_pyg.zsl.rundir import load_dataset
    from apnet_pyg.zsl.tune import SUMMARY_FILE, parse_grid, tune

    grid = parse_grid(args.grid)
    # Everything checked before the data is read.
    base = config_from_flags(args)
    check_device(args.device)
    summary = tune(
        lambda config: load_dataset(args.root, args.dataset, config),
        base,
        grid,
        args.out,
        device=args.device,
        progress=not args.no_progress,
    )
    print(format_tuning(summary))
    print(f'wrote {Path(args.out) / SUMMARY_FILE}')
    return summary


def evaluate_command(args: argparse.Namespace) -> Dict:
    from apnet_pyg.zsl.evaluate import apnet_score_fn, evaluate, zsl_per_class
    from apnet_pyg.zsl.rundir import load_model, load_run
    from apnet_pyg.zsl.train import result_rows

    device = check_device(args.device)
    saved, data = load_run(args.run, args.root)
    row_epochs = saved['epochs']
    records = {}
    for row, epoch in row_epochs.items():
        calibration = (
            saved.get('calibration') if row == 'gzsl_calibrated' else None
        )
        if epoch in records and calibration is None:
            continue  # Rows of one epoch share a model.
        model = load_model(args.run, row, device)
        records[epoch] = {
            'epoch': epoch,
            'test': evaluate(model, data, calibration),
        }
    metrics = result_rows(list(records.values()), row_epochs, False)
    metrics.update(dataset=data.name, simulated=data.simulated)
    print(format_table(metrics))
    if args.per_class:
        model = load_model(args.run, 'zsl', device)
        rows = zsl_per_class(
            apnet_score_fn(model, data),
            data.labels,
            data.test_unseen_loc,
            data.unseen_classes,
        )
        metrics['zsl_per_class'] = [
            {
                **row,
                'class': data.class_names[row['class']],
                'taken_by': None
                if row['taken_by'] is None
                else data.class_names[row['taken_by']],
            }
            for row in rows
        ]
        print('\n' + format_per_class(metrics['zsl_per_class']))
    return metrics


def plot_command(args: argparse.Namespace) -> Path:
    from apnet_pyg.zsl.reporting.plot import (
        check_plot_output,
        plot_class_vectors,
    )
    from apnet_pyg.zsl.rundir import load_model, load_run

    out = Path(args.out or Path(args.run) / 'class_vectors_tsne.png')
    check_plot_output(out)  # Before the data is read and t-SNE runs.
    model = load_model(args.run, 'gzsl')
    saved, data = load_run(args.run, args.root)
    plot_class_vectors(model, data, out)
    print(f'wrote {out}')
    return out


def pipeline_command(args: argparse.Namespace) -> Dict:
    from apnet_pyg.zsl.rundir import check_run_dir

    # One seed for the simulation and the training (0 unless given).
    args = argparse.Namespace(
        **{**vars(args), 'seed': getattr(args, 'seed', 0)}
    )
    out = Path(args.out)
    config_from_flags(args)  # Everything checked before anything is simulated.
    check_run_dir(out / 'run', args.resume, args.overwrite)
    folder = out / 'data' / args.dataset
    if (folder / 'res101.mat').exists():
        check_simulated_data(folder, args)
        print(f'reusing {folder}')
    else:
        simulate_command(
            argparse.Namespace(**{**vars(args), 'out': str(out / 'data')})
        )
    metrics = train_command(
        argparse.Namespace(**{**vars(args), 'out': str(out / 'run')}),
        str(out / 'data'),
    )
    line = expected_line(metrics)
    if line is not None:
        print(line)
    return metrics


def compare_command(args: argparse.Namespace) -> str:
    from apnet_pyg.zsl.reporting.compare import compare_runs

    out = (
        check_output_file(args.out, '--out', 'a markdown file name')
        if args.out
        else None
    )
    if args.root is not None and not args.baselines:
        raise ValueError(
            '--root is read for --baselines only: add '
            '--baselines, or drop --root'
        )
    text = format_comparison(
        compare_runs(args.runs, args.baselines, args.root)
    )
    print(text)
    if out is not None:
        atomic_write_text(text + '\n', out)
        print(f'wrote {out}')
    return text


def baselines_command(args: argparse.Namespace) -> Dict:
    from apnet_pyg.data.xlsa17 import load_xlsa17
    from apnet_pyg.zsl.baselines.benchmark import fit_baselines
    from apnet_pyg.zsl.train import validation_task

    out = (
        check_output_file(args.out, '--out', 'a JSON file name')
        if args.out
        else None
    )
    # The validation task of a run with these flags (the rest of the
    # configuration does not enter it); checked before the data is read.
    config = TrainConfig().replace(
        **{
            name: getattr(args, name)
            for name in ('seed', 'seen_val_fraction')
            if getattr(args, name) is not None
        }
    )
    data = load_xlsa17(args.root, args.dataset)
    results = fit_baselines(data, args.root, validation_task(data, config))
    tag = SIMULATED_LABEL if data.simulated else 'real features'
    print(f'{data.name}: {tag}\n' + format_baselines(results))
    if out is not None:
        atomic_write_text(
            json.dumps(
                {
                    'dataset': data.name,
                    'simulated': data.simulated,
                    'data': data.fingerprint(),
                    'seed': config.seed,
                    'seen_val_fraction': config.seen_val_fraction,
                    'baselines': results,
                },
                indent=2,
            ),
            out,
        )
        print(f'wrote {out}')
    return results


def nodes_command(args: argparse.Namespace) -> Dict:
    from apnet_pyg.data.zero_shot_nodes import read_zero_shot_nodes
    from apnet_pyg.zsl.nodes.inputs import NodeSetting
    from apnet_pyg.zsl.nodes.protocol import (
        SEEDS,
        SELECTION_SEEDS,
        quick_grid,
        run_nodes,
    )
    from apnet_pyg.zsl.nodes.report import format_nodes
    from apnet_pyg.zsl.nodes.selection import selection_grid
    from apnet_pyg.zsl.nodes.training import available_cores

    if args.out is not None:
        check_output_file(args.out, '--out', 'a JSON file name')
    for flag in (
        'seeds',
        'selection_seeds',
        'workers',
        'threads',
        'epochs',
        'episodes',
    ):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise ValueError(
                f'--{flag.replace("_", "-")} must be at least '
                f'1 (got {getattr(args, flag)})'
            )
    if args.quick and args.full_grid:
        raise ValueError(
            '--quick runs its own small grid: give --quick or '
            '--full-grid, not both'
        )
    explicit = [args.seen, args.val, args.unseen]
    if any(v is not None for v in explicit) and args.split is not None:
        raise ValueError('give --split or --seen/--val/--unseen, not both')
    nodes = read_zero_shot_nodes(args.root, args.dataset)
    if any(v is not None for v in explicit):
        splits = [
            nodes.split(seen=args.seen, val=args.val, unseen=args.unseen)
        ]
    else:
        splits = [nodes.split(name) for name in args.split or ['I', 'II']]
    base = NodeSetting()
    quick = 2 if args.quick else None
    base = base.replace(
        epochs=args.epochs or quick or base.config.epochs,
        iterations_per_epoch=args.episodes
        or quick
        or base.config.iterations_per_epoch,
    )
    torch.set_num_threads(args.threads)
    results = run_nodes(
        nodes,
        splits,
        args.csd,
        range(args.seeds or quick or SEEDS),
        range(args.selection_seeds or (4 if args.quick else SELECTION_SEEDS)),
        base=base,
        grid=quick_grid(base)
        if args.quick
        else selection_grid(base, full=args.full_grid),
        select=not args.no_select,
        selection=args.selection,
        gzsl=args.gzsl,
        refine=args.refine,
        log=lambda line: print(line, flush=True),
        workers=args.workers or available_cores(),
    )
    if args.quick:
        results['quick'] = True
    print()
    print(format_nodes(results))
    if args.out is not None:
        atomic_write_text(json.dumps(results, indent=2, default=str), args.out)
        print(f'wrote {args.out}')
    return results


COMMANDS = {
    'nodes': nodes_command,
    'simulate': simulate_command,
    'train': lambda args: train_command(args, args.root),
    'evaluate': evaluate_command,
    'plot': plot_command,
    'pipeline': pipeline_command,
    'compare': compare_command,
    'tune': tune_command,
    'baselines': baselines_command,
}
