import re
from pathlib import Path

import pytest
import torch

from apnet_pyg.zsl.cli import main
from apnet_pyg.zsl.nodes.inputs import scale_features
from apnet_pyg.zsl.nodes.protocol import (
    OTHER_ROWS,
    ensemble_sizes_of,
    quick_grid,
    run_nodes,
)
from apnet_pyg.zsl.nodes.report import format_nodes
from tests.helpers.zero_shot_nodes import TINY_NODES, dense_graph

REPO = Path(__file__).resolve().parents[3]


def test_ensemble_sizes():
    # Ensembles of half the selection's seeds: two at least in the
    # selection, one at least in the evaluation.
    assert ensemble_sizes_of(4, 10) == (1, 2)
    assert ensemble_sizes_of(6, 10) == (1, 3)
    assert ensemble_sizes_of(3, 10) == (1,)
    assert ensemble_sizes_of(4, 1) == (1,)


def test_run_nodes_table(tiny):
    _, nodes = tiny
    splits = [nodes.split('I'), nodes.split('II')]
    results = run_nodes(
        nodes,
        splits,
        ['text'],
        seeds=[0, 1, 2, 3],
        selection_seeds=[0, 1, 2, 3],
        base=TINY_NODES,
        grid=quick_grid(TINY_NODES),
        gzsl=True,
        log=lambda line: None,
    )
    block = results['csds']['text']
    rows = block['rows']
    methods = [row['method'] for row in rows]
    assert methods[0] == 'APNet (chosen)'
    # The best with the other choice of the k-NN graph and of smoothing.
    assert len(methods) == 1 + len(OTHER_ROWS) + 3
    assert methods[-3:] == [
        "ESZSL (DGPN's inputs)",
        "SAE (DGPN's inputs)",
        "ESZSL (APNet's inputs)",
    ]
    chosen = rows[0]
    knn = 'graph=knn' in chosen['setting']
    assert block['knn_chosen'] == knn
    assert methods[1] == (
        'APNet (best without the k-NN class graph)'
        if knn
        else 'APNet (best with the k-NN class graph)'
    )
    assert ('graph=knn' in rows[1]['setting']) != knn
    smoothed = 'scores smoothed' in chosen['setting']
    assert ('scores smoothed' in rows[2]['setting']) != smoothed
    # An ensemble row: over its ensembles of consecutive seeds.
    expected = 2 if 'ensemble of 2 seeds' in chosen['setting'] else 4
    assert chosen['splits']['I']['seeds'] == expected
    # Every setting and reading of the grid, with its validation figure.
    assert len(block['selection']) == 2 * 10
    assert block['oracle']['split'] == 'II'
    assert [row['method'] for row in block['gzsl']] == [
        'APNet (chosen)',
        "ESZSL (DGPN's inputs)",
        "SAE (DGPN's inputs)",
    ]
    for row in block['gzsl']:
        assert row['calibration'] is not None
        assert set(row['splits']) == {'I', 'II'}
    table = format_nodes(results)
    assert "chosen on Split II's validation classes" in table
    assert 'constant predictor (largest unseen class)' in table
    # 4 unseen classes in split I, 3 in split II: a constant predictor's
    # balanced accuracy.
    assert '| 25.00 |' in table and '| 33.33 |' in table
    assert 'k-NN class graph chosen: ' + ('yes' if knn else 'no') in table
    assert 'Diagnosis only, not a result' in table
    assert 'Generalized zero-shot (--gzsl)' in table
    folds = run_nodes(
        nodes,
        splits[:1],
        ['text'],
        seeds=[0],
        selection_seeds=[0],
        base=TINY_NODES,
        grid=[TINY_NODES],
        selection='folds',
        log=lambda line: None,
    )
    assert (
        'class-level cross-validation' in folds['selection']
        and '6 folds' in folds['selection']
    )
    assert 'class-level cross-validation' in format_nodes(folds)
    with pytest.raises(ValueError, match="'selection' must be one of"):
        run_nodes(nodes, splits[:1], ['text'], selection='test')
    fixed = run_nodes(
        nodes,
        splits[:1],
        ['text'],
        seeds=[0],
        base=TINY_NODES,
        select=False,
        gzsl=True,
        log=lambda line: None,
    )
    table = format_nodes(fixed)
    assert 'fixed in advance' in table and 'oracle' not in table
    assert [row['method'] for row in fixed['csds']['text']['rows']] == [
        'APNet (fixed in advance)',
        "ESZSL (DGPN's inputs)",
    ]
    # Without a selection, GZSL still calibrates on Split II's validation
    # task.
    assert fixed['csds']['text']['gzsl'][0]['calibration'] is not None


def test_command_smoke(tiny, tmp_path, capsys):
    root, _ = tiny
    out = tmp_path / 'nodes.json'
    status = main(
        [
            'nodes',
            '--dataset',
            'tiny',
            '--root',
            str(root),
            '--csd',
            'text',
            '--quick',
            '--gzsl',
            '--out',
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert 'QUICK MODE (--quick)' in printed
    assert 'APNet (chosen)' in printed and out.is_file()
    assert "ESZSL (DGPN's inputs)" in printed
    assert 'Generalized zero-shot (--gzsl)' in printed
    status = main(
        [
            'nodes',
            '--dataset',
            'tiny',
            '--root',
            str(root),
            '--csd',
            'text',
            '--split',
            'II',
            '--seeds',
            '1',
            '--selection-seeds',
            '1',
            '--selection',
            'folds',
            '--epochs',
            '1',
            '--episodes',
            '1',
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert 'class-level cross-validation' in printed


@pytest.mark.parametrize(
    'extra, message',
    [
        (
            ['--split', 'I', '--seen', '0', '1', '--unseen', '2', '3'],
            'not both',
        ),
        (['--seeds', '0'], '--seeds must be at least 1'),
        (['--seen', '0', '--unseen', '2', '3'], "'seen' needs at least 2"),
        (['--quick', '--full-grid'], 'give --quick or --full-grid, not both'),
    ],
)
def test_command_bad_input(tiny, capsys, extra, message):
    root, _ = tiny
    status = main(['nodes', '--dataset', 'tiny', '--root', str(root)] + extra)
    assert status == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_command_names_a_missing_dataset(tmp_path, capsys):
    assert main(['nodes', '--dataset', 'cora', '--root', str(tmp_path)]) == 1
    assert 'no dataset folder' in capsys.readouterr().err


def test_docs_page_shows_the_current_command():
    import importlib.util

    path = REPO / 'scripts' / 'zero_shot_nodes_results.py'
    spec = importlib.util.spec_from_file_location('nodes_results', path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    page = (REPO / 'docs' / 'zero-shot-nodes.md').read_text()
    # The split's block, and the folds' where the page has one, each the
    # output of its command as it stands (with generalized zero-shot).
    for selection, (_, begin, end) in script.BLOCKS.items():
        block = script._block(page, selection)
        if selection == 'folds' and not block:
            assert 'nodes-folds-output' not in page
            continue
        assert block.startswith(begin) and block.endswith(end)
        assert f'`{script.command_line(selection)}`' in block
        assert '--gzsl' in script.command_line(selection)
        assert 'Generalized zero-shot (--gzsl)' in block
        assert "test-selected (oracle, as DGPN's public code selects)" in (
            block
        )
        assert block.count('k-NN class graph chosen: ') == 2
    # The page's prose is the script's, as it stands.
    assert page.startswith(script.INTRO + '\n' + script.BEGIN)
    if script._block(page, 'folds'):
        assert script.FOLDS_INTRO + '\n' + script.BLOCKS['folds'][1] in page


def test_docs_script_keeps_only_current_blocks(tiny, tmp_path, monkeypatch):
    # A block of another selection stays on the page while its command is
    # the current one; a stale one (an earlier command) is dropped.
    import apnet_pyg.zsl.cli as cli

    script = _script('zero_shot_nodes_results')
    monkeypatch.setattr(
        cli, 'main', lambda arguments: print('selection log\n\ntable') or 0
    )
    page = tmp_path / 'page.md'
    _, begin, end = script.BLOCKS['folds']
    current = f'{begin}\n`{script.command_line("folds")}` ...\n{end}'
    page.write_text(f'intro\n{current}\n')
    assert script.main(['--out', str(page)]) == 0
    written = page.read_text()
    assert written.startswith(script.INTRO)
    assert current in written and script.FOLDS_INTRO in written
    assert 'table' in written and 'load average' in written
    page.write_text(f'{begin}\n`apnet-zsl nodes --old`\n{end}\n')
    assert script.main(['--out', str(page)]) == 0
    written = page.read_text()
    assert 'nodes --old' not in written and script.FOLDS_INTRO not in written


def _script(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, REPO / 'scripts' / f'{name}.py'
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_dgpn_ablation_terms_sum_to_the_lazy_walk(tiny):
    # The K + 1 terms add up to (beta I + (1 - beta) A_hat)^K X, A_hat the
    # symmetrically normalised adjacency with self-loops (float64, dense).
    script = _script('dgpn_training_ablation')
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
    script = _script('dgpn_training_ablation')
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


def test_dgpn_ablation_page_is_the_script_output():
    page = (REPO / 'docs' / 'zero-shot-nodes-dgpn-ablation.md').read_text()
    assert '`python scripts/dgpn_training_ablation.py --dataset cora' in page
    assert page.count('| I |') == 4 and page.count('| II |') == 4
    assert 'never edited by hand' in page


def test_results_page_quotes_the_measured_tables():
    # experiments/results.md summarises the node tables by hand: every figure
    # it quotes there must be on the generated page (or the ablation's).
    results = (REPO / 'experiments' / 'results.md').read_text()
    section = results.split('## Zero-shot node classification on real data')[
        1
    ].split('\n## ')[0]
    pages = (REPO / 'docs' / 'zero-shot-nodes.md').read_text() + (
        REPO / 'docs' / 'zero-shot-nodes-dgpn-ablation.md'
    ).read_text()
    figures = re.findall(r'\d+\.\d\d', section)
    assert figures
    assert [f for f in figures if f not in pages] == []
