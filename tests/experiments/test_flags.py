r"""Bad flags of experiments/node_classification.py,
experiments/calibrate_simulator.py and examples/drop_in.py end with one line
naming the flag, before any work is done."""

import os
import os.path as osp
import subprocess
import sys

import pytest

import apnet_pyg
from tests.helpers.scripts import load_script, script_path


@pytest.mark.parametrize('script', ['node_classification', 'drop_in'])
def test_example_script_prints_no_traceback(script):
    # As a script, through run_script: one line, exit status 1. The package
    # is importable as here, installed or (on a device machine) on the path.
    package_parent = osp.dirname(osp.dirname(apnet_pyg.__file__))
    result = subprocess.run(
        [sys.executable, script_path(script), '--epochs', '0'],
        capture_output=True,
        text=True,
        env={**os.environ, 'PYTHONPATH': package_parent},
    )
    assert result.returncode == 1
    assert (
        result.stderr == 'error: --epochs must be a positive integer (got 0)\n'
    )


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
    calibrate = load_script('calibrate_simulator')
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
    calibrate = load_script('calibrate_simulator')
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
