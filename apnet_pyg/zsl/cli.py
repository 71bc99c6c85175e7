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
  (:mod:`apnet_pyg.zsl.reporting.compare`);
* :obj:`tune`: APNet's hyper-parameters chosen on the validation task, as
  the baselines' are (:mod:`apnet_pyg.zsl.tune`);
* :obj:`baselines`: the closed-form baselines alone on a dataset
  (:mod:`apnet_pyg.zsl.baselines.benchmark`);
* :obj:`nodes`: zero-shot node classification on a dataset in DGPN's
  layout, APNet against ESZSL, SAE and the published table
  (:mod:`apnet_pyg.zsl.nodes.protocol`).
"""

import argparse
import dataclasses
import sys
import warnings
from pathlib import Path
from typing import List, Optional

from apnet_pyg.data.simulator import DEFAULT_OPTIONS
from apnet_pyg.data.xlsa17 import DATASETS
from apnet_pyg.scripting import error_line
from apnet_pyg.zsl.commands import COMMANDS
from apnet_pyg.zsl.config import RECIPES, VARIANTS, TrainConfig, option_parser
from apnet_pyg.zsl.nodes.inputs import SELECTIONS
from apnet_pyg.zsl.nodes.protocol import SEEDS, SELECTION_SEEDS


def _add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--data-root',
        default=None,
        help='real class side (default: the packaged copy)',
    )
    parser.add_argument(
        '--compress',
        action='store_true',
        help='zlib-compress res101.mat (slower)',
    )
    for key, value in DEFAULT_OPTIONS.items():
        # Default None: unset flags keep the dataset's own defaults
        # (simulator.DATASET_OPTIONS).
        parser.add_argument(
            '--' + key.replace('_', '-'),
            type=type(value),
            default=None,
            help=f'simulator option (default: '
            f"{value}, or the dataset's own value)",
        )


def _add_config_arguments(
    parser: argparse.ArgumentParser, recipe: str
) -> None:
    parser.add_argument(
        '--recipe',
        choices=sorted(RECIPES),
        default=recipe,
        help=f'training schedule (default: {recipe})',
    )
    parser.add_argument(
        '--variant',
        choices=list(VARIANTS),
        default='paper',
        help='the model as read from a source: '
        + '; '.join(f'{name}: {values}' for name, values in VARIANTS.items())
        + ' (default: paper)',
    )
    options = parser.add_argument_group(
        'configuration', 'each overrides the recipe and the variant'
    )
    for option in dataclasses.fields(TrainConfig):
        flag = '--' + option.name.replace('_', '-')
        help_text = (
            option.metadata['help'] + f' (paper recipe: {option.default})'
        )
        if option.type in (bool, 'bool'):
            options.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
        else:
            # SUPPRESS: a flag not given is absent, so that an explicit
            # 'none' (None) still overrides the recipe.
            options.add_argument(
                flag,
                type=option_parser(option.name),
                choices=option.metadata['choices'],
                default=argparse.SUPPRESS,
                help=help_text,
            )


def _add_train_arguments(
    parser: argparse.ArgumentParser, recipe: str, baselines: bool
) -> None:
    _add_config_arguments(parser, recipe)
    parser.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    parser.add_argument(
        '--compile',
        action='store_true',
        help='compile the whole training step into CUDA '
        'graphs (torch.compile; slow to start): with '
        '--device cuda only, elsewhere it runs uncompiled',
    )
    parser.add_argument(
        '--resume',
        action='store_true',
        help='continue an interrupted run in --out',
    )
    parser.add_argument(
        '--overwrite',
        action='store_true',
        help='start over in an --out that holds a run',
    )
    parser.add_argument(
        '--no-progress',
        action='store_true',
        help='print nothing while training',
    )
    parser.add_argument(
        '--baselines',
        action=argparse.BooleanOptionalAction,
        default=baselines,
        help='also fit the closed-form ESZSL and SAE '
        f'baselines on the same data (default: {baselines})',
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    r""":obj:`--run`, a finished run's directory, and :obj:`--root`, where
    its data is if not where it was trained
    (:func:`apnet_pyg.zsl.rundir.load_run`)."""
    parser.add_argument(
        '--run',
        required=True,
        help="a finished 'apnet-zsl train' run directory",
    )
    parser.add_argument(
        '--root',
        default=None,
        help='(default: the root the run was trained on)',
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='apnet-zsl',
        description='APNet zero-shot learning on the xlsa17 benchmark '
        '(real res101.mat features, or simulated ones offline).',
    )
    parser.add_argument(
        '--debug',
        action='store_true',
        help='show the full traceback of an error',
    )
    commands = parser.add_subparsers(dest='command', required=True)
    command_parser = commands.add_parser

    def add_command(*args, **kwargs) -> argparse.ArgumentParser:
        command = command_parser(*args, **kwargs)
        # Also after the command; SUPPRESS keeps the top-level value.
        command.add_argument(
            '--debug',
            action='store_true',
            default=argparse.SUPPRESS,
            help='show the full traceback of an error',
        )
        return command

    commands.add_parser = add_command

    simulate = commands.add_parser(
        'simulate', help='write simulated res101.mat from the real class side'
    )
    dataset_help = f'one of {", ".join(DATASETS)} (or another folder name)'
    simulate.add_argument('--dataset', required=True, help=dataset_help)
    simulate.add_argument(
        '--out', required=True, help='folder to write <DATASET>/ into'
    )
    simulate.add_argument(
        '--seed',
        type=int,
        default=0,
        help='random seed of the simulation (default: 0)',
    )
    _add_simulate_arguments(simulate)

    def add_data_arguments(command: argparse.ArgumentParser) -> None:
        command.add_argument('--dataset', required=True, help=dataset_help)
        command.add_argument(
            '--root', required=True, help='folder holding <DATASET>/res101.mat'
        )

    train = commands.add_parser('train', help='train and evaluate a model')
    add_data_arguments(train)
    train.add_argument('--out', required=True, help='run directory')
    _add_train_arguments(train, recipe='paper', baselines=False)

    evaluate = commands.add_parser('evaluate', help='evaluate a trained run')
    add_run_arguments(evaluate)
    evaluate.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    evaluate.add_argument(
        '--per-class',
        action='store_true',
        help="also print the ZSL row's test accuracy "
        'per unseen class, and where its errors go',
    )

    plot = commands.add_parser('plot', help='t-SNE of the class vectors')
    add_run_arguments(plot)
    plot.add_argument(
        '--out',
        default=None,
        help='PNG file (default: RUN/class_vectors_tsne.png)',
    )

    pipeline = commands.add_parser(
        'pipeline', help='simulate + train (fast recipe) + evaluate, offline'
    )
    pipeline.add_argument('--dataset', default='AWA2', help=dataset_help)
    pipeline.add_argument(
        '--out',
        required=True,
        help='folder for the data (OUT/data) and the run (OUT/run)',
    )
    _add_train_arguments(pipeline, recipe='fast', baselines=True)
    _add_simulate_arguments(pipeline)

    tune = commands.add_parser(
        'tune',
        help="APNet's hyper-parameters chosen on the validation "
        'task (no test image read)',
    )
    add_data_arguments(tune)
    tune.add_argument(
        '--out',
        required=True,
        help="folder of the settings' selections (a tuning "
        'there continues where it stopped)',
    )
    tune.add_argument(
        '--grid',
        nargs='+',
        required=True,
        metavar='KEY=V1,V2',
        help='training options and the values to try (every '
        'combination), e.g. lr=1e-5,2e-5 weight-decay=1e-4,1e-3',
    )
    _add_config_arguments(tune, recipe='paper')
    tune.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    tune.add_argument(
        '--no-progress',
        action='store_true',
        help='print nothing while training',
    )

    baselines = commands.add_parser(
        'baselines',
        help='the closed-form ESZSL and SAE alone: ZSL, raw and '
        'calibrated GZSL (no test image read for any choice)',
    )
    add_data_arguments(baselines)
    for name in ('seed', 'seen_val_fraction'):
        option = TrainConfig.__dataclass_fields__[name]
        baselines.add_argument(
            '--' + name.replace('_', '-'),
            type=option_parser(name),
            default=None,
            help=f'{option.metadata["help"]}; the validation '
            f"task the calibration is chosen on is a run's with the same "
            f'value (default: {option.default})',
        )
    baselines.add_argument(
        '--out', default=None, help='also write the figures to this JSON file'
    )

    nodes = commands.add_parser(
        'nodes',
        help="zero-shot node classification (DGPN's layout): "
        "APNet, ESZSL, SAE and the published table; choices on Split II's "
        'validation classes only',
    )
    nodes.add_argument(
        '--dataset',
        required=True,
        help='dataset folder name in ROOT (e.g. cora)',
    )
    nodes.add_argument(
        '--root', required=True, help='folder holding DATASET/ and csd_files/'
    )
    nodes.add_argument(
        '--split',
        nargs='+',
        choices=['I', 'II'],
        default=None,
        help='named class splits (default: I II)',
    )
    for role in ('seen', 'val', 'unseen'):
        nodes.add_argument(
            f'--{role}',
            nargs='+',
            type=int,
            default=None,
            metavar='CLASS',
            help=f'explicit {role} class ids (instead of --split)',
        )
    nodes.add_argument(
        '--csd',
        nargs='+',
        choices=['text', 'label'],
        default=['text', 'label'],
        help='class description kinds (default: both)',
    )
    nodes.add_argument(
        '--seeds',
        type=int,
        default=None,
        help='APNet runs per row, seeds 0..N-1; an ensemble row groups '
        f'them by the ensemble size (default: {SEEDS}; --quick: 2)',
    )
    nodes.add_argument(
        '--selection-seeds',
        type=int,
        default=None,
        help='runs per setting in the selection; the seed ensembles it '
        'may choose have half as many models (default: '
        f'{SELECTION_SEEDS}; --quick: 4)',
    )
    nodes.add_argument(
        '--selection',
        choices=SELECTIONS,
        default='split',
        help="where the choices are made: 'split', Split "
        "II's validation classes; 'folds', class-level "
        "cross-validation over Split II's seen and "
        'validation classes (default: split)',
    )
    nodes.add_argument(
        '--no-select',
        action='store_true',
        help='no selection: the default setting, fixed in advance',
    )
    nodes.add_argument(
        '--epochs',
        type=int,
        default=None,
        help='most epochs a selection looks at (default: 30; --quick: 2)',
    )
    nodes.add_argument(
        '--episodes',
        type=int,
        default=None,
        help='episodes per epoch (default: 25; --quick: 2)',
    )
    nodes.add_argument(
        '--gzsl',
        action='store_true',
        help='also generalized zero-shot: a fixed 20%% of every seen '
        "class's nodes held out as test nodes, every test node classified "
        'among all classes; S, U, H raw and with calibrated stacking, for '
        'APNet, ESZSL and SAE',
    )
    nodes.add_argument(
        '--full-grid',
        action='store_true',
        help='try every training setting of the grid, also those left out '
        'of the default for time (selection_grid(full=True))',
    )
    nodes.add_argument(
        '--refine',
        action='store_true',
        help='also read every setting with its scores refined into class '
        'prototypes (k-means over the nodes classified, seeded by the '
        'nodes each class scores highest; transductive, label-free), or '
        'as named clusters (k-means without the scores, each cluster given '
        'one class by them), and ESZSL the first way',
    )
    nodes.add_argument(
        '--quick',
        action='store_true',
        help='a smoke test, no result: 2 seeds, 2 epochs of 2 episodes, '
        'a grid of the base and the k-NN class graph',
    )
    nodes.add_argument(
        '--workers',
        type=int,
        default=None,
        help="processes that train APNet's seeds side by side, one torch "
        'thread each; the results are the same for any number (with '
        '--threads 1, the default) (default: the cores this process may '
        'use)',
    )
    nodes.add_argument(
        '--threads',
        type=int,
        default=1,
        help='torch threads of this process, and of the runs with '
        '--workers 1 (default: 1)',
    )
    nodes.add_argument(
        '--out', default=None, help='also write the results to this JSON file'
    )

    compare = commands.add_parser(
        'compare', help='finished runs next to the published figures'
    )
    compare.add_argument(
        '--runs',
        nargs='+',
        required=True,
        metavar='RUN',
        help="finished 'apnet-zsl train' run directories "
        '(several runs of a dataset: mean and standard '
        'deviation)',
    )
    compare.add_argument(
        '--baselines',
        action='store_true',
        help='fit ESZSL and SAE on the data of the runs '
        'trained without them (the runs are not '
        'modified)',
    )
    compare.add_argument(
        '--root',
        default=None,
        help="with --baselines: where the runs' data is "
        '(default: the root each run was trained on)',
    )
    compare.add_argument(
        '--out',
        default=None,
        help='also write the tables to this markdown file',
    )
    return parser


def _interrupted(args: argparse.Namespace, argv: List[str]) -> str:
    out = getattr(args, 'out', None)
    if args.command == 'pipeline' and out is not None:
        out = str(Path(out) / 'run')
    if args.command == 'tune':
        return (
            'interrupted: the same command continues the tuning where '
            'it stopped'
        )
    if args.command not in ('train', 'pipeline') or out is None:
        return 'interrupted'
    from apnet_pyg.zsl.rundir import (
        FINAL_CHECKPOINT,
        METRICS_FILE,
        SELECTION_CHECKPOINT,
    )

    if (Path(out) / METRICS_FILE).is_file():
        # Training is over: the baselines were being fitted.
        return (
            f'interrupted while fitting the baselines; the run is saved '
            f'in {Path(out) / METRICS_FILE} (without them): fit them with '
            f'apnet-zsl compare --runs {out} --baselines'
        )
    checkpoints = [
        Path(out) / name for name in (FINAL_CHECKPOINT, SELECTION_CHECKPOINT)
    ]
    last = next((path for path in checkpoints if path.is_file()), None)
    if last is None:
        return 'interrupted before the first checkpoint: start again'
    again = ' '.join(['apnet-zsl'] + [a for a in argv if a != '--overwrite'])
    if '--resume' not in argv:
        again += ' --resume'
    return (
        f'interrupted: the last checkpoint is {last}; continue with: {again}'
    )


class _OneLineWarnings:
    r"""Shows each distinct warning once, as one line: a tuning's settings
    would repeat the same validation-task warning (every
    :obj:`catch_warnings` block in between, ours or a library's, resets
    Python's once-per-location registry)."""

    def __init__(self) -> None:
        self.shown = set()

    def __call__(
        self, message, category, filename, lineno, file=None, line=None
    ) -> None:
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


def check_dataset_flag(name: str, data_root: Optional[str], flag: str) -> Path:
    r"""The class-side folder of the dataset :obj:`name`, given as
    :obj:`flag`, in :obj:`data_root` (a script's :obj:`--data-root`) or
    the packaged class side: a one-line :class:`ValueError` naming the flag
    otherwise, before any work."""
    from apnet_pyg.data.xlsa17 import (
        check_dataset_name,
        dataset_dir,
        packaged_root,
    )

    try:
        check_dataset_name(name.strip())
    except ValueError:
        raise ValueError(
            f'{flag} must name a dataset folder such as AWA2 (got {name!r})'
        ) from None
    try:
        return dataset_dir(
            data_root if data_root is not None else packaged_root(), name
        )
    except NotADirectoryError as error:
        raise ValueError(f'--data-root: {error}') from None
    except (OSError, ValueError) as error:
        raise ValueError(
            f'{flag} {name!r}: {error}'
            + (
                ''
                if data_root is not None
                else ' (--data-root gives another class side)'
            )
        ) from None


def check_seeds_flag(seeds: List[int], flag: str) -> None:
    r"""Refuses data seeds given as :obj:`flag` that the simulator does not
    take, or a seed given twice (it would count twice in a mean), in one
    line naming the flag."""
    from apnet_pyg.checks import check_int

    for seed in seeds:
        try:
            check_int(seed, 'seed', minimum=0)
        except ValueError as error:
            raise ValueError(f'{flag}: {error}') from None
    if len(set(seeds)) < len(seeds):
        raise ValueError(
            f'{flag} names a seed twice '
            f'({" ".join(map(str, seeds))}): pass each once'
        )


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
