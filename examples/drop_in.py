"""APNetConv as a drop-in layer of an ordinary PyG model.

Task: classify the 82,115 noun synsets of WordNet 3.0 into their
lexicographer file (noun.animal, noun.artifact, noun.person, ... 26 classes)
from the words of their gloss, with labels on 5% of the nodes. The graph is
WordNet's hypernym hierarchy (no download: built from the Debian WordNet
package). The same network is trained with and without an APNetConv layer;
propagation over the hypernym edges lifts the test accuracy.

    python examples/drop_in.py [--epochs 60]
"""

import argparse
import sys
import time
import zlib
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch.nn import Linear

from apnet_pyg.graph import load_wordnet, wordnet_noun_graph
from apnet_pyg.nn import APNetConv
from apnet_pyg.scripting import run_script


class Net(torch.nn.Module):
    def __init__(
        self, in_channels, hidden_channels, out_channels, propagate=True
    ):
        super().__init__()
        self.lin1 = Linear(in_channels, hidden_channels)
        self.conv = (
            APNetConv(
                hidden_channels,
                proj_channels=64,
                num_steps=2,
                learn_step_weights=False,
                teleport=None,
            )
            if propagate
            else None
        )
        self.lin2 = Linear(hidden_channels, out_channels)

    def forward(self, x, edge_index):
        x = F.relu(self.lin1(x))
        if self.conv is not None:
            x = self.conv(x, edge_index)
        return self.lin2(x)


def gloss_features(synset_names, dim=256):
    """Hashed bag of words of each synset's gloss (a fixed, offline
    feature: no embedding model needed)."""
    wordnet = load_wordnet()
    rows, cols = [], []
    for row, name in enumerate(synset_names):
        for word in wordnet.synset(name).definition().lower().split():
            rows.append(row)
            cols.append(zlib.crc32(word.strip('.,;:()"\'').encode()) % dim)
    x = torch.zeros(len(synset_names), dim)
    x.index_put_(
        (torch.tensor(rows), torch.tensor(cols)),
        torch.ones(len(rows)),
        accumulate=True,
    )
    return F.normalize(x, dim=-1)


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--epochs', type=int, default=60)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args(argv)
    if args.epochs < 1:
        raise ValueError(
            f'--epochs must be a positive integer (got {args.epochs})'
        )

    start = time.perf_counter()
    data = wordnet_noun_graph()
    data.x = gloss_features(data.synset_names)
    generator = torch.Generator().manual_seed(args.seed)
    perm = torch.randperm(data.num_nodes, generator=generator)
    num_train = data.num_nodes // 20
    train, test = perm[:num_train], perm[num_train:]
    print(
        f'WordNet noun graph: {data.num_nodes} nodes, '
        f'{data.num_edges} edges, {len(data.lexnames)} classes, '
        f'{num_train} labelled ({time.perf_counter() - start:.1f} s)'
    )

    for propagate in [False, True]:
        torch.manual_seed(args.seed)
        model = Net(data.num_features, 64, len(data.lexnames), propagate)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        start = time.perf_counter()
        for _ in range(args.epochs):
            model.train()
            optimizer.zero_grad()
            out = model(data.x, data.edge_index)
            loss = F.cross_entropy(out[train], data.y[train])
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            pred = model(data.x, data.edge_index).argmax(dim=-1)
        accuracy = float((pred[test] == data.y[test]).float().mean())
        name = 'MLP + APNetConv' if propagate else 'MLP (no graph)  '
        print(
            f'{name}: test accuracy {100 * accuracy:.1f}% '
            f'({args.epochs} epochs, {time.perf_counter() - start:.1f} s)'
        )


if __name__ == '__main__':
    # Errors (no WordNet, a bad flag) end in one line; --debug shows the
    # traceback.
    sys.exit(run_script(main))
