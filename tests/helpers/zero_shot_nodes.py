r"""What the tests of zero-shot node classification share: a small
dataset in DGPN's layout (:func:`write_layout`), an APNet setting small
enough for a test (:data:`TINY_NODES`), a graph's dense adjacency
(:func:`dense_graph`) and a dataset whose unseen labels are permuted
(:func:`relabel_unseen`)."""

import json
from pathlib import Path

import torch

from apnet_pyg.zsl.nodes.inputs import NodeSetting

#: A node setting small enough for a test: a few short epochs.
TINY_NODES = NodeSetting().replace(
    class_channels=16,
    hidden_channels=16,
    proj_channels=8,
    k_shot=4,
    epochs=2,
    iterations_per_epoch=2,
)


def write_layout(
    root,
    name='tiny',
    num_classes=7,
    per_class=12,
    num_features=24,
    csd_dim=8,
    seed=0,
    shuffle_features=True,
    label_csds=True,
):
    r"""A small dataset in DGPN's layout: node ids are 100 + i, class c's
    nodes share feature block c and are linked in a ring, with one edge
    between consecutive classes and one repeated edge."""
    gen = torch.Generator().manual_seed(seed)
    root = Path(root)
    folder = root / name
    folder.mkdir(parents=True)
    (root / 'csd_files').mkdir(exist_ok=True)
    num_nodes = num_classes * per_class
    y = torch.arange(num_classes).repeat_interleave(per_class)
    x = (torch.rand(num_nodes, num_features, generator=gen) < 0.1).long()
    block = max(1, num_features // num_classes)
    for node in range(num_nodes):
        c = int(y[node])
        x[node, c * block : (c + 1) * block] |= (
            torch.rand(block, generator=gen) < 0.7
        ).long()
    ids = [100 + i for i in range(num_nodes)]
    order = (
        torch.randperm(num_nodes, generator=gen).tolist()
        if shuffle_features
        else list(range(num_nodes))
    )
    (folder / 'feature.txt').write_text(
        '\n'.join(
            ' '.join([str(ids[i])] + [str(int(v)) for v in x[i]])
            for i in order
        )
    )
    edges = []
    for c in range(num_classes):
        members = [c * per_class + k for k in range(per_class)]
        edges += [
            (members[k], members[(k + 1) % per_class])
            for k in range(per_class)
        ]
        if c + 1 < num_classes:
            edges.append((members[0], members[0] + per_class))
    edges.append(edges[0][::-1])  # the same edge reversed: counted once
    (folder / 'graph.txt').write_text(
        ''.join(f'{ids[a]}\t{ids[b]}\n' for a, b in edges)
    )
    (folder / 'group.txt').write_text(
        ''.join(f'{ids[i]}\t{int(y[i])}\n' for i in range(num_nodes))
    )
    (folder / 'class_names.json').write_text(
        json.dumps([f'class_{c}' for c in range(num_classes)])
    )
    for kind in ('text', 'label') if label_csds else ('text',):
        csds = torch.randn(num_classes, csd_dim, generator=gen) + 3.0
        (root / 'csd_files' / f'{name}_{kind}_csds.txt').write_text(
            '\n'.join(' '.join(f'{v:.6e}' for v in row) for row in csds)
        )
    return {'x': x.float(), 'y': y, 'edges': edges, 'ids': ids}


def dense_graph(edge_index, n):
    r"""The adjacency :math:`(n, n)` (float64, row = target) of
    :obj:`edge_index` with self-loops: the graph the node propagations
    average over."""
    adj = torch.zeros(n, n, dtype=torch.double)
    adj[edge_index[1], edge_index[0]] = 1.0
    adj.fill_diagonal_(1.0)
    return adj


def relabel_unseen(nodes, first_unseen=4, num_unseen=3):
    r"""A copy of :obj:`nodes` with the labels of its unseen classes
    (Split II's: the last :obj:`num_unseen`, from :obj:`first_unseen`)
    permuted among themselves: whatever a choice reads of them changes."""
    y = nodes.data.y.clone()
    unseen = y >= first_unseen
    y[unseen] = first_unseen + (y[unseen] - first_unseen + 1) % num_unseen
    changed = type(nodes)(
        nodes.name,
        nodes.data.clone(),
        nodes.class_names,
        nodes.descriptions,
        nodes.files,
    )
    changed.data.y = y
    return changed
