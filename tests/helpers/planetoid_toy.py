r"""Small raw Planetoid Cora files in the layout PyG's Planetoid reads
(:obj:`ROOT/Cora/raw/ind.cora.*`), for the tests of the reader and of the
Planetoid example."""

import pickle

import numpy as np


def write_raw_cora(root):
    r"""Writes files that PyG's reader reads whole (2 training nodes, the
    500 validation nodes it takes after them, 2 test nodes) under
    :obj:`root/Cora/raw` and returns that folder."""
    folder = root / 'Cora' / 'raw'
    folder.mkdir(parents=True)
    for part, value in [
        ('x', np.eye(2, 3)),
        ('tx', np.eye(2, 3)),
        ('allx', np.eye(502, 3)),
        ('y', np.eye(2, 3)),
        ('ty', np.eye(2, 3)),
        ('ally', np.eye(502, 3)),
        ('graph', {0: [1], 1: [0], 502: [503]}),
    ]:
        (folder / f'ind.cora.{part}').write_bytes(pickle.dumps(value))
    (folder / 'ind.cora.test.index').write_text('502\n503\n')
    return folder
