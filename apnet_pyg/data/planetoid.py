r"""The raw Planetoid files (Cora, CiteSeer, PubMed), read offline.

PyG's :class:`~torch_geometric.datasets.Planetoid` downloads the raw files
and writes a processed copy beside them; :func:`read_raw_planetoid` reads
the raw files where they are, with the reader :class:`Planetoid` uses, and
says which file is missing or unreadable when they do not read.
"""

import os.path as osp

from torch_geometric.data import Data
from torch_geometric.io import read_planetoid_data
from torch_geometric.io.planetoid import read_file

#: The raw files of a Planetoid dataset, ``ind.<name>.<part>``, that
#: :func:`~torch_geometric.io.read_planetoid_data` reads.
RAW_PARTS = ('x', 'tx', 'allx', 'y', 'ty', 'ally', 'graph', 'test.index')


def raw_folder(root: str, name: str = 'Cora') -> str:
    r"""Where :class:`Planetoid(root, name)` keeps the raw files:
    :obj:`root/name/raw`."""
    return osp.join(root, name, 'raw')


def read_raw_planetoid(root: str, name: str = 'Cora') -> Data:
    r"""The Planetoid dataset :obj:`name` with its public split, as
    :class:`~torch_geometric.datasets.Planetoid` reads it from
    :obj:`root/name/raw/ind.<name>.*` (no transform, no processed copy).

    Raises:
        FileNotFoundError: The folder or one of its files is missing (the
            message names it).
        ValueError: A file does not read (truncated or garbled; the message
            names it), or the files read but do not fit together.
    """
    folder = raw_folder(root, name)
    if not osp.isdir(folder):
        raise FileNotFoundError(
            f"no folder '{folder}' of raw Planetoid {name} files"
        )
    paths = {
        part: osp.join(folder, f'ind.{name.lower()}.{part}')
        for part in RAW_PARTS
    }
    for path in paths.values():
        if not osp.isfile(path):
            raise FileNotFoundError(f"'{path}' is missing")
    try:
        return read_planetoid_data(folder, name)
    except Exception as error:  # Truncated, garbled or mismatched: which?
        failed = error
    for part, path in paths.items():
        try:
            read_file(folder, name, part)
        except Exception as error:
            raise ValueError(
                f"cannot read '{path}' ({_summary(error)}): it "
                f'is truncated or garbled'
            ) from error
    raise ValueError(
        f"the raw {name} files in '{folder}' do not fit "
        f'together ({_summary(failed)})'
    ) from failed


def _summary(error: Exception) -> str:
    message = ' '.join(str(error).split())[:120]
    return f'{type(error).__name__}: {message}'
