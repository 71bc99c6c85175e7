r"""The :obj:`apnet-zsl` command line (also :obj:`python -m apnet_pyg.zsl`).

Subcommands:

* :obj:`simulate`: write a simulated :obj:`res101.mat` for a dataset from
  its real class side (see :mod:`apnet_pyg.data.simulator`);
* :obj:`train`: model selection on the validation classes, training on all
  seen classes, test evaluation; writes :obj:`RUN/metrics.json` and
  :obj:`RUN/model.pt`;
* :obj:`evaluate`: recompute the test metrics of a trained run;
* :obj:`plot`: t-SNE of the propagated class vectors with the learned
  graph's edges (as in the paper's Figure 2);
* :obj:`pipeline`: :obj:`simulate` + :obj:`train` + table, the offline demo.
"""
import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch

from apnet_pyg.data.simulator import DEFAULT_OPTIONS, simulate_xlsa17
from apnet_pyg.data.xlsa17 import DATASETS, load_xlsa17
from apnet_pyg.zsl.config import RECIPES, TrainConfig

# Command-line overrides of the recipe: config field -> type or choices.
_TRAIN_OPTIONS = {
    'graph': ('learned', 'wordnet', 'none'),
    'training': ('episodic', 'minibatch'),
    'epochs': int,
    'iterations_per_epoch': int,
    'lr': float,
    'weight_decay': float,
    'n_way': int,
    'k_shot': int,
    'seed': int,
    'num_centroids': int,
    'num_steps': int,
    'activation': ('relu', 'sigmoid'),
    'logit_scale': float,
    'propagation_temperature': float,
    'model_selection': ('validation', 'none'),
    'attributes': ('att', 'original_att'),
}


def format_table(metrics: Dict, title: Optional[str] = None) -> str:
    r"""The ZSL / GZSL table of a run as markdown, labelled simulated when
    the features were."""
    tag = ('SIMULATED features (not a benchmark result)'
           if metrics.get('simulated') else 'real features')
    lines = [title or f"{metrics.get('dataset', '?')}: {tag}", '',
             '| ZSL acc | GZSL S | GZSL U | GZSL H |', '|---|---|---|---|',
             '| {zsl_acc:.1f} | {gzsl_seen:.1f} | {gzsl_unseen:.1f} | '
             '{gzsl_h:.1f} |'.format(**metrics)]
    return '\n'.join(lines)


def _device(name: str) -> str:
    if name == 'cuda' and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda, but no CUDA device is "
                         "available")
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


def _simulate(args: argparse.Namespace) -> Path:
    options = {key: getattr(args, key) for key in DEFAULT_OPTIONS
               if getattr(args, key) is not None}
    start = time.perf_counter()
    folder = simulate_xlsa17(args.dataset, args.out, args.data_root,
                             seed=args.seed, compress=args.compress,
                             **options)
    print(f'wrote SIMULATED features to {folder} '
          f'({time.perf_counter() - start:.1f} s)')
    return folder


def _add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--recipe', choices=sorted(RECIPES), default='paper',
                        help='base configuration (default: paper)')
    for name, kind in _TRAIN_OPTIONS.items():
        flag = '--' + name.replace('_', '-')
        if isinstance(kind, tuple):
            parser.add_argument(flag, choices=kind, default=None,
                                help='overrides the recipe')
        else:
            parser.add_argument(flag, type=kind, default=None,
                                help='overrides the recipe')
    parser.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')
    parser.add_argument('--resume', action='store_true',
                        help='continue an interrupted run in --out')
    parser.add_argument('--no-progress', action='store_true')


def _config(args: argparse.Namespace) -> TrainConfig:
    changes = {name: getattr(args, name) for name in _TRAIN_OPTIONS
               if getattr(args, name) is not None}
    return RECIPES[args.recipe].replace(**changes)


def _train(args: argparse.Namespace, root: str) -> Dict:
    from apnet_pyg.zsl.train import run
    config = _config(args)
    data = load_xlsa17(root, args.dataset, attributes=config.attributes)
    print(f'{data}; config: {json.dumps(config.to_dict())}')
    metrics = run(data, config, args.out, device=_device(args.device),
                  resume=args.resume, progress=not args.no_progress,
                  data_root=str(Path(root).resolve()))
    print(format_table(metrics))
    print(f'wrote {Path(args.out) / "metrics.json"} and '
          f'{Path(args.out) / "model.pt"}')
    return metrics


def _load_run(run_dir: str, root: Optional[str]):
    metrics_path = Path(run_dir) / 'metrics.json'
    if not metrics_path.exists():
        raise SystemExit(f"error: no metrics.json in '{run_dir}': is it a "
                         f"finished 'apnet-zsl train' run?")
    saved = json.loads(metrics_path.read_text())
    root = root or saved.get('data_root')
    config = TrainConfig.from_dict(saved['config'])
    data = load_xlsa17(root, saved['dataset'], attributes=config.attributes)
    return saved, data


def _evaluate(args: argparse.Namespace) -> Dict:
    from apnet_pyg.zsl.class_graph import ClassPrior
    from apnet_pyg.zsl.evaluate import evaluate
    from apnet_pyg.zsl.train import load_model
    saved, data = _load_run(args.run, args.root)
    device = _device(args.device)
    model = load_model(args.run, device)
    prior = ClassPrior.for_graph(model.graph, data.name, data.class_names)
    metrics = evaluate(model, data, prior, torch.device(device))
    metrics.update(dataset=data.name, simulated=data.simulated)
    print(format_table(metrics))
    return metrics


def _plot(args: argparse.Namespace) -> Path:
    from apnet_pyg.zsl.plot import plot_class_vectors
    from apnet_pyg.zsl.train import load_model
    saved, data = _load_run(args.run, args.root)
    model = load_model(args.run)
    out = Path(args.out or Path(args.run) / 'class_vectors_tsne.png')
    plot_class_vectors(model, data, out)
    print(f'wrote {out}')
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog='apnet-zsl',
        description='APNet zero-shot learning on the xlsa17 benchmark '
        '(real res101.mat features, or simulated ones offline).')
    commands = parser.add_subparsers(dest='command', required=True)

    simulate = commands.add_parser(
        'simulate', help='write simulated res101.mat from the real '
        'class side')
    dataset_help = f"one of {', '.join(DATASETS)} (or another folder name)"
    simulate.add_argument('--dataset', required=True, help=dataset_help)
    simulate.add_argument('--out', required=True)
    simulate.add_argument('--seed', type=int, default=0)
    _add_simulate_arguments(simulate)

    train = commands.add_parser('train', help='train and evaluate a model')
    train.add_argument('--dataset', required=True, help=dataset_help)
    train.add_argument('--root', required=True,
                       help='folder holding <DATASET>/res101.mat')
    train.add_argument('--out', required=True, help='run directory')
    _add_train_arguments(train)

    evaluate = commands.add_parser('evaluate',
                                   help='evaluate a trained run')
    evaluate.add_argument('--run', required=True)
    evaluate.add_argument('--root', default=None,
                          help='(default: the root the run was trained on)')
    evaluate.add_argument('--device', choices=['cpu', 'cuda'], default='cpu')

    plot = commands.add_parser('plot', help='t-SNE of the class vectors')
    plot.add_argument('--run', required=True)
    plot.add_argument('--root', default=None)
    plot.add_argument('--out', default=None,
                      help='(default: RUN/class_vectors_tsne.png)')

    pipeline = commands.add_parser(
        'pipeline', help='simulate + train (fast recipe) + evaluate, offline')
    pipeline.add_argument('--dataset', default='AWA2', help=dataset_help)
    pipeline.add_argument('--out', required=True,
                          help='folder for the data (OUT/data) and the run '
                          '(OUT/run)')
    _add_train_arguments(pipeline)
    pipeline.set_defaults(recipe='fast')
    _add_simulate_arguments(pipeline)

    args = parser.parse_args(argv)
    if args.command == 'simulate':
        _simulate(args)
    elif args.command == 'train':
        _train(args, args.root)
    elif args.command == 'evaluate':
        _evaluate(args)
    elif args.command == 'plot':
        _plot(args)
    elif args.command == 'pipeline':
        out = Path(args.out)
        root = out / 'data'
        if (root / args.dataset / 'res101.mat').exists():
            print(f'reusing {root / args.dataset}')
        else:
            _simulate(argparse.Namespace(**{
                **vars(args), 'out': str(root),
                'seed': args.seed if args.seed is not None else 0
            }))
        _train(argparse.Namespace(**{**vars(args), 'out': str(out / 'run')}),
               str(root))
    return 0


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
