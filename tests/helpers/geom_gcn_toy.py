r"""Small raw files in the layout of Geom-GCN's graphs, as PyG's
:class:`~torch_geometric.datasets.WebKB` (Cornell, Texas, Wisconsin) and
:class:`~torch_geometric.datasets.Actor` read them, for the tests of the
node-classification runner."""

import numpy as np


def write_raw_webkb(root, name='Texas', num_nodes=40, seed=0):
    r"""Writes :obj:`root/<name lower>/raw`: features (binary, a class's
    own feature set among them), labels of 5 classes, random directed
    edges and 10 splits of 60/20/20; returns the folder."""
    rng = np.random.default_rng(seed)
    folder = root / name.lower() / 'raw'
    folder.mkdir(parents=True)
    labels = rng.integers(0, 5, num_nodes)
    features = (rng.random((num_nodes, 12)) < 0.2).astype(int)
    features[np.arange(num_nodes), labels] = 1
    lines = ['node_id\tfeature\tlabel']
    for node in range(num_nodes):
        row = ','.join(map(str, features[node]))
        lines.append(f'{node}\t{row}\t{labels[node]}')
    (folder / 'out1_node_feature_label.txt').write_text(
        '\n'.join(lines) + '\n'
    )
    edges = rng.integers(0, num_nodes, (3 * num_nodes, 2))
    (folder / 'out1_graph_edges.txt').write_text(
        'node_id\tnode_id\n' + '\n'.join(f'{a}\t{b}' for a, b in edges) + '\n'
    )
    for split in range(10):
        order = rng.permutation(num_nodes)
        masks = {}
        for key, part in zip(
            ('train_mask', 'val_mask', 'test_mask'),
            np.split(order, [int(0.6 * num_nodes), int(0.8 * num_nodes)]),
        ):
            mask = np.zeros(num_nodes, dtype=bool)
            mask[part] = True
            masks[key] = mask
        np.savez(folder / f'{name.lower()}_split_0.6_0.2_{split}.npz', **masks)
    return folder
