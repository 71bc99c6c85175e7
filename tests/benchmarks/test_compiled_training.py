r"""Eager against compiled training (``python -m benchmarks
compiled_training``): a CPU smoke test through the real command line, and
its refusals."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip('psutil')

from benchmarks.__main__ import main  # noqa: E402


def test_compiled_training_runs_on_the_cpu(tmp_path):
    main(
        [
            'compiled_training',
            '--quick',
            '--episodes',
            '2',
            '--threads',
            '1',
            '--out',
            str(tmp_path),
        ]
    )
    text = (tmp_path / 'compiled_training.md').read_text()
    rows = [
        line.split(' | ')
        for line in text.splitlines()
        if line.startswith('| eager') or line.startswith('| compiled')
    ]
    # Nothing compiles off CUDA, and the report says so, with no ratio.
    assert [row[:2] for row in rows] == [
        ['| eager', 'no'],
        ['| compiled', 'no'],
    ]
    assert all(row[-1].endswith('(simulated) |') for row in rows)
    assert 'Nothing was compiled' in text
    assert 'Compiled against eager' not in text  # no ratio
    assert '--epochs 2 --episodes 2' in text and 'Machine: cpu ' in text


@pytest.mark.parametrize(
    'flag, value, message',
    [
        (
            '--epochs',
            '1',
            '--epochs must be at least 2, the first holding the '
            'compilation (got 1)',
        ),
        ('--episodes', '0', '--episodes must be a positive integer (got 0)'),
    ],
)
def test_compiled_training_refuses_bad_counts(
    flag, value, message, tmp_path, capsys
):
    from apnet_pyg.scripting import run_script

    out = tmp_path / 'out'
    assert (
        run_script(main, ['compiled_training', flag, value, '--out', str(out)])
        == 1
    )
    assert capsys.readouterr().err.strip() == f'error: {message}'
    assert not out.exists()
