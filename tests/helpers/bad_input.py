r"""The bad-input tables' shared parts: the row (:class:`Case`), a table
(:class:`Table`), the lazy inputs of the rows (:class:`Ctx`, the fixture
``bad_input_ctx`` in conftest.py) and the runner (:func:`check_row`).

Each package's table, ``tests/<package>/test_<package>_bad_input.py``, holds
every bad input of that package we know of, and the error it gets: one row
per input. A row is an id, a call, the exception type (or, for the command
line, the exit status) and a regular expression the message must match,
which names the argument, flag or file at fault and the key words of what is
wrong (not the whole wording). Every message must be one line; the command
line prints exactly one line, ``error: ...`` (status 1), or argparse's usage
error (status 2) for a malformed flag. Nothing may pass silently or with a
wrong answer: each row was a crash, an unclear message or a silent wrong
answer before its fix, or is a clear error that must stay one.

Adding a row is one line in the package's table; the inputs come from the
lazy :class:`Ctx` (a temporary folder, the tiny simulated dataset, a tiny
trained run, broken copies of each).
"""

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Union

import pytest
import torch
import torch_geometric

from apnet_pyg.data import load_xlsa17
from apnet_pyg.nn.functional import edge_index_arrays
from apnet_pyg.zsl import TrainConfig
from apnet_pyg.zsl.cli import main
from tests.helpers.xlsa17_toy import write_dataset

# A tiny run: small enough that building and training it takes a second.
SMALL = TrainConfig(
    class_channels=8,
    hidden_channels=8,
    proj_channels=4,
    num_centroids=2,
    n_way=4,
    epochs=1,
    lr_decay_epoch=None,
    iterations_per_epoch=2,
    lr=1e-3,
    model_selection='none',
)
SMALL_FLAGS = [
    '--class-channels',
    '8',
    '--hidden-channels',
    '8',
    '--proj-channels',
    '4',
    '--num-centroids',
    '2',
    '--n-way',
    '4',
    '--epochs',
    '1',
    '--iterations-per-epoch',
    '2',
    '--model-selection',
    'none',
    '--no-progress',
]


class Ctx:
    r"""The inputs of the rows, built when a row asks for them."""

    def __init__(self, request, tmp_path: Path):
        self._request = request
        self.tmp = tmp_path

    def fixture(self, name: str):
        return self._request.getfixturevalue(name)

    @property
    def tiny_root(self) -> Path:
        return self.fixture('tiny_root')

    @property
    def data(self):
        return self.fixture('bad_input_data')

    @property
    def class_side(self):
        return load_xlsa17(self.tiny_root, 'TINY', load_features=False)

    @property
    def run(self) -> Path:
        return self.fixture('bad_input_run')

    def run_copy(self) -> Path:
        return Path(shutil.copytree(self.run, self.tmp / 'run'))

    def run_without(self, name: str) -> Path:
        run_dir = self.run_copy()
        (run_dir / name).unlink()
        return run_dir

    def metrics(self) -> dict:
        r"""The trained run's metrics.json."""
        return json.loads((self.run / 'metrics.json').read_text())

    def run_with(self, name: str, content) -> Path:
        r"""A copy of the trained run with :obj:`name` replaced."""
        run_dir = self.run_copy()
        write(run_dir / name, content)
        return run_dir

    def toy(self, **changes) -> Path:
        r"""The root of the toy dataset 'TOY' (see xlsa17_toy.py)."""
        write_dataset(self.tmp, **changes)
        return self.tmp

    def toy_without(self, name: str, **changes) -> Path:
        root = self.toy(**changes)
        (root / 'TOY' / name).unlink()
        return root

    def toy_with(self, name: str, content, **changes) -> Path:
        r"""The toy dataset with the file :obj:`name` replaced (or made a
        directory, for :data:`DIRECTORY`)."""
        root = self.toy(**changes)
        write(root / 'TOY' / name, content)
        return root

    def train(
        self,
        *flags: str,
        out: Union[str, Path, None] = None,
        root: Union[str, Path, None] = None,
    ) -> List[str]:
        r"""An :obj:`apnet-zsl train` command line of the tiny run."""
        root = self.tiny_root if root is None else root
        out = self.tmp / 'run' if out is None else out
        return (
            [
                'train',
                '--dataset',
                'TINY',
                '--root',
                str(root),
                '--out',
                str(out),
            ]
            + SMALL_FLAGS
            + list(flags)
        )

    def checkpoint_run(self, content) -> Path:
        r"""A run directory holding only :obj:`content` as checkpoint.pt."""
        out = self.tmp / 'run'
        out.mkdir()
        write(out / 'checkpoint.pt', content)
        return out

    def pipeline_out(self) -> Path:
        r"""A pipeline folder whose data is the tiny simulated dataset."""
        out = self.tmp / 'demo'
        (out / 'data').mkdir(parents=True)
        (out / 'data' / 'TINY').symlink_to(self.tiny_root / 'TINY')
        return out


DIRECTORY = object()  # write(): make a directory instead of a file.


def write(path: Path, content) -> Path:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    if content is DIRECTORY:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:  # A Python object: torch.save.
        torch.save(content, path)
    return path


def toy_load(root, **kwargs):
    return load_xlsa17(root, 'TOY', **kwargs)


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[Ctx], Any]  # The call, or the command line (argv).
    error: Union[type, int]  # Exception type, or the CLI's exit status.
    match: str  # Regular expression the message matches.
    debug: bool = False  # Run under torch_geometric.debug().

    @property
    def cli(self) -> bool:
        return isinstance(self.error, int)


class Table(list):
    r"""A package's rows; :meth:`case` and :meth:`cli` add one."""

    def case(
        self,
        id: str,
        call: Callable[[Ctx], Any],
        error: type,
        match: str,
        debug: bool = False,
    ) -> None:
        self.append(Case(id, call, error, match, debug))

    def cli(
        self,
        id: str,
        argv: Callable[[Ctx], List[str]],
        match: str,
        status: int = 1,
    ) -> None:
        self.append(Case(id, argv, status, match))

    def parametrize(self):
        r"""The decorator of the test that runs every row."""
        return pytest.mark.parametrize('row', self, ids=[c.id for c in self])


# Shared tensors (never modified by a call).
g = torch.Generator().manual_seed(0)
X = torch.randn(5, 6, generator=g)
EDGES = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])
WEIGHT = torch.rand(6, generator=g) + 0.1
X_SRC, X_DST = torch.randn(4, 6, generator=g), torch.randn(3, 4, generator=g)
BIPARTITE = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 0]])
DX = torch.randn(2, 5, 6, generator=g)
ADJ = torch.rand(2, 5, 5, generator=g) < 0.5
PATTERN, _ = edge_index_arrays(EDGES.flip(0), (5, 5))
RECT, _ = edge_index_arrays(torch.tensor([[0, 1, 2], [0, 1, 3]]), (3, 4))
LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
ZERO_ROW = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.5, 0.5]])
CORRUPT = b'\x80\x03corrupt bytes, not a pickle or a zip archive'

# What a message must name: an argument in quotes ('x', 'x[1]',
# 'in_channels'), a flag (--out), a file (.mat, .json, .pt, .txt, .png), a
# keyword (n_way=7) or the argument argparse names.
NAMED = re.compile(
    r"'(\.\*)?[\w\[\]\\.=-]+'|--\w|\.(mat|json|pt|txt|png)|"
    r'\w+=|\w+\\\[|x\[|x_dst|x\\\[0|'
    r'argument \w|required: \w'
)


def check_table(table: Table) -> None:
    r"""Unique row ids, and every pattern names what is wrong."""
    ids = [row.id for row in table]
    assert len(set(ids)) == len(ids), 'row ids must be unique'
    for row in table:
        assert NAMED.search(row.match), row.id


def one_line(text: str) -> str:
    assert text.strip() and '\n' not in text.strip(), text
    return text.strip()


def check_row(row: Case, ctx: Ctx, capsys) -> None:
    r"""Runs :obj:`row`: the exception type (or exit status), one line, and
    the pattern."""
    if row.cli:
        argv = row.call(ctx)
        capsys.readouterr()
        try:
            status = main([str(arg) for arg in argv])
        except SystemExit as exit:  # argparse
            status = exit.code
        err = capsys.readouterr().err
        assert status == row.error, err
        if status == 2:  # Usage, then the one-line message.
            message = one_line(err.strip().splitlines()[-1])
        else:
            message = one_line(err)
            assert message.startswith('error: ') and 'Traceback' not in err, (
                err
            )
        assert re.search(row.match, message), message
        return

    with torch_geometric.debug() if row.debug else _no_debug():
        with pytest.raises(row.error) as info:
            row.call(ctx)
    message = one_line(str(info.value))
    assert re.search(row.match, message), message


class _no_debug:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
