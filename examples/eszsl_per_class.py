"""ESZSL per unseen class on simulated features: where each unseen class's
test images go in generalised ZSL, and the attribute-side quantity that
decides it (the diagnosis of the calibration miss in docs/simulator.md).

    python examples/eszsl_per_class.py --dataset AWA2 --seeds 0 1 2

ESZSL's score factorises exactly: x^T V s_c = r(x) . alpha_c, with
r(x) = x^T (X^T X + gamma I)^-1 X^T Y the ridge regression of the seen
classes' +-1 targets and alpha_c = S^T (S S^T + lam I)^-1 s_c the ridge
coefficients of class c on the seen classes' attributes (alpha_c = e_c for a
seen class when the seen attributes are independent, as lam -> 0). Where the
r_j(x) of the wrong seen classes sit near -1, an unseen class with
sum_j alpha_cj < 1 gains about (1 - sum_j alpha_cj) over every wrong seen
class, whatever the features: a hub. The table lists that sum next to each
unseen class's accuracy. Features are simulated in memory; every accuracy is
SIMULATED, none is a benchmark result.
"""
import argparse
import shlex
import sys
from pathlib import Path

import torch

from apnet_pyg.data.simulator import SIMULATOR_VERSION, simulate_dataset
from apnet_pyg.zsl.baselines import closed_form_arguments
from apnet_pyg.zsl.eszsl import (attribute_map, eszsl_scores,
                                 fit_eszsl_validated)


def coefficient_sums(attributes, seen_classes, lam):
    r"""Per class, :math:`\sum_j \alpha_{cj}` over the seen classes
    :math:`j` (:func:`~apnet_pyg.zsl.eszsl.attribute_map`)."""
    alpha = attribute_map(attributes, seen_classes, lam) @ \
        attributes.double().t()
    return alpha.sum(0)


def per_class(data):
    """ESZSL on one simulated dataset: per unseen class, its GZSL accuracy,
    its ZSL accuracy and the class that takes most of its images in GZSL;
    and the chosen lam."""
    v, _, lam = fit_eszsl_validated(**closed_form_arguments(data))
    everyone = torch.arange(data.attributes.size(0))
    rows = {}
    for c in data.unseen_classes.tolist():
        images = data.test_unseen_loc[data.labels[data.test_unseen_loc] == c]
        scores = eszsl_scores(v, data.features[images], data.attributes,
                              everyone)
        gzsl = scores.argmax(1)
        zsl = data.unseen_classes[scores[:, data.unseen_classes].argmax(1)]
        rows[c] = dict(gzsl=float((gzsl == c).double().mean()),
                       zsl=float((zsl == c).double().mean()),
                       taken_by=int(torch.bincount(gzsl).argmax()))
    return rows, lam


def table(data, runs, lams):
    """Markdown rows, mean over seeds; 'taken by' and the sums at the first
    seed's lam."""
    names = data.class_names
    seen = set(data.seen_classes.tolist())
    unit = data.attributes / data.attributes.norm(dim=1, keepdim=True)
    similarity = unit @ unit.t()
    similarity.fill_diagonal_(-2.0)
    sums = coefficient_sums(data.attributes, data.seen_classes, lams[0])
    lines = [
        '| unseen class | GZSL accuracy (U) | ZSL accuracy | most of its '
        'GZSL images go to | nearest class (cosine) | coefficient sum |',
        '|---|---|---|---|---|---|'
    ]
    for c in data.unseen_classes.tolist():
        gzsl = 100 * sum(run[c]['gzsl'] for run in runs) / len(runs)
        zsl = 100 * sum(run[c]['zsl'] for run in runs) / len(runs)
        taken = runs[0][c]['taken_by']
        near = int(similarity[c].argmax())
        side = 'seen' if near in seen else 'unseen'
        lines.append(f'| {names[c]} | {gzsl:.1f} | {zsl:.1f} | '
                     f'{names[taken]} | {names[near]} ({side}, '
                     f'{similarity[c, near]:.2f}) | {sums[c]:.2f} |')
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', default='AWA2')
    parser.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    parser.add_argument('--data-root', default=None,
                        help='real class side (default: the packaged copy)')
    parser.add_argument('--out', default=None, help='markdown file')
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    runs, lams = [], []
    for seed in args.seeds:
        data = simulate_dataset(args.dataset, args.data_root, seed=seed)
        rows, lam = per_class(data)
        runs.append(rows)
        lams.append(lam)
    u = [100 * sum(r['gzsl'] for r in run.values()) / len(run) for run in runs]
    lines = [
        f'# ESZSL per unseen class, {args.dataset} (SIMULATED features: not '
        f'benchmark results)', '',
        f'Simulator version {SIMULATOR_VERSION}, default options; accuracies '
        f'in % averaged over seeds {", ".join(map(str, args.seeds))}; lam '
        f'chosen on the validation classes per seed: '
        f'{", ".join(f"{lam:g}" for lam in lams)}. "Coefficient sum": '
        f'sum_j alpha_cj at the first seed\'s lam (about 1 for a seen class); an '
        f'unseen class below 1 is favoured over every wrong seen class '
        f'(module docstring of examples/eszsl_per_class.py). Produced by', '',
        '```bash', 'OMP_NUM_THREADS=1 python examples/eszsl_per_class.py ' +
        shlex.join(argv), '```', '',
        *table(data, runs, lams), '',
        f'U (mean over unseen classes) per seed: '
        f'{", ".join(f"{value:.1f}" for value in u)}.'
    ]
    text = '\n'.join(lines)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + '\n')
    return runs, lams


if __name__ == '__main__':
    main()
