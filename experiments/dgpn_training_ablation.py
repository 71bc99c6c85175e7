r"""Writes experiments/zero-shot-nodes-dgpn-ablation.md: which part of DGPN's
training gives it its margin on zero-shot node classification, measured
with a reimplementation of DGPN's model (Wang et al., KDD 2021; this
package's code, written from the paper and its public code's
hyper-parameters) on a dataset in DGPN's layout.

DGPN's model: the node features decomposed into the :math:`K + 1` terms
of a lazy random walk of :math:`K` steps,
:math:`\binom{K}{k} \beta^{K-k} ((1 - \beta) \hat{A})^k X` with
:math:`\hat{A}` the symmetrically normalised adjacency with self-loops;
each term through one shared layer (ReLU, dropout) and a local head, their
sum through a global head, each head's output scored by its dot product
with the class descriptions; cross-entropy of the global scores plus the
mean of the local ones, full batch, Adam. Two choices are varied:

* the classes a seen node is scored against in training: every class's
  description (DGPN's code: the unseen classes' descriptions as wrong
  answers) or the seen classes' only;
* the calibration of the scores before the argmax: none (DGPN) or each
  class's scores centred over every node (APNet's default for nodes).

Accuracy and balanced accuracy on the unseen classes' nodes among the
unseen classes after the last epoch, mean and standard deviation over
seeds. Nothing is chosen on the unseen classes: every setting is reported.
Beside them, where the split has validation classes (Split II), the
balanced accuracy on their nodes among them: what APNet's selection
(:func:`apnet_pyg.zsl.nodes.selection.select_setting`) would see of the model.

    python experiments/dgpn_training_ablation.py [--root ROOT] [--dataset NAME]
        [--seeds N] [--epochs N] [--threads N] [--out PAGE]
"""

import argparse
import math
import platform
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = '../shared/data/zero_shot_nodes'
DEFAULT_PAGE = REPO / 'experiments' / 'zero-shot-nodes-dgpn-ablation.md'
#: DGPN's public defaults for Cora: K, beta, hidden size, dropout, Adam's
#: learning rate, the local loss weight.
HOPS, LAZINESS, HIDDEN, DROPOUT, LR, LOCAL_WEIGHT = 3, 0.7, 128, 0.5, 0.01, 1.0
CANDIDATES = ('all', 'seen')
CALIBRATIONS = ('none', 'center')


def lazy_walk_terms(
    x: Tensor, edge_index: Tensor, hops: int, laziness: float
) -> List[Tensor]:
    r"""The :math:`K + 1` terms of :math:`(\beta I + (1 - \beta)
    \hat{A})^K X`, term :math:`k` holding :math:`\hat{A}^k`."""
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    n = x.size(0)
    index, weight = gcn_norm(edge_index, num_nodes=n, add_self_loops=True)
    adjacency = torch.sparse_coo_tensor(
        index.flip(0), weight.to(x.dtype), (n, n), check_invariants=True
    )
    terms = []
    for k in range(hops + 1):
        h = x
        for _ in range(k):
            h = (1 - laziness) * torch.sparse.mm(adjacency, h)
        terms.append(math.comb(hops, k) * laziness ** (hops - k) * h)
    return terms


class DecomposedPrototypes(torch.nn.Module):
    r"""DGPN's model: a shared layer over the decomposed terms, local and
    global heads into the description space, dot-product scores."""

    def __init__(self, in_channels: int, description_dim: int):
        super().__init__()
        self.shared = torch.nn.Linear(in_channels, HIDDEN)
        self.local_head = torch.nn.Linear(HIDDEN, description_dim)
        self.global_head = torch.nn.Linear(HIDDEN, description_dim)
        for layer in (self.shared, self.local_head, self.global_head):
            torch.nn.init.xavier_uniform_(layer.weight)

    def forward(self, terms: Sequence[Tensor], descriptions: Tensor):
        hidden = [
            F.dropout(self.shared(t).relu(), DROPOUT, self.training)
            for t in terms
        ]
        local = [self.local_head(h) @ descriptions.t() for h in hidden]
        total = F.dropout(
            self.global_head(torch.stack(hidden).sum(0)),
            DROPOUT,
            self.training,
        )
        return total @ descriptions.t(), local


def train_and_score(
    terms, descriptions, y, split, candidates: str, seed: int, epochs: int
) -> Tensor:
    r"""Trains one model; returns its global scores of every node against
    every class."""
    torch.manual_seed(seed)
    model = DecomposedPrototypes(terms[0].size(1), descriptions.size(1))
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    classes = (
        torch.arange(descriptions.size(0))
        if candidates == 'all'
        else split.seen
    )
    position = torch.full((descriptions.size(0),), -1, dtype=torch.long)
    position[classes] = torch.arange(classes.numel())
    train = torch.isin(y, split.seen).nonzero().view(-1)
    target = position[y[train]]
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        scores, local = model(terms, descriptions[classes])
        loss = (
            F.cross_entropy(scores[train], target)
            + LOCAL_WEIGHT
            * torch.stack(
                [F.cross_entropy(s[train], target) for s in local]
            ).mean()
        )
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        return model(terms, descriptions)[0]


def predict_among(
    scores: Tensor, y: Tensor, classes: Tensor, calibration: str
):
    r"""The nodes of :obj:`classes` and each one's prediction among them,
    from :obj:`scores` of every node against every class, centred over
    every node first with :obj:`calibration="center"`."""
    if calibration == 'center':
        scores = scores - scores.mean(dim=0, keepdim=True)
    nodes = torch.isin(y, classes).nonzero().view(-1)
    return nodes, classes[scores[nodes][:, classes].argmax(1)]


def unseen_metrics(
    scores: Tensor, y: Tensor, split, calibration: str
) -> Dict[str, float]:
    from apnet_pyg.zsl.nodes.report import node_metrics

    nodes, prediction = predict_among(scores, y, split.unseen, calibration)
    return node_metrics(prediction, y[nodes], split.unseen)


def validation_balanced(
    scores: Tensor, y: Tensor, split, calibration: str
) -> float:
    r"""Balanced accuracy (%) on the validation classes' nodes among the
    validation classes; NaN without validation classes."""
    from apnet_pyg.zsl.metrics import per_class_accuracy

    if split.val.numel() == 0:
        return math.nan
    nodes, prediction = predict_among(scores, y, split.val, calibration)
    return 100.0 * per_class_accuracy(prediction, y[nodes], split.val)


def run(root: str, dataset: str, seeds: int, epochs: int, log=print):
    from apnet_pyg.data import read_zero_shot_nodes
    from apnet_pyg.zsl.nodes.inputs import prepare_descriptions, scale_features

    nodes = read_zero_shot_nodes(root, dataset)
    y = nodes.data.y
    terms = lazy_walk_terms(
        scale_features(nodes.data.x, 'row'),
        nodes.data.edge_index,
        HOPS,
        LAZINESS,
    )
    descriptions = prepare_descriptions(nodes.description('text'), 'l2')
    rows = []
    for split_name in ('I', 'II'):
        split = nodes.split(split_name)
        for candidates in CANDIDATES:
            runs = {c: [] for c in CALIBRATIONS}
            validation = {c: [] for c in CALIBRATIONS}
            start = time.perf_counter()
            for seed in range(seeds):
                scores = train_and_score(
                    terms, descriptions, y, split, candidates, seed, epochs
                )
                for calibration in CALIBRATIONS:
                    runs[calibration].append(
                        unseen_metrics(scores, y, split, calibration)
                    )
                    validation[calibration].append(
                        validation_balanced(scores, y, split, calibration)
                    )
            log(
                f'  split {split_name}, candidates={candidates}: {seeds} '
                f'seeds in {time.perf_counter() - start:.0f} s'
            )
            for calibration in CALIBRATIONS:
                rows.append(
                    (
                        split_name,
                        candidates,
                        calibration,
                        runs[calibration],
                        validation[calibration],
                    )
                )
    return nodes, rows


def format_rows(rows) -> str:
    from apnet_pyg.zsl.nodes.report import summarise

    lines = [
        '| split | trained against | calibration | acc | balanced | '
        'floor | validation balanced |',
        '|---|---|---|---|---|---|---|',
    ]
    for split_name, candidates, calibration, runs, validation in rows:
        against = (
            'every class (DGPN)' if candidates == 'all' else 'the seen classes'
        )
        summary = summarise(runs)
        cells = [
            f'{summary[key]:.2f} ± {summary[key + "_std"]:.2f}'
            for key in ('acc', 'balanced')
        ]
        values = torch.tensor(validation, dtype=torch.float64)
        spread = float(values.std()) if values.numel() > 1 else 0.0
        val_cell = (
            '-'
            if bool(values.isnan().any())
            else f'{float(values.mean()):.2f} ± {spread:.2f}'
        )
        lines.append(
            f'| {split_name} | {against} | {calibration} | '
            f'{cells[0]} | {cells[1]} | {summary["floor"]:.2f} | '
            f'{val_cell} |'
        )
    return '\n'.join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--root', default=DEFAULT_ROOT)
    parser.add_argument('--dataset', default='cora')
    parser.add_argument('--seeds', type=int, default=3)
    parser.add_argument('--epochs', type=int, default=1000)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--out', default=str(DEFAULT_PAGE))
    args = parser.parse_args(argv)
    for name in ('seeds', 'epochs', 'threads'):
        if getattr(args, name) < 1:
            # Nothing trained or measured would still write a page.
            parser.error(
                f'--{name} must be at least 1 (got {getattr(args, name)})'
            )
    sys.path.insert(0, str(REPO))
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    try:
        nodes, rows = run(args.root, args.dataset, args.seeds, args.epochs)
    except (OSError, ValueError) as error:
        print(f'dgpn_training_ablation: {error}', file=sys.stderr)
        return 2
    minutes = (time.perf_counter() - start) / 60
    command = (
        'python experiments/dgpn_training_ablation.py --dataset '
        f'{args.dataset} --seeds {args.seeds} --epochs {args.epochs}'
    )
    page = (
        f'# What gives DGPN its margin ({nodes.name}, TEXT-CSDs)\n\n'
        'Generated by `experiments/dgpn_training_ablation.py` (its docstring '
        'describes the model and the two choices varied); never edited by '
        'hand.\n\n'
        f'`{command}` (on {platform.processor() or platform.machine()}, '
        f'torch threads: {torch.get_num_threads()}, {minutes:.1f} min) '
        f'printed, after the last of {args.epochs} epochs, mean ± std over '
        f"{args.seeds} seeds (floor: the constant predictor's accuracy; "
        "validation balanced: on Split II's validation classes, among "
        'them; chance: 100 over their number):'
        '\n\n' + format_rows(rows) + '\n'
    )
    Path(args.out).write_text(page)
    print(page)
    return 0


if __name__ == '__main__':
    sys.exit(main())
