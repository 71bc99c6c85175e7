r"""The :obj:`apnet-zsl` command line (also :obj:`python -m apnet_pyg.zsl`).

Subcommands:

* :obj:`simulate`: write a simulated :obj:`res101.mat` for a dataset from
  its real class side (see :mod:`apnet_pyg.data.simulator`);
* :obj:`train`: model selection on the validation classes, training on all
  seen classes, test evaluation; writes :obj:`RUN/metrics.json` and the
  selected epochs' models;
* :obj:`evaluate`: recompute the test metrics of a trained run;
* :obj:`plot`: t-SNE of the propagated class vectors with the learned
  graph's edges (as in the paper's Figure 2);
* :obj:`pipeline`: :obj:`simulate` + :obj:`train` + table, the offline demo;
* :obj:`compare`: finished runs next to the published figures
  (:mod:`apnet_pyg.zsl.compare`);
* :obj:`tune`: APNet's hyper-parameters chosen on the validation task, as
  the baselines' are (:mod:`apnet_pyg.zsl.tune`);
* :obj:`baselines`: the closed-form baselines alone on a dataset
  (:mod:`apnet_pyg.zsl.baselines`);
* :obj:`nodes`: zero-shot node classification on a dataset in DGPN's
  layout, APNet against ESZSL, SAE and the published table
  (:mod:`apnet_pyg.zsl.nodes`).
"""
import argparse
import dataclasses
import filecmp
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Dict, List, Optional

import torch

from apnet_pyg.scripting import error_line
from apnet_pyg.data.simulator import (
    DEFAULT_OPTIONS,
    SIMULATOR_VERSION,
    default_options,
    simulate_xlsa17,
)
from apnet_pyg.data.xlsa17 import (CLASS_LIST_FILES, DATASETS,
                                   SIMULATED_SIDECAR, SPLITS_FILE,
                                   dataset_dir, packaged_root)
from apnet_pyg.utils import atomic_write_text, check_output_file
from apnet_pyg.zsl.config import (RECIPES, VARIANTS, TrainConfig,
                                  option_parser)
from apnet_pyg.zsl.reports import (SIMULATED_LABEL, format_baselines,
                                   format_per_class, format_table)

def _device(name: str) -> str:
    if name == 'cuda' and not torch.cuda.is_available():
        raise ValueError("--device cuda, but torch sees no CUDA device: "
                         "use --device cpu")
    return name


def _add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--data-root', default=None,
                        help='real class side (default: the packaged copy)')
    parser.add_argument('--compress', action='store_true',
                        help='zlib-compress res101.mat (slower)')
    for key, value in DEFAULT_OPTIONS.items():
        # Default None: unset flags keep the dataset's own defaults
        # (simulator.DATASET_OPTIONS).
        parser.add_argument('--' + key.replace('_', '-'), type=type(value),
                            default=None, help=f'simulator option (default: '
                            f'{value}, or the dataset\'s own value)')


def _simulator_options(args: argparse.Namespace) -> Dict:
    return {key: getattr(args, key) for key in DEFAULT_OPTIONS
            if getattr(args, key, None) is not None}


def _simulate(args: argparse.Namespace) -> Path:
    start = time.perf_counter()
    folder = simulate_xlsa17(args.dataset, args.out, args.data_root,
                             seed=args.seed, compress=args.compress,
                             **_simulator_options(args))
    print(f'wrote SIMULATED features to {folder} '
          f'({time.perf_counter() - start:.1f} s)')
    return folder


def _check_simulated_data(folder: Path, args: argparse.Namespace) -> None:
    r"""Data the pipeline reuses must be what it would simulate now."""
    sidecar = folder / SIMULATED_SIDECAR
    if not sidecar.is_file():
        raise ValueError(f"'{folder}' holds features that are not simulated "
                         f"(no {SIMULATED_SIDECAR}): the pipeline only "
                         f"reuses its own simulated data; choose another "
                         f"--out")
    saved = json.loads(sidecar.read_text())
    wanted = {'version': SIMULATOR_VERSION, 'seed': args.seed,
              'options': {**default_options(folder.name),
                          **_simulator_options(args)}}
    different = [f'{key} {saved.get(key)!r} (asked: {value!r})'
                 for key, value in wanted.items()
                 if key != 'options' and saved.get(key) != value]
    different += [f'{key}={saved["options"].get(key)!r} (asked: {value!r})'
                  for key, value in wanted['options'].items()
                  if saved.get('options', {}).get(key) != value]
    if different:
        raise ValueError(f"'{folder}' was simulated differently: "
                         f"{'; '.join(different)}; choose another --out or "
                         f"delete '{folder}'")
    # The class side it was simulated from: the simulator copied its files.
    source = dataset_dir(args.data_root if args.data_root is not None else
                         packaged_root(), args.dataset)
    for filename in (SPLITS_FILE, *CLASS_LIST_FILES.values()):
        ours, theirs = folder / filename, source / filename
        if ours.is_file() != theirs.is_file() or ours.is_file() and \
                not filecmp.cmp(ours, theirs, shallow=False):
            raise ValueError(f"'{folder}' was simulated from another class "
                             f"side ({saved.get('source')}): its {filename} "
                             f"differs from '{theirs}'; choose another --out "
                             f"or delete '{folder}'")


def _add_config_arguments(parser: argparse.ArgumentParser,
                          recipe: str) -> None:
    parser.add_argument('--recipe', choices=sorted(RECIPES), default=recipe,
                        help=f'training schedule (default: {recipe})')
    parser.add_argument('--variant', choices=list(VARIANTS),
                        default='paper',
                        help='the model as read from a source: '
                        + '; '.join(f'{name}: {values}'
                                    for name, values in VARIANTS.items())
                        + ' (default: paper)')
    options = parser.add_argument_group(
        'configuration', 'each overrides the recipe and the variant')
    for option in dataclasses.fields(TrainConfig):
        flag = '--' + option.name.replace('_', '-')
        help_text = option.metadata['help'] + \
            f' (paper recipe: {option.default})'
        if option.type in (bool, 'bool'):
            options.add_argument(flag, action=argparse.BooleanOptionalAction,
                                 default=argparse.SUPPRESS, help=help_text)
        else:
            # SUPPRESS: a flag not given is absent, so that an explicit
            # 'none' (None) still overrides the recipe.
            options.add_argument(flag, type=option_parser(option.name),
                                 choices=option.metadata['choices'],
                                 default=argparse.SUPPRESS, help=help_text)


def _add_train_arguments(parser: argparse.ArgumentParser,
                         recipe: str, baselines: bool) -> None:
    _add_config_arguments(parser, recipe)
    parser.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    parser.add_argument('--compile', action='store_true',
                        help='compile the whole training step into CUDA '
                        'graphs (torch.compile; slow to start): with '
                        '--device cuda only, elsewhere it runs uncompiled')
    parser.add_argument('--resume', action='store_true',
                        help='continue an interrupted run in --out')
    parser.add_argument('--overwrite', action='store_true',
                        help='start over in an --out that holds a run')
    parser.add_argument('--no-progress', action='store_true',
                        help='print nothing while training')
    parser.add_argument('--baselines', action=argparse.BooleanOptionalAction,
                        default=baselines,
                        help='also fit the closed-form ESZSL and SAE '
                        f'baselines on the same data (default: {baselines})')


def _config(args: argparse.Namespace) -> TrainConfig:
    changes = {option.name: getattr(args, option.name)
               for option in dataclasses.fields(TrainConfig)
               if hasattr(args, option.name)}
    return RECIPES[args.recipe].replace(**VARIANTS[args.variant]).replace(
        **changes)


def _train(args: argparse.Namespace, root: str) -> Dict:
    from apnet_pyg.zsl.rundir import METRICS_FILE, check_run_dir, load_dataset
    from apnet_pyg.zsl.train import run, validation_task
    config = _config(args)  # Everything checked before the data is read.
    check_run_dir(args.out, args.resume, args.overwrite)
    _device(args.device)
    data = load_dataset(root, args.dataset, config)
    print(f'{data}; config: {json.dumps(config.to_dict())}')
    metrics = run(data, config, args.out, device=args.device,
                  resume=args.resume, progress=not args.no_progress,
                  data_root=str(Path(root).resolve()),
                  overwrite=args.overwrite, compile_step=args.compile)
    print(format_table(metrics))
    metrics_path = Path(args.out) / METRICS_FILE
    if args.baselines:
        from apnet_pyg.zsl.baselines import fit_baselines
        metrics['baselines'] = fit_baselines(data, root,
                                             validation_task(data, config))
        print(format_baselines(metrics['baselines']))
        atomic_write_text(json.dumps(metrics, indent=2), metrics_path)
    print(f'wrote {metrics_path} and the models '
          f'{", ".join(sorted(set(metrics["models"].values())))}')
    return metrics


def _tune(args: argparse.Namespace) -> Dict:
    from apnet_pyg.zsl.rundir import load_dataset
    from apnet_pyg.zsl.tune import (SUMMARY_FILE, format_tuning, parse_grid,
                                    tune)
    grid = parse_grid(args.grid)
    base = _config(args)  # Everything checked before the data is read.
    _device(args.device)
    summary = tune(lambda config: load_dataset(args.root, args.dataset,
                                               config),
                   base, grid, args.out, device=args.device,
                   progress=not args.no_progress)
    print(format_tuning(summary))
    print(f"wrote {Path(args.out) / SUMMARY_FILE}")
    return summary


def _evaluate(args: argparse.Namespace) -> Dict:
    from apnet_pyg.zsl.evaluate import (apnet_score_fn, evaluate,
                                        zsl_per_class)
    from apnet_pyg.zsl.rundir import load_model, load_run
    from apnet_pyg.zsl.train import result_rows
    device = _device(args.device)
    saved, data = load_run(args.run, args.root)
    row_epochs = saved['epochs']
    records = {}
    for row, epoch in row_epochs.items():
        calibration = saved.get('calibration') \
            if row == 'gzsl_calibrated' else None
        if epoch in records and calibration is None:
            continue  # Rows of one epoch share a model.
        model = load_model(args.run, row, device)
        records[epoch] = {'epoch': epoch,
                          'test': evaluate(model, data, calibration)}
    metrics = result_rows(list(records.values()), row_epochs, False)
    metrics.update(dataset=data.name, simulated=data.simulated)
    print(format_table(metrics))
    if args.per_class:
        model = load_model(args.run, 'zsl', device)
        rows = zsl_per_class(apnet_score_fn(model, data), data.labels,
                             data.test_unseen_loc, data.unseen_classes)
        metrics['zsl_per_class'] = [
            {**row, 'class': data.class_names[row['class']],
             'taken_by': None if row['taken_by'] is None else
             data.class_names[row['taken_by']]} for row in rows]
        print('\n' + format_per_class(metrics['zsl_per_class']))
    return metrics


def _plot(args: argparse.Namespace) -> Path:
    from apnet_pyg.zsl.plot import check_plot_output, plot_class_vectors
    from apnet_pyg.zsl.rundir import load_model, load_run
    out = Path(args.out or Path(args.run) / 'class_vectors_tsne.png')
    check_plot_output(out)  # Before the data is read and t-SNE runs.
    model = load_model(args.run, 'gzsl')
    saved, data = load_run(args.run, args.root)
    plot_class_vectors(model, data, out)
    print(f'wrote {out}')
    return out


def _pipeline(args: argparse.Namespace) -> Dict:
    from apnet_pyg.zsl.rundir import check_run_dir
    # One seed for the simulation and the training (0 unless given).
    args = argparse.Namespace(**{**vars(args),
                                 'seed': getattr(args, 'seed', 0)})
    out = Path(args.out)
    _config(args)  # Everything checked before anything is simulated.
    check_run_dir(out / 'run', args.resume, args.overwrite)
    folder = out / 'data' / args.dataset
    if (folder / 'res101.mat').exists():
        _check_simulated_data(folder, args)
        print(f'reusing {folder}')
    else:
        _simulate(argparse.Namespace(**{**vars(args),
                                        'out': str(out / 'data')}))
    return _train(argparse.Namespace(**{**vars(args),
                                        'out': str(out / 'run')}),
                  str(out / 'data'))


def _compare(args: argparse.Namespace) -> str:
    from apnet_pyg.zsl.compare import compare_runs, format_comparison
    out = check_output_file(args.out, '--out', 'a markdown file name') \
        if args.out else None
    if args.root is not None and not args.baselines:
        raise ValueError('--root is read for --baselines only: add '
                         '--baselines, or drop --root')
    text = format_comparison(compare_runs(args.runs, args.baselines,
                                          args.root))
    print(text)
    if out is not None:
        atomic_write_text(text + '\n', out)
        print(f'wrote {out}')
    return text


def _baselines(args: argparse.Namespace) -> Dict:
    from apnet_pyg.data.xlsa17 import load_xlsa17
    from apnet_pyg.zsl.baselines import fit_baselines
    from apnet_pyg.zsl.train import validation_task
    out = check_output_file(args.out, '--out', 'a JSON file name') \
        if args.out else None
    # The validation task of a run with these flags (the rest of the
    # configuration does not enter it); checked before the data is read.
    config = TrainConfig().replace(**{
        name: getattr(args, name) for name in ('seed', 'seen_val_fraction')
        if getattr(args, name) is not None})
    data = load_xlsa17(args.root, args.dataset)
    results = fit_baselines(data, args.root, validation_task(data, config))
    tag = SIMULATED_LABEL if data.simulated else 'real features'
    print(f'{data.name}: {tag}\n' + format_baselines(results))
    if out is not None:
        atomic_write_text(json.dumps({
            'dataset': data.name, 'simulated': data.simulated,
            'data': data.fingerprint(), 'seed': config.seed,
            'seen_val_fraction': config.seen_val_fraction,
            'baselines': results}, indent=2), out)
        print(f'wrote {out}')
    return results


def _nodes(args: argparse.Namespace) -> Dict:
    from apnet_pyg.data.zero_shot_nodes import read_zero_shot_nodes
    from apnet_pyg.zsl.nodes import NodeSetting, format_nodes, run_nodes
    if args.out is not None:
        check_output_file(args.out, '--out', 'a JSON file name')
    for flag in ('seeds', 'selection_seeds', 'threads', 'epochs',
                 'episodes'):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be at least "
                             f"1 (got {getattr(args, flag)})")
    explicit = [args.seen, args.val, args.unseen]
    if any(v is not None for v in explicit) and args.split is not None:
        raise ValueError('give --split or --seen/--val/--unseen, not both')
    nodes = read_zero_shot_nodes(args.root, args.dataset)
    if any(v is not None for v in explicit):
        splits = [nodes.split(seen=args.seen, val=args.val,
                              unseen=args.unseen)]
    else:
        splits = [nodes.split(name) for name in args.split or ['I', 'II']]
    base = NodeSetting()
    if args.epochs is not None or args.episodes is not None:
        base = base.replace(
            epochs=args.epochs or base.config.epochs,
            iterations_per_epoch=args.episodes or
            base.config.iterations_per_epoch)
    torch.set_num_threads(args.threads)
    results = run_nodes(nodes, splits, args.csd, range(args.seeds),
                        range(args.selection_seeds), base=base,
                        select=not args.no_select,
                        log=lambda line: print(line, flush=True))
    print()
    print(format_nodes(results))
    if args.out is not None:
        atomic_write_text(json.dumps(results, indent=2, default=str),
                          args.out)
        print(f'wrote {args.out}')
    return results


COMMANDS = {
    'nodes': _nodes,
    'simulate': _simulate,
    'train': lambda args: _train(args, args.root),
    'evaluate': _evaluate,
    'plot': _plot,
    'pipeline': _pipeline,
    'compare': _compare,
    'tune': _tune,
    'baselines': _baselines,
}


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    r""":obj:`--run`, a finished run's directory, and :obj:`--root`, where
    its data is if not where it was trained
    (:func:`apnet_pyg.zsl.train.load_run`)."""
    parser.add_argument('--run', required=True,
                        help="a finished 'apnet-zsl train' run directory")
    parser.add_argument('--root', default=None,
                        help='(default: the root the run was trained on)')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='apnet-zsl',
        description='APNet zero-shot learning on the xlsa17 benchmark '
        '(real res101.mat features, or simulated ones offline).')
    parser.add_argument('--debug', action='store_true',
                        help='show the full traceback of an error')
    commands = parser.add_subparsers(dest='command', required=True)
    command_parser = commands.add_parser

    def add_command(*args, **kwargs) -> argparse.ArgumentParser:
        command = command_parser(*args, **kwargs)
        # Also after the command; SUPPRESS keeps the top-level value.
        command.add_argument('--debug', action='store_true',
                             default=argparse.SUPPRESS,
                             help='show the full traceback of an error')
        return command

    commands.add_parser = add_command

    simulate = commands.add_parser(
        'simulate', help='write simulated res101.mat from the real '
        'class side')
    dataset_help = f"one of {', '.join(DATASETS)} (or another folder name)"
    simulate.add_argument('--dataset', required=True, help=dataset_help)
    simulate.add_argument('--out', required=True,
                          help='folder to write <DATASET>/ into')
    simulate.add_argument('--seed', type=int, default=0,
                          help='random seed of the simulation (default: 0)')
    _add_simulate_arguments(simulate)

    def add_data_arguments(command: argparse.ArgumentParser) -> None:
        command.add_argument('--dataset', required=True, help=dataset_help)
        command.add_argument('--root', required=True,
                             help='folder holding <DATASET>/res101.mat')

    train = commands.add_parser('train', help='train and evaluate a model')
    add_data_arguments(train)
    train.add_argument('--out', required=True, help='run directory')
    _add_train_arguments(train, recipe='paper', baselines=False)

    evaluate = commands.add_parser('evaluate',
                                   help='evaluate a trained run')
    add_run_arguments(evaluate)
    evaluate.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    evaluate.add_argument('--per-class', action='store_true',
                          help="also print the ZSL row's test accuracy "
                          "per unseen class, and where its errors go")

    plot = commands.add_parser('plot', help='t-SNE of the class vectors')
    add_run_arguments(plot)
    plot.add_argument('--out', default=None,
                      help='PNG file (default: RUN/class_vectors_tsne.png)')

    pipeline = commands.add_parser(
        'pipeline', help='simulate + train (fast recipe) + evaluate, offline')
    pipeline.add_argument('--dataset', default='AWA2', help=dataset_help)
    pipeline.add_argument('--out', required=True,
                          help='folder for the data (OUT/data) and the run '
                          '(OUT/run)')
    _add_train_arguments(pipeline, recipe='fast', baselines=True)
    _add_simulate_arguments(pipeline)

    tune = commands.add_parser(
        'tune', help="APNet's hyper-parameters chosen on the validation "
        "task (no test image read)")
    add_data_arguments(tune)
    tune.add_argument('--out', required=True,
                      help='folder of the settings\' selections (a tuning '
                      'there continues where it stopped)')
    tune.add_argument('--grid', nargs='+', required=True,
                      metavar='KEY=V1,V2',
                      help='training options and the values to try (every '
                      'combination), e.g. lr=1e-5,2e-5 weight-decay=1e-4,1e-3')
    _add_config_arguments(tune, recipe='paper')
    tune.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    tune.add_argument('--no-progress', action='store_true',
                      help='print nothing while training')

    baselines = commands.add_parser(
        'baselines', help='the closed-form ESZSL and SAE alone: ZSL, raw and '
        'calibrated GZSL (no test image read for any choice)')
    add_data_arguments(baselines)
    for name in ('seed', 'seen_val_fraction'):
        option = TrainConfig.__dataclass_fields__[name]
        baselines.add_argument(
            '--' + name.replace('_', '-'), type=option_parser(name),
            default=None, help=f"{option.metadata['help']}; the validation "
            f"task the calibration is chosen on is a run's with the same "
            f"value (default: {option.default})")
    baselines.add_argument('--out', default=None,
                           help='also write the figures to this JSON file')

    nodes = commands.add_parser(
        'nodes', help='zero-shot node classification (DGPN\'s layout): '
        'APNet, ESZSL, SAE and the published table; choices on Split II\'s '
        'validation classes only')
    nodes.add_argument('--dataset', required=True,
                       help='dataset folder name in ROOT (e.g. cora)')
    nodes.add_argument('--root', required=True,
                       help='folder holding DATASET/ and csd_files/')
    nodes.add_argument('--split', nargs='+', choices=['I', 'II'],
                       default=None, help='named class splits (default: I '
                       'II)')
    for role in ('seen', 'val', 'unseen'):
        nodes.add_argument(f'--{role}', nargs='+', type=int, default=None,
                           metavar='CLASS', help=f'explicit {role} class '
                           f'ids (instead of --split)')
    nodes.add_argument('--csd', nargs='+', choices=['text', 'label'],
                       default=['text', 'label'],
                       help='class description kinds (default: both)')
    nodes.add_argument('--seeds', type=int, default=10,
                       help='APNet runs per row, seeds 0..N-1 (default: 10)')
    nodes.add_argument('--selection-seeds', type=int, default=2,
                       help='runs per setting in the selection (default: '
                       '2)')
    nodes.add_argument('--no-select', action='store_true',
                       help='no selection: the default setting, fixed in '
                       'advance')
    nodes.add_argument('--epochs', type=int, default=None,
                       help='most epochs a selection looks at (default: '
                       '30)')
    nodes.add_argument('--episodes', type=int, default=None,
                       help='episodes per epoch (default: 25)')
    nodes.add_argument('--threads', type=int, default=1,
                       help='torch threads (default: 1)')
    nodes.add_argument('--out', default=None,
                       help='also write the results to this JSON file')

    compare = commands.add_parser(
        'compare', help='finished runs next to the published figures')
    compare.add_argument('--runs', nargs='+', required=True, metavar='RUN',
                         help="finished 'apnet-zsl train' run directories "
                         "(several runs of a dataset: mean and standard "
                         "deviation)")
    compare.add_argument('--baselines', action='store_true',
                         help='fit ESZSL and SAE on the data of the runs '
                         'trained without them, or whose baselines were '
                         'recorded before they were calibrated (the runs '
                         'are not modified)')
    compare.add_argument('--root', default=None,
                         help='with --baselines: where the runs\' data is '
                         '(default: the root each run was trained on)')
    compare.add_argument('--out', default=None,
                         help='also write the tables to this markdown file')
    return parser


def _interrupted(args: argparse.Namespace, argv: List[str]) -> str:
    out = getattr(args, 'out', None)
    if args.command == 'pipeline' and out is not None:
        out = str(Path(out) / 'run')
    if args.command == 'tune':
        return ('interrupted: the same command continues the tuning where '
                'it stopped')
    if args.command not in ('train', 'pipeline') or out is None:
        return 'interrupted'
    from apnet_pyg.zsl.rundir import (FINAL_CHECKPOINT, METRICS_FILE,
                                      SELECTION_CHECKPOINT)
    if (Path(out) / METRICS_FILE).is_file():
        # Training is over: the baselines were being fitted.
        return (f'interrupted while fitting the baselines; the run is saved '
                f'in {Path(out) / METRICS_FILE} (without them): fit them with '
                f'apnet-zsl compare --runs {out} --baselines')
    checkpoints = [Path(out) / name for name in (FINAL_CHECKPOINT,
                                                 SELECTION_CHECKPOINT)]
    last = next((path for path in checkpoints if path.is_file()), None)
    if last is None:
        return 'interrupted before the first checkpoint: start again'
    again = ' '.join(['apnet-zsl'] + [a for a in argv if a != '--overwrite'])
    if '--resume' not in argv:
        again += ' --resume'
    return f'interrupted: the last checkpoint is {last}; continue with: ' \
        f'{again}'


class _OneLineWarnings:
    r"""Shows each distinct warning once, as one line: a tuning's settings
    would repeat the same validation-task warning (every
    :obj:`catch_warnings` block in between, ours or a library's, resets
    Python's once-per-location registry)."""

    def __init__(self) -> None:
        self.shown = set()

    def __call__(self, message, category, filename, lineno, file=None,
                 line=None) -> None:
        text = f'warning: {message}'
        if text not in self.shown:
            self.shown.add(text)
            print(text, file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    r"""Runs the command line; returns the exit status. Errors print one
    line (the whole traceback with --debug)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            if not args.debug:
                warnings.showwarning = _OneLineWarnings()
            COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print(_interrupted(args, argv), file=sys.stderr)
        return 130
    except Exception as error:
        if args.debug:
            raise
        print(error_line(error), file=sys.stderr)
        return 1
    return 0


def check_dataset_flag(name: str, data_root: Optional[str],
                       flag: str) -> Path:
    r"""The class-side folder of the dataset :obj:`name`, given as
    :obj:`flag`, in :obj:`data_root` (a script's :obj:`--data-root`) or
    the packaged class side: a one-line :class:`ValueError` naming the flag
    otherwise, before any work."""
    from apnet_pyg.data.xlsa17 import (check_dataset_name, dataset_dir,
                                       packaged_root)
    try:
        check_dataset_name(name.strip())
    except ValueError:
        raise ValueError(f"{flag} must name a dataset folder such as AWA2 "
                         f"(got {name!r})") from None
    try:
        return dataset_dir(data_root if data_root is not None else
                           packaged_root(), name)
    except NotADirectoryError as error:
        raise ValueError(f'--data-root: {error}') from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{flag} {name!r}: {error}" +
                         ('' if data_root is not None else
                          ' (--data-root gives another class side)')) \
            from None


def check_seeds_flag(seeds: List[int], flag: str) -> None:
    r"""Refuses data seeds given as :obj:`flag` that the simulator does not
    take, or a seed given twice (it would count twice in a mean), in one
    line naming the flag."""
    from apnet_pyg.utils import check_int
    for seed in seeds:
        try:
            check_int(seed, 'seed', minimum=0)
        except ValueError as error:
            raise ValueError(f'{flag}: {error}') from None
    if len(set(seeds)) < len(seeds):
        raise ValueError(f"{flag} names a seed twice "
                         f"({' '.join(map(str, seeds))}): pass each once")


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
