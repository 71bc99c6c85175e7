"""The layout of Table 4 of the APNet paper, on one dataset: meta-training
(episodic) or not (mini-batch) x class graph none / WordNet / learned,
GZSL S, U and H (raw and with calibrated stacking), plus ZSL accuracy, and
closed-form baseline rows. Every configuration selects its epochs (and
calibration constant) on the validation task, never on test data.

    python examples/ablation.py --dataset AWA2 --root data --out ablation.md

Without --root the dataset is simulated first (into OUT_DIR/data), and the
table says so: accuracies on simulated features are not benchmark results.
"""
import argparse
import itertools
from pathlib import Path

from apnet_pyg.data import load_xlsa17, simulate_xlsa17
from apnet_pyg.zsl import RECIPES, VARIANTS, evaluate_predictions, run
from apnet_pyg.zsl.eszsl import fit_eszsl_validated, predict_eszsl

GRAPHS = ['none', 'wordnet', 'learned']


def eszsl_row(data):
    """ESZSL with (gamma, lambda) chosen by ZSL accuracy on the validation
    classes, refitted on all seen classes, through the same protocol."""
    v, _, _ = fit_eszsl_validated(
        data.features, data.labels, data.attributes, data.train_classes,
        data.images_of(data.train_classes), data.val_classes,
        data.images_of(data.val_classes), data.seen_classes,
        data.trainval_loc)
    metrics = evaluate_predictions(
        data, lambda index, candidates: predict_eszsl(
            v, data.features[index], data.attributes, candidates))
    return (metrics['zsl_acc'], metrics['gzsl_seen'], metrics['gzsl_unseen'],
            metrics['gzsl_h'])


HEADER = ('| meta-training | graph | val ZSL acc (epoch) | val H (epoch) | '
          'ZSL acc | S | U | H | calibrated S | U | H |')


def table_row(training, graph, metrics):
    """One markdown row from a run's ``metrics.json``: the validation
    metrics that chose the epochs, then the test metrics."""
    selection = metrics['model_selection']
    zsl, gzsl = selection['zsl'], selection['gzsl']
    return (f"| {'yes' if training == 'episodic' else 'no'} | {graph} | "
            f"{zsl['val_zsl_acc']:.1f} ({zsl['epoch']}) | "
            f"{gzsl['val_gzsl_h']:.1f} ({gzsl['epoch']}) | "
            f"{metrics['zsl_acc']:.1f} | {metrics['gzsl_seen']:.1f} | "
            f"{metrics['gzsl_unseen']:.1f} | {metrics['gzsl_h']:.1f} | "
            f"{metrics['gzsl_cal_seen']:.1f} | "
            f"{metrics['gzsl_cal_unseen']:.1f} | "
            f"{metrics['gzsl_cal_h']:.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', default='AWA2')
    parser.add_argument('--root', default=None,
                        help='folder with <DATASET>/res101.mat '
                        '(default: simulate one)')
    parser.add_argument('--out-dir', default='runs/ablation')
    parser.add_argument('--out', default=None, help='markdown file')
    parser.add_argument('--recipe', choices=sorted(RECIPES), default='fast')
    parser.add_argument('--variant', choices=list(VARIANTS),
                        default='paper')
    parser.add_argument('--epochs', type=int, default=None,
                        help='overrides the recipe')
    parser.add_argument('--iterations-per-epoch', type=int, default=None,
                        help='overrides the recipe')
    parser.add_argument('--n-way', type=int, default=None,
                        help='classes per episode (overrides the recipe)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--trainings', nargs='+',
                        default=['minibatch', 'episodic'],
                        choices=['minibatch', 'episodic'])
    parser.add_argument('--graphs', nargs='+', default=GRAPHS,
                        choices=GRAPHS)
    parser.add_argument('--shared-strength', type=float, default=None,
                        help='simulator option (0: the control without '
                        'information shared between related classes)')
    args = parser.parse_args(argv)

    out_dir = Path(args.out_dir)
    root = args.root
    if root is None:
        root = out_dir / 'data'
        options = {} if args.shared_strength is None else {
            'shared_strength': args.shared_strength
        }
        simulate_xlsa17(args.dataset, root, seed=args.seed, **options)
    recipe = RECIPES[args.recipe].replace(**VARIANTS[args.variant])
    data = load_xlsa17(root, args.dataset, attributes=recipe.attributes)

    rows = []
    for training, graph in itertools.product(args.trainings, args.graphs):
        overrides = {
            key: getattr(args, key)
            for key in ('epochs', 'iterations_per_epoch', 'n_way')
            if getattr(args, key) is not None
        }
        config = recipe.replace(graph=graph, training=training,
                                seed=args.seed, **overrides)
        print(f'training: {training}, graph: {graph}', flush=True)
        metrics = run(data, config, out_dir / f'{training}-{graph}',
                      progress=False)
        rows.append(table_row(training, graph, metrics))
    zsl, s, u, h = eszsl_row(load_xlsa17(root, args.dataset))

    simulated = ' (SIMULATED features: not a benchmark result)' \
        if data.simulated else ''
    lines = [
        f'### {data.name}{simulated}', '',
        f'Recipe: {args.recipe} {overrides or ""}, variant {args.variant}; '
        f'epochs and calibration selected on the validation task; seed '
        f'{args.seed}. ' +
        (f'Simulator options: {data.simulation["options"]}.'
         if data.simulated else ''), '',
        HEADER, '|---' * HEADER.count(' | ') + '|---|'
    ]
    lines += rows
    lines.append(f'| ESZSL (closed form) | - | - | - | {zsl:.1f} | {s:.1f} | '
                 f'{u:.1f} | {h:.1f} | - | - | - |')
    table = '\n'.join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + '\n')


if __name__ == '__main__':
    main()
