"""APNetConv as a drop-in layer on real Planetoid Cora, next to PyG's
AGNNConv and GATConv.

The model is PyG's AGNN example (``examples/agnn.py`` in PyG): dropout 0.5,
Linear(1433, 16), ReLU, two propagation layers, dropout 0.5, Linear(16, 7);
Adam (lr 0.01, weight decay 5e-4), 200 epochs on the public split (140
training, 500 validation, 1,000 test nodes), test accuracy at the epoch of
best validation accuracy. Only the two propagation layers change:

- ``APNetConv``: ``APNetConv(16)`` twice, the constructor defaults;
- ``AGNNConv``: ``AGNNConv(requires_grad=False)`` then
  ``AGNNConv(requires_grad=True)``, as in PyG's example;
- ``GATConv``: ``GATConv(16, 16)`` twice (one head, in the same model).

    python examples/planetoid.py                    # the table, 10 seeds
    python examples/planetoid.py --search           # the validation search

``--search`` is how APNetConv's defaults were chosen: a grid of
configurations, each trained with 5 seeds, ranked by mean validation
accuracy; it never computes a test accuracy. It writes
``examples/results/planetoid_search.md``; the table goes to ``--out``.

Cora is read offline from the raw Planetoid files (``--raw``, by default
``../shared/data/planetoid`` next to the repository) with the reader PyG's
``Planetoid`` uses, without a download or a processed copy. Input
dropout is applied to the non-zero entries of the (sparse) bag-of-words
features only: the same distribution as dense dropout (dropping a zero does
nothing), 20 times faster on CPU.
"""

import argparse
import datetime
import itertools
import os.path as osp
import platform
import statistics
import sys
import time
import warnings
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.data import Data
from torch_geometric.nn import AGNNConv, GATConv

from apnet_pyg.data.planetoid import raw_folder, read_raw_planetoid
from apnet_pyg.files import atomic_write_text, check_output_file
from apnet_pyg.nn import APNetConv
from apnet_pyg.scripting import run_script

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEFAULT_RAW = osp.join(ROOT, '..', 'shared', 'data', 'planetoid')
SEARCH_OUT = osp.join(ROOT, 'examples', 'results', 'planetoid_search.md')
HIDDEN = 16

# The search grid: APNetConv(16, **config) for every combination (the
# projection's initialisation only where there is a projection).
GRID = {
    'proj_channels': [None, 16, 64],
    'proj_init': ['glorot', 'identity'],
    'temperature': [0.25, 0.5, 1.0, 2.0, 10.0],
    'learn_temperature': [False, True],
    'num_steps': [1, 2],
}
SEARCH_SEEDS = range(5)
TABLE_SEEDS = 10  # seeds 0..9 of the table, the default of --seeds


def load_cora(raw: str = DEFAULT_RAW) -> Data:
    r"""Cora with row-normalised features and the public split, read from
    the raw Planetoid files in :obj:`raw/Cora/raw` (what PyG's
    :class:`Planetoid` reads them with, without its processed copy)."""
    folder = raw_folder(raw, 'Cora')
    if not osp.isdir(folder):
        raise FileNotFoundError(
            f'No raw Planetoid Cora files under '
            f'{folder}; pass --raw DIR '
            f'(DIR/Cora/raw/ind.cora.*)'
        )
    try:
        data = read_raw_planetoid(raw, 'Cora')
    except (OSError, ValueError) as error:  # The message names the file.
        raise type(error)(
            f'--raw: {error}; copy the raw Planetoid Cora '
            f'files (ind.cora.*) into {folder} again'
        ) from None
    return T.NormalizeFeatures()(data)


class Net(torch.nn.Module):
    r"""PyG's AGNN example network with :obj:`make_conv(i)` as propagation
    layer :obj:`i` (0 or 1)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        make_conv: Callable[[int], torch.nn.Module],
    ):
        super().__init__()
        self.lin1 = torch.nn.Linear(in_channels, HIDDEN)
        self.prop1 = make_conv(0)
        self.prop2 = make_conv(1)
        self.lin2 = torch.nn.Linear(HIDDEN, out_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor):
        if x.layout == torch.sparse_csr:  # Dropout on the stored entries.
            x = torch.sparse_csr_tensor(
                x.crow_indices(),
                x.col_indices(),
                F.dropout(x.values(), p=0.5, training=self.training),
                x.shape,
            )
            x = x @ self.lin1.weight.t() + self.lin1.bias
        else:
            x = self.lin1(F.dropout(x, p=0.5, training=self.training))
        x = F.relu(x)
        x = self.prop1(x, edge_index)
        x = self.prop2(x, edge_index)
        x = F.dropout(x, p=0.5, training=self.training)
        return F.log_softmax(self.lin2(x), dim=1)


#: The propagation layers of the comparison, by name.
LAYERS: Dict[str, Callable[[int], torch.nn.Module]] = {
    'APNetConv': lambda i: APNetConv(HIDDEN),
    'AGNNConv': lambda i: AGNNConv(requires_grad=i == 1),
    'GATConv': lambda i: GATConv(HIDDEN, HIDDEN),
}


def train(
    data: Data,
    make_conv: Callable[[int], torch.nn.Module],
    seed: int,
    epochs: int = 200,
    test: bool = True,
) -> Tuple[float, Optional[float]]:
    r"""Trains one model; returns the best validation accuracy and the test
    accuracy at that epoch (:obj:`None` with :obj:`test=False`: then the
    test nodes are never evaluated)."""
    torch.manual_seed(seed)
    model = Net(data.num_features, int(data.y.max()) + 1, make_conv)
    optimizer = torch.optim.Adam(
        model.parameters(), lr=0.01, weight_decay=5e-4
    )
    x = data.x.to_sparse_csr()
    best_val, test_acc = -1.0, None
    for _ in range(epochs):
        model.train()
        optimizer.zero_grad()
        out = model(x, data.edge_index)
        F.nll_loss(out[data.train_mask], data.y[data.train_mask]).backward()
        optimizer.step()

        model.eval()
        with torch.no_grad():
            pred = model(x, data.edge_index).argmax(dim=-1)
        val = float(
            (pred[data.val_mask] == data.y[data.val_mask]).float().mean()
        )
        if val > best_val:
            best_val = val
            if test:
                test_acc = float(
                    (pred[data.test_mask] == data.y[data.test_mask])
                    .float()
                    .mean()
                )
    return best_val, test_acc


def mean_std(values: Sequence[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f'{100 * statistics.mean(values):.1f} ± {100 * std:.1f}'


def compare(
    data: Data,
    seeds: Iterable[int],
    epochs: int = 200,
    layers: Sequence[str] = tuple(LAYERS),
    log=print,
) -> str:
    r"""The comparison table (markdown): test and validation accuracy,
    mean ± standard deviation over :obj:`seeds`, and seconds per run."""
    seeds = list(seeds)
    lines = [
        '| layer | test accuracy (%) | best validation accuracy (%) | '
        's per run |',
        '|---|---|---|---|',
    ]
    for name in layers:
        results, start = [], time.perf_counter()
        for seed in seeds:
            results.append(train(data, LAYERS[name], seed, epochs))
            log(
                f'{name} seed {seed}: val {100 * results[-1][0]:.1f}, '
                f'test {100 * results[-1][1]:.1f}'
            )
        seconds = (time.perf_counter() - start) / len(seeds)
        lines.append(
            f'| {name} | {mean_std([r[1] for r in results])} | '
            f'{mean_std([r[0] for r in results])} | '
            f'{seconds:.1f} |'
        )
    return '\n'.join(lines)


def grid_configs(grid: Dict[str, list] = GRID) -> List[dict]:
    r"""Every combination of :obj:`grid`, the initialisation only with a
    projection."""
    configs = []
    for values in itertools.product(*grid.values()):
        config = dict(zip(grid, values))
        if config['proj_channels'] is None:
            if config['proj_init'] != grid['proj_init'][0]:
                continue
            del config['proj_init']
        configs.append(config)
    return configs


def search(
    data: Data,
    configs: Sequence[dict],
    seeds: Iterable[int] = SEARCH_SEEDS,
    epochs: int = 200,
    log=print,
) -> List[dict]:
    r"""Trains :obj:`APNetConv(16, **config)` (both layers) for every
    configuration and seed; returns the configurations with their
    validation accuracies, best mean first. Test accuracy is never
    computed."""
    seeds = list(seeds)
    results = []
    for number, config in enumerate(configs, 1):
        vals = [
            train(
                data,
                lambda i, config=config: APNetConv(HIDDEN, **config),
                seed,
                epochs,
                test=False,
            )[0]
            for seed in seeds
        ]
        results.append({'config': config, 'val': vals})
        log(f'[{number}/{len(configs)}] {config}: val {mean_std(vals)}')
    return sorted(results, key=lambda r: -statistics.mean(r['val']))


def search_report(
    results: Sequence[dict], seeds: Sequence[int], epochs: int, command: str
) -> str:
    keys = list(GRID)
    lines = [
        '# APNetConv drop-in defaults: validation search on Planetoid Cora',
        '',
        f'Produced by `{command}` on {datetime.date.today()} '
        f'({platform.processor() or platform.machine()}, torch '
        f'{torch.__version__}, {torch.get_num_threads()} thread(s)).',
        '',
        f'Every configuration is `APNetConv(16, **config)` as both '
        f"propagation layers of PyG's AGNN model on Cora (see "
        f'`examples/planetoid.py`), trained {epochs} epochs with seeds '
        f'{", ".join(map(str, seeds))}; the score is the best validation '
        f'accuracy of a run (500 validation nodes), mean ± standard '
        f'deviation over the seeds. Only the training and validation nodes '
        f'are used: the search never computes a test accuracy. The first '
        f'row became the constructor defaults. `proj_channels=None` is no '
        f'projection (f the identity, AGNNConv with a fixed or learned '
        f'temperature); `proj_init` applies to a projection only.',
        '',
        '| rank | ' + ' | '.join(keys) + ' | validation accuracy (%) |',
        '|---' * (len(keys) + 2) + '|',
    ]
    for rank, result in enumerate(results, 1):
        config = result['config']
        cells = [str(config.get(key, '-')) for key in keys]
        lines.append(
            f'| {rank} | '
            + ' | '.join(cells)
            + f' | {mean_std(result["val"])} |'
        )
    return '\n'.join(lines) + '\n'


def check_arguments(args: argparse.Namespace) -> None:
    r"""Refuses bad flags with a one-line error before Cora is read (a
    zero would end a long run in a division by zero)."""
    if args.search:
        for flag in ('seeds', 'layers'):
            if getattr(args, flag) is not None:
                raise ValueError(
                    f'--{flag} goes with the table, not '
                    f'--search (the search trains APNetConv '
                    f'with seeds 0-{max(SEARCH_SEEDS)})'
                )
    if args.seeds is not None and args.seeds < 1:
        raise ValueError(
            f'--seeds must be a positive integer (got {args.seeds})'
        )
    if args.epochs < 1:
        raise ValueError(
            f'--epochs must be a positive integer (got {args.epochs})'
        )
    if args.layers is not None and len(set(args.layers)) < len(args.layers):
        raise ValueError(
            f'--layers names a layer twice ({" ".join(args.layers)})'
        )
    if args.out is not None:
        check_output_file(args.out, '--out', 'a markdown file name')


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--raw', default=DEFAULT_RAW, help='folder holding Cora/raw/ind.cora.*'
    )
    parser.add_argument(
        '--seeds',
        type=int,
        default=None,
        help=f'seeds 0..SEEDS-1 of the table (default: '
        f'{TABLE_SEEDS}; the search always uses '
        f'{len(SEARCH_SEEDS)})',
    )
    parser.add_argument(
        '--epochs', type=int, default=200, help='epochs per run (default: 200)'
    )
    parser.add_argument(
        '--layers',
        nargs='+',
        choices=list(LAYERS),
        default=None,
        help='layers of the table (default: all)',
    )
    parser.add_argument(
        '--search',
        action='store_true',
        help='run the validation search of APNetConv '
        'configurations instead of the table',
    )
    parser.add_argument(
        '--out',
        help=f'also write the markdown here (--search: default {SEARCH_OUT})',
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    check_arguments(args)
    # The sparse features: only the CSR products used here, which are stable.
    warnings.filterwarnings('ignore', 'Sparse CSR tensor support is in beta')

    data = load_cora(args.raw)
    command = ' '.join(['python examples/planetoid.py', *argv])
    if args.search:
        seeds = list(SEARCH_SEEDS)
        results = search(data, grid_configs(), seeds, args.epochs)
        report = search_report(results, seeds, args.epochs, command.strip())
        out = args.out or SEARCH_OUT
        atomic_write_text(report, out)
        print(f'best: {results[0]["config"]}; wrote {out}')
        return

    seeds = TABLE_SEEDS if args.seeds is None else args.seeds
    table = compare(
        data, range(seeds), args.epochs, args.layers or list(LAYERS)
    )
    print(table)
    if args.out:
        atomic_write_text(table + '\n', args.out)


if __name__ == '__main__':
    sys.exit(run_script(main))
