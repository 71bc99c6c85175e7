import hashlib
from pathlib import Path

import pytest
import torch

from apnet_pyg.data import read_zero_shot_nodes
from apnet_pyg.data.zero_shot_nodes import class_split
from tests.helpers.zero_shot_nodes import write_layout

REAL_ROOT = (
    Path(__file__).resolve().parents[2]
    / '..'
    / 'shared'
    / 'data'
    / 'zero_shot_nodes'
).resolve()


def test_reads_tiny_layout(tmp_path):
    made = write_layout(tmp_path)
    nodes = read_zero_shot_nodes(tmp_path, 'tiny')
    data = nodes.data
    assert data.num_nodes == 84 and nodes.num_classes == 7
    # Feature rows are matched to nodes by id, not by line.
    assert torch.equal(data.x, made['x'])
    assert torch.equal(data.y, made['y'])
    # Undirected, each edge in both directions once.
    pairs = {tuple(e) for e in data.edge_index.t().tolist()}
    expected = {(a, b) for a, b in made['edges']} | {
        (b, a) for a, b in made['edges']
    }
    assert pairs == expected
    assert data.edge_index.size(1) == len(expected)
    assert set(nodes.descriptions) == {'text', 'label'}
    assert nodes.description('text').shape == (7, 8)
    assert 'tiny' in repr(nodes)


def test_missing_label_descriptions_named(tmp_path):
    write_layout(tmp_path, label_csds=False)
    nodes = read_zero_shot_nodes(tmp_path, 'tiny')
    with pytest.raises(FileNotFoundError, match='tiny_label_csds.txt'):
        nodes.description('label')
    with pytest.raises(ValueError, match="'kind' must be one of"):
        nodes.description('image')


def test_named_splits():
    split = class_split(7, 'I', 'cora')
    assert (
        split.seen.tolist(),
        split.val.tolist(),
        split.unseen.tolist(),
    ) == ([0, 1, 2], [], [3, 4, 5, 6])
    split = class_split(7, 'II', 'cora')
    assert (
        split.seen.tolist(),
        split.val.tolist(),
        split.unseen.tolist(),
    ) == ([0, 1], [2, 3], [4, 5, 6])
    # DGPN's table for its other datasets, the rule for any other name.
    assert class_split(6, 'I', 'CiteSeer').seen.tolist() == [0, 1]
    assert class_split(6, 'I', 'C-M10-M').seen.tolist() == [0, 1, 2]
    assert class_split(9, 'I', 'other').seen.tolist() == [0, 1, 2, 3]
    assert class_split(6, 'II', 'other').unseen.tolist() == [4, 5]
    assert 'seen 0,1, validation 2,3' in class_split(7, 'II').describe()


def test_explicit_split():
    split = class_split(7, seen=[5, 0], val=[], unseen=[1, 2, 3])
    assert split.seen.tolist() == [0, 5] and split.name == 'custom'
    assert split.val.numel() == 0


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(split='II', name='x', num_classes=5), 'fewer than 2 seen or 2'),
        (dict(split='I', name='x', num_classes=3), 'fewer than 2 seen or 2'),
        (dict(split='III', num_classes=7), "'split' must be one of"),
        (dict(split='I', seen=[0, 1], num_classes=7), 'not both'),
        (dict(num_classes=7, seen=[0, 1]), 'seen and unseen'),
        (dict(num_classes=7, seen=[0, 1], unseen=[1, 2]), 'two of'),
        (dict(num_classes=7, seen=[0, 9], unseen=[1, 2]), r'ids in \[0, 6\]'),
        (dict(num_classes=7, seen=[0], unseen=[1, 2]), 'at least 2'),
        (
            dict(num_classes=7, seen=[0, 1], val=[2], unseen=[3, 4]),
            "'val' needs 0 or",
        ),
        (dict(num_classes=7, seen=[0, 0, 1], unseen=[3, 4]), 'twice'),
    ],
)
def test_bad_split(kwargs, message):
    with pytest.raises(ValueError, match=message):
        class_split(**kwargs)


def _edit(path, old, new):
    path.write_text(path.read_text().replace(old, new, 1))


@pytest.mark.parametrize(
    'damage, error, message',
    [
        (
            lambda f: (f / 'tiny' / 'graph.txt').unlink(),
            FileNotFoundError,
            r"graph\.txt' is missing",
        ),
        (
            lambda f: (f / 'csd_files' / 'tiny_text_csds.txt').unlink(),
            FileNotFoundError,
            r"tiny_text_csds\.txt' is missing",
        ),
        (
            lambda f: _edit(f / 'tiny' / 'group.txt', '100\t0', '100\tzero'),
            ValueError,
            r"group\.txt' line 1: class id 'zero'",
        ),
        (
            lambda f: _edit(f / 'tiny' / 'group.txt', '100\t0', '100\t7'),
            ValueError,
            r"group\.txt' line 1: class 7 is not one of the 7",
        ),
        (
            lambda f: _edit(f / 'tiny' / 'group.txt', '100\t0', '100\t0\t1'),
            ValueError,
            r"group\.txt' line 1: expected 'node class'",
        ),
        (
            lambda f: _edit(f / 'tiny' / 'graph.txt', '100\t', '999\t'),
            ValueError,
            r"graph\.txt' line 1: node 999 is not in group\.txt",
        ),
        (
            lambda f: _edit(f / 'tiny' / 'feature.txt', ' 0', ' x'),
            ValueError,
            r"feature\.txt' holds a value that is not a number",
        ),
        (
            lambda f: _edit(f / 'tiny' / 'feature.txt', ' 0', ''),
            ValueError,
            r"feature\.txt' line 2: 24 features, line 1 has 23",
        ),
        (
            lambda f: (f / 'tiny' / 'class_names.json').write_text('{"a": 1}'),
            ValueError,
            r"class_names\.json' must hold a JSON list",
        ),
        (
            lambda f: (f / 'csd_files' / 'tiny_text_csds.txt').write_text(
                '1 2\n3 4\n'
            ),
            ValueError,
            r"tiny_text_csds\.txt' has 2 rows for "
            r'the 7 classes',
        ),
    ],
)
def test_bad_layout_names_the_file(tmp_path, damage, error, message):
    write_layout(tmp_path, shuffle_features=False)
    damage(tmp_path)
    with pytest.raises(error, match=message):
        read_zero_shot_nodes(tmp_path, 'tiny')


def test_bad_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match='no dataset folder'):
        read_zero_shot_nodes(tmp_path, 'cora')
    with pytest.raises(ValueError, match='folder name'):
        read_zero_shot_nodes(tmp_path, '../cora')


def test_feature_rows_must_cover_the_nodes(tmp_path):
    write_layout(tmp_path, shuffle_features=False)
    path = tmp_path / 'tiny' / 'feature.txt'
    path.write_text('\n'.join(path.read_text().splitlines()[:-1]))
    with pytest.raises(
        ValueError,
        match=r"feature\.txt' has 83 rows for "
        r'the 84 nodes',
    ):
        read_zero_shot_nodes(tmp_path, 'tiny')


@pytest.mark.skipif(
    not REAL_ROOT.is_dir(),
    reason=f'the real data is not '
    f'at {REAL_ROOT} (../shared next to the clone)',
)
def test_real_files_match_sha256sums_and_read():
    lines = (REAL_ROOT / 'SHA256SUMS').read_text().splitlines()
    assert lines
    for line in lines:
        digest, name = line.split()
        assert (
            hashlib.sha256((REAL_ROOT / name).read_bytes()).hexdigest()
            == digest
        ), name
    nodes = read_zero_shot_nodes(REAL_ROOT, 'cora')
    assert nodes.data.num_nodes == 2708
    assert nodes.data.num_features == 1433
    assert nodes.data.edge_index.size(1) == 2 * 5278
    assert torch.bincount(nodes.data.y).tolist() == [
        818,
        180,
        217,
        426,
        351,
        418,
        298,
    ]
    assert nodes.description('label').shape == (7, 128)
