r"""Bad flags of examples/planetoid.py, examples/calibrate_simulator.py and
examples/drop_in.py end with one line naming the flag, before any work is
done."""

import os
import os.path as osp
import subprocess
import sys

import pytest

import apnet_pyg
from apnet_pyg.scripting import run_script
from tests.helpers.examples import EXAMPLES, load_example, tiny_planetoid


@pytest.mark.parametrize(
    'argv, message',
    [
        (
            ['--seeds', '0', '--layers', 'GATConv'],
            '--seeds must be a positive integer (got 0)',
        ),
        (['--epochs', '0'], '--epochs must be a positive integer (got 0)'),
        (['--layers', 'GATConv', 'GATConv'], '--layers names a layer twice'),
        (
            ['--search', '--seeds', '3'],
            '--seeds goes with the table, not --search',
        ),
        (
            ['--search', '--layers', 'APNetConv'],
            '--layers goes with the table',
        ),
    ],
)
def test_planetoid_refuses_bad_flags(argv, message, tmp_path, capsys):
    planetoid = load_example('planetoid')
    # A --raw without Cora: the flags are checked before it is read.
    assert run_script(planetoid.main, argv + ['--raw', str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f'error: {message}')
    assert len(err.splitlines()) == 1
    out = tmp_path / 'table.md'
    out.mkdir()
    assert run_script(planetoid.main, ['--out', str(out)]) == 1
    assert f"--out '{out}' is a directory" in capsys.readouterr().err


@pytest.mark.parametrize('script', ['planetoid.py', 'drop_in.py'])
def test_example_script_prints_no_traceback(script):
    # As a script, through run_script: one line, exit status 1. The package
    # is importable as here, installed or (on a device machine) on the path.
    package_parent = osp.dirname(osp.dirname(apnet_pyg.__file__))
    result = subprocess.run(
        [sys.executable, osp.join(EXAMPLES, script), '--epochs', '0'],
        capture_output=True,
        text=True,
        env={**os.environ, 'PYTHONPATH': package_parent},
    )
    assert result.returncode == 1
    assert (
        result.stderr == 'error: --epochs must be a positive integer (got 0)\n'
    )


def test_planetoid_writes_the_table_atomically(tmp_path, monkeypatch):
    planetoid = load_example('planetoid')
    monkeypatch.setattr(planetoid, 'load_cora', lambda raw: tiny_planetoid())
    replaced = []
    replace = os.replace
    monkeypatch.setattr(
        os,
        'replace',
        lambda source, target: (
            replaced.append(target),
            replace(source, target),
        ),
    )
    out = tmp_path / 'new' / 'table.md'  # The folder is created.
    planetoid.main(
        [
            '--seeds',
            '1',
            '--epochs',
            '2',
            '--layers',
            'AGNNConv',
            '--out',
            str(out),
        ]
    )
    assert out.read_text().startswith('| layer | test accuracy')
    assert replaced == [out]


@pytest.mark.parametrize(
    'flags, message',
    [
        (['--search-log', 'log.jsonl'], '--search-log goes with --search'),
        (['--search-seed', '3'], '--search-seed goes with --search'),
        (['--recheck-seeds', '0'], '--recheck-seeds goes with --summarize'),
        (['--recheck-top', '2'], '--recheck-top goes with --summarize'),
    ],
)
def test_calibration_refuses_flags_of_another_mode(
    flags, message, tiny_root, tmp_path
):
    calibrate = load_example('calibrate_simulator')
    common = [
        '--datasets',
        'TINY',
        '--data-root',
        str(tiny_root),
        '--seeds',
        '0',
    ]
    # Without --search / --summarize they would do nothing: the plain
    # calibration would run.
    with pytest.raises(SystemExit, match=f'^error: {message}$'):
        calibrate.main(common + flags)
    # Nor does the other mode use them:
    other = (
        ['--summarize', str(tmp_path / 'missing.jsonl')]
        if 'search' in message
        else ['--search', '1', '--search-log', str(tmp_path / 'new.jsonl')]
    )
    with pytest.raises(SystemExit, match=f'^error: {message}$'):
        calibrate.main(common + other + flags)


def test_calibration_refuses_recheck_top_without_recheck_seeds(tmp_path):
    calibrate = load_example('calibrate_simulator')
    with pytest.raises(
        SystemExit, match='--recheck-top goes with --recheck-seeds'
    ):
        calibrate.main(
            [
                '--datasets',
                'AWA2',
                '--seeds',
                '0',
                '--summarize',
                str(tmp_path / 'missing.jsonl'),
                '--recheck-top',
                '2',
            ]
        )
    out = tmp_path / 'out.md'
    out.mkdir()
    with pytest.raises(SystemExit, match='is a directory'):
        calibrate.main(['--datasets', 'AWA2', '--out', str(out)])
