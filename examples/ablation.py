"""The layout of Table 4 of the APNet paper, on one dataset: meta-training
(episodic) or not (mini-batch) x class graph none / WordNet / learned,
GZSL S, U and H, plus ZSL accuracy, and rows for the closed-form ESZSL and
SAE baselines (hyper-parameters chosen on the validation classes).
Every configuration selects its epoch count on the validation classes.

    python examples/ablation.py --dataset AWA2 --root data --out ablation.md

Without --root the dataset is simulated first (into OUT_DIR/data), and the
table says so: accuracies on simulated features are not benchmark results.
"""
import argparse
import itertools
from pathlib import Path

from apnet_pyg.data import load_xlsa17, simulate_xlsa17
from apnet_pyg.zsl import RECIPES, run
from apnet_pyg.zsl.baselines import BASELINES, hyper_parameters

GRAPHS = ['none', 'wordnet', 'learned']


def baseline_row(name, metrics):
    """One markdown row for a closed-form baseline (its hyper-parameters,
    chosen on the validation classes, in the first cell)."""
    return (f"| {name} (closed form; {hyper_parameters(metrics)}) | - | - | "
            f"{metrics['zsl_acc']:.1f} | {metrics['gzsl_seen']:.1f} | "
            f"{metrics['gzsl_unseen']:.1f} | {metrics['gzsl_h']:.1f} |")


def table_row(training, graph, metrics):
    """One markdown row from a run's ``metrics.json``: the validation
    accuracy that chose the epoch count, then the test metrics."""
    selection = metrics.get('model_selection') or {}
    val = (f"{selection['best_val_zsl_acc']:.1f} "
           f"({selection['best_epoch']})") if 'best_epoch' in selection \
        else '-'
    return (f"| {'yes' if training == 'episodic' else 'no'} | {graph} | "
            f"{val} | {metrics['zsl_acc']:.1f} | {metrics['gzsl_seen']:.1f} "
            f"| {metrics['gzsl_unseen']:.1f} | {metrics['gzsl_h']:.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', default='AWA2')
    parser.add_argument('--root', default=None,
                        help='folder with <DATASET>/res101.mat '
                        '(default: simulate one)')
    parser.add_argument('--out-dir', default='runs/ablation')
    parser.add_argument('--out', default=None, help='markdown file')
    parser.add_argument('--recipe', choices=sorted(RECIPES), default='fast')
    parser.add_argument('--epochs', type=int, default=None,
                        help='overrides the recipe')
    parser.add_argument('--iterations-per-epoch', type=int, default=None,
                        help='overrides the recipe')
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
    data = load_xlsa17(root, args.dataset)

    rows = []
    for training, graph in itertools.product(args.trainings, args.graphs):
        overrides = {
            key: getattr(args, key)
            for key in ('epochs', 'iterations_per_epoch')
            if getattr(args, key) is not None
        }
        config = RECIPES[args.recipe].replace(graph=graph, training=training,
                                              seed=args.seed, **overrides)
        print(f'training: {training}, graph: {graph}', flush=True)
        metrics = run(data, config, out_dir / f'{training}-{graph}',
                      progress=False)
        rows.append(table_row(training, graph, metrics))

    simulated = ' (SIMULATED features: not a benchmark result)' \
        if data.simulated else ''
    lines = [
        f'### {data.name}{simulated}', '',
        f'Recipe: {args.recipe} {overrides or ""}; epochs selected on the '
        f'validation classes; seed {args.seed}. ' +
        (f'Simulator options: {data.simulation["options"]}.'
         if data.simulated else ''), '',
        '| meta-training | graph | val ZSL acc (epochs) | ZSL acc | S | U '
        '| H |', '|---|---|---|---|---|---|---|'
    ]
    lines += rows
    lines += [baseline_row(name, metrics(data))
              for name, metrics in BASELINES.items()]
    table = '\n'.join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + '\n')


if __name__ == '__main__':
    main()
