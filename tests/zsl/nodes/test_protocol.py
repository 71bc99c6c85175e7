import json
from pathlib import Path

import pytest

from apnet_pyg.zsl.cli import main
from apnet_pyg.zsl.nodes.protocol import (
    OTHER_ROWS,
    ensemble_sizes_of,
    quick_grid,
    run_nodes,
)
from apnet_pyg.zsl.nodes.report import format_nodes
from tests.helpers.zero_shot_nodes import TINY_NODES

REPO = Path(__file__).resolve().parents[3]


def test_ensemble_sizes():
    # Ensembles of half the selection's seeds: two at least in the
    # selection, one at least in the evaluation.
    assert ensemble_sizes_of(4, 10) == (1, 2)
    assert ensemble_sizes_of(6, 10) == (1, 3)
    assert ensemble_sizes_of(3, 10) == (1,)
    assert ensemble_sizes_of(4, 1) == (1,)


def is_refined(setting: str) -> bool:
    return 'prototypes refined' in setting or 'clusters named' in setting


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
        refine=True,
        log=lambda line: None,
    )
    block = results['csds']['text']
    rows = block['rows']
    methods = [row['method'] for row in rows]
    assert methods[0] == 'APNet (chosen)'
    # The best with the other choice of the k-NN graph and of smoothing.
    assert len(methods) == 1 + len(OTHER_ROWS) + 4
    assert methods[-4:] == [
        "ESZSL (DGPN's inputs)",
        "SAE (DGPN's inputs)",
        "ESZSL (APNet's inputs)",
        "ESZSL (APNet's inputs), prototypes refined",
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
    refined = is_refined(chosen['setting'])
    assert block['refinement_chosen'] == refined
    assert is_refined(rows[3]['setting']) != refined
    named = 'clusters named' in chosen['setting']
    assert ('clusters named' in rows[4]['setting']) != named
    assert methods[4] == (
        'APNet (best without named clusters)'
        if named
        else 'APNet (best with named clusters)'
    )
    # An ensemble row: over its ensembles of consecutive seeds.
    expected = 2 if 'ensemble of 2 seeds' in chosen['setting'] else 4
    assert chosen['splits']['I']['seeds'] == expected
    # Every setting and reading of the grid, with its validation figure.
    # (10 readings a refinement: none, prototypes, clusters).
    assert len(block['selection']) == 2 * 30
    assert block['oracle']['split'] == 'II'
    assert [row['method'] for row in block['gzsl']] == [
        'APNet (chosen)',
        "ESZSL (DGPN's inputs)",
        "SAE (DGPN's inputs)",
    ]
    # Generalized zero-shot reads APNet's scores unrefined.
    assert not is_refined(block['gzsl'][0]['setting'])
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
    assert (
        'prototype refinement chosen: ' + ('yes' if refined else 'no') in table
    )
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
    # Without refine, no reading is refined and no line or row says so.
    assert 'prototype' not in format_nodes(folds)
    assert 'refinement_chosen' not in folds['csds']['text']
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
    assert 'prototype' not in printed
    status = main(
        ['nodes', '--dataset', 'tiny', '--root', str(root), '--csd', 'text']
        + ['--quick', '--refine']
    )
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert 'prototype refinement chosen: ' in printed
    assert "ESZSL (APNet's inputs), prototypes refined" in printed
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


def test_command_same_results_for_any_workers(tiny, tmp_path, capsys):
    # --workers changes where the seeds train, never what they give: the
    # whole record (choices, rows, GZSL) of one process and of two.
    root, _ = tiny
    records = []
    for workers in ('1', '2'):
        out = tmp_path / f'workers-{workers}.json'
        status = main(
            ['nodes', '--dataset', 'tiny', '--root', str(root)]
            + ['--csd', 'text', '--quick', '--gzsl', '--workers', workers]
            + ['--out', str(out)]
        )
        assert status == 0, capsys.readouterr().out
        records.append(json.loads(out.read_text()))
    assert records[0] == records[1]


@pytest.mark.parametrize(
    'extra, message',
    [
        (
            ['--split', 'I', '--seen', '0', '1', '--unseen', '2', '3'],
            'not both',
        ),
        (['--seeds', '0'], '--seeds must be at least 1'),
        (['--workers', '0'], '--workers must be at least 1'),
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
