"""How a run's ZSL model and ESZSL tell two look-alike unseen classes apart:
the score margin s(x, a) - s(x, b) over the test images of a and of b, its
mean and spread per class, and d', the gap between the two classes' mean
margins in units of their pooled standard deviation (how well the score
separates the pair, whatever its offset).

    python experiments/pair_margins.py --run runs/awa2/run \\
        --pairs bat:rat walrus:seal

The ZSL model scores the images among the unseen classes (the ZSL row's
model and protocol); ESZSL is fitted as `--baselines` fits it (validation
classes, {0, 1} targets) on the same data. On simulated features the
margins are SIMULATED, not benchmark results.
"""

import argparse
import sys

import torch

from apnet_pyg.scripting import run_script
from apnet_pyg.zsl import apnet_score_fn, load_model
from apnet_pyg.zsl.baselines.benchmark import (
    baseline_dataset,
    closed_form_arguments,
)
from apnet_pyg.zsl.baselines.eszsl import eszsl_scores, fit_eszsl_validated
from apnet_pyg.zsl.cli import add_run_arguments
from apnet_pyg.zsl.reporting.tables import SIMULATED_LABEL
from apnet_pyg.zsl.rundir import load_run


def margins(score_fn, data, first, second):
    """Per class of the pair, the margins s(x, first) - s(x, second) of its
    test images, scored among the unseen classes."""
    unseen = data.unseen_classes
    column = {int(c): i for i, c in enumerate(unseen.tolist())}
    result = {}
    for c in (first, second):
        images = data.test_unseen_loc[data.labels[data.test_unseen_loc] == c]
        scores = score_fn(images, unseen).double()
        result[c] = scores[:, column[first]] - scores[:, column[second]]
    return result


def summary(per_class, first, second):
    """Mean and standard deviation of each class's margins, the share of
    images scored for the first class, and d'."""
    a, b = per_class[first], per_class[second]
    pooled = torch.sqrt((a.var() + b.var()) / 2)
    return dict(
        mean_first=float(a.mean()),
        std_first=float(a.std()),
        first_wins_first=float((a > 0).double().mean()),
        mean_second=float(b.mean()),
        std_second=float(b.std()),
        first_wins_second=float((b > 0).double().mean()),
        d_prime=float((a.mean() - b.mean()) / pooled),
    )


def check_pair(pair, data, root):
    """The two class indices of an A:B item of --pairs: two different
    unseen classes of the run's dataset; a one-line error naming the item
    (or the data under --root, when the name is no class of it) else."""
    names = pair.split(':')
    if len(names) != 2:
        raise SystemExit(
            f'error: --pairs expects A:B, two unseen classes '
            f"of {data.name} (got '{pair}')"
        )
    index = {name: i for i, name in enumerate(data.class_names)}
    unseen = set(data.unseen_classes.tolist())
    for name in names:
        if name not in index:
            raise SystemExit(
                f"error: --pairs '{pair}': '{name}' is no class of "
                f"{data.name} as read from '{root}' (--root, or where the "
                f'run was trained): check the name, or that --root holds '
                f"the run's data"
            )
        if index[name] not in unseen:
            raise SystemExit(
                f"error: --pairs '{pair}': '{name}' is a seen "
                f'class of {data.name}; give two unseen '
                f'classes'
            )
    if names[0] == names[1]:
        raise SystemExit(
            f"error: --pairs '{pair}': the two classes must "
            f'differ (a class has no margin over itself)'
        )
    for name in names:
        test = data.labels[data.test_unseen_loc] == index[name]
        if not bool(test.any()):
            raise SystemExit(
                f"error: --pairs '{pair}': '{name}' has no "
                f"test images in {data.name} under '{root}': "
                f'no margin to measure'
            )
    return [index[name] for name in names]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    add_run_arguments(parser)
    parser.add_argument(
        '--pairs',
        nargs='+',
        required=True,
        metavar='A:B',
        help='unseen class names',
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    try:
        saved, data = load_run(args.run, args.root)
    except (OSError, ValueError) as error:
        raise SystemExit(f'error: {error}') from None
    root = args.root or saved['data_root']
    pairs = [check_pair(pair, data, root) for pair in args.pairs]

    benchmark = baseline_dataset(data, root)
    v = fit_eszsl_validated(**closed_form_arguments(benchmark))[0]
    models = {
        'APNet': apnet_score_fn(load_model(args.run, 'zsl'), data),
        'ESZSL': lambda images, classes: eszsl_scores(
            v, benchmark.features[images], benchmark.attributes, classes
        ),
    }
    if data.simulated:
        print(f'{data.name}: {SIMULATED_LABEL}')
    print(
        '| pair A : B | model | margin on A images, mean ± std (share '
        "> 0) | margin on B images | d' |"
    )
    print('|---|---|---|---|---|')
    results = []
    for first, second in pairs:
        for name, score_fn in models.items():
            row = summary(
                margins(score_fn, data, first, second), first, second
            )
            results.append(
                {
                    'pair': (
                        data.class_names[first],
                        data.class_names[second],
                    ),
                    'model': name,
                    **row,
                }
            )
            print(
                f'| {data.class_names[first]} : '
                f'{data.class_names[second]} | {name} | '
                f'{row["mean_first"]:+.3f} ± {row["std_first"]:.3f} '
                f'({row["first_wins_first"]:.2f}) | '
                f'{row["mean_second"]:+.3f} ± {row["std_second"]:.3f} '
                f'({row["first_wins_second"]:.2f}) | '
                f'{row["d_prime"]:.2f} |'
            )
    return results


if __name__ == '__main__':
    sys.exit(run_script(main))
