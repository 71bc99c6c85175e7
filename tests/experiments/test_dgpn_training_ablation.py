r"""experiments/dgpn_training_ablation.py: DGPN's propagation terms against
the dense lazy walk, a smoke run on a tiny dataset, bad flags."""

import re

import pytest
import torch

from apnet_pyg.data import read_zero_shot_nodes
from apnet_pyg.zsl.nodes.inputs import scale_features
from tests.helpers.scripts import load_script
from tests.helpers.zero_shot_nodes import dense_graph, write_layout


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp('nodes')
    write_layout(root)
    return root, read_zero_shot_nodes(root, 'tiny')


def test_dgpn_ablation_terms_sum_to_the_lazy_walk(tiny):
    # The K + 1 terms add up to (beta I + (1 - beta) A_hat)^K X, A_hat the
    # symmetrically normalised adjacency with self-loops (float64, dense).
    script = load_script('dgpn_training_ablation')
    _, nodes = tiny
    x = scale_features(nodes.data.x, 'row').double()
    terms = script.lazy_walk_terms(x, nodes.data.edge_index, 3, 0.7)
    n = x.size(0)
    adjacency = dense_graph(nodes.data.edge_index, n)  # with self-loops
    scale = adjacency.sum(1).rsqrt()
    walk = (
        0.7 * torch.eye(n, dtype=torch.float64)
        + 0.3 * scale[:, None] * adjacency * scale[None, :]
    )
    torch.testing.assert_close(
        torch.stack(terms).sum(0), torch.linalg.matrix_power(walk, 3) @ x
    )
    torch.testing.assert_close(terms[0], 0.7**3 * x)


def test_dgpn_ablation_smoke(tiny, tmp_path, capsys):
    script = load_script('dgpn_training_ablation')
    root, _ = tiny
    out = tmp_path / 'page.md'
    assert (
        script.main(
            [
                '--root',
                str(root),
                '--dataset',
                'tiny',
                '--seeds',
                '2',
                '--epochs',
                '3',
                '--out',
                str(out),
            ]
        )
        == 0
    )
    page = out.read_text()
    assert page.count('| I |') == 4 and page.count('| II |') == 4
    assert 'every class (DGPN)' in page and '--epochs 3' in page
    # Validation balanced accuracy where the split has validation classes.
    for line in page.splitlines():
        if line.startswith('| I |'):
            assert line.endswith('| - |')
        elif line.startswith('| II |'):
            assert re.search(r'\| \d+\.\d\d ± \d+\.\d\d \|$', line), line
    assert (
        script.main(['--root', str(tmp_path / 'missing'), '--out', str(out)])
        == 2
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and 'missing' in error[0]
    for flag in ('--seeds', '--epochs'):
        with pytest.raises(SystemExit) as exit_info:
            script.main(
                [
                    '--root',
                    str(root),
                    '--dataset',
                    'tiny',
                    flag,
                    '0',
                    '--out',
                    str(out),
                ]
            )
        assert exit_info.value.code == 2
        assert f'{flag} must be at least 1 (got 0)' in capsys.readouterr().err
