r"""``scripts/device_check.sh``, tested on the CPU: its arguments, its
refusal of a machine without a GPU, and one step run with ``--allow-cpu``
and tiny sizes."""

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / 'scripts' / 'device_check.sh'
USAGE = 'usage: scripts/device_check.sh [--allow-cpu] [--only STEP,...] OUTDIR'

pytestmark = pytest.mark.skipif(
    shutil.which('bash') is None or shutil.which('timeout') is None,
    reason='needs bash and timeout',
)


def run(*args, budget=None, timeout=120, **environment):
    env = dict(os.environ, PYTHON=sys.executable, **environment)
    if budget is not None:
        env['DEVICE_CHECK_BUDGET'] = str(budget)
    return subprocess.run(
        ['bash', str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_the_script_parses():
    assert subprocess.run(['bash', '-n', str(SCRIPT)]).returncode == 0
    assert os.access(SCRIPT, os.X_OK)


@pytest.mark.parametrize(
    'args, message',
    [
        ([], f'error: OUTDIR missing; {USAGE}'),
        (['--bogus', 'out'], f"error: unknown option '--bogus'; {USAGE}"),
        (['a', 'b'], f"error: one OUTDIR only (got 'a' and 'b'); {USAGE}"),
        (['--only'], f'error: --only needs a list of steps; {USAGE}'),
        (
            ['--only', 'propagation,bogus', 'out'],
            "error: --only: unknown step 'bogus' (steps: env cuda-tests "
            'targets awa2-recipe suite propagation train-speed profile '
            'train-compile)',
        ),
    ],
)
def test_bad_arguments_end_with_one_line(args, message, tmp_path):
    result = run(
        *[tmp_path / arg if arg in ('out', 'a', 'b') else arg for arg in args]
    )
    assert result.returncode == 2
    message = message.replace("'a'", f"'{tmp_path / 'a'}'").replace(
        "'b'", f"'{tmp_path / 'b'}'"
    )
    assert result.stderr.splitlines() == [message]
    assert not list(tmp_path.iterdir())  # Nothing written.


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is here')
def test_a_machine_without_a_gpu_is_refused(tmp_path):
    result = run(tmp_path / 'out')
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f'error: torch sees no CUDA device here ({sys.executable}): this '
        f'script checks a GPU machine; --allow-cpu runs it on the CPU with '
        f'tiny sizes'
    ]
    assert not (tmp_path / 'out').exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is here')
def test_the_targets_step_on_the_cpu(tmp_path):
    # Issue 54's targets at their tiniest, the kernels under Triton's
    # interpreter: the benchmark's files come back under the names the
    # script gives them, and env.txt ends with the status of each step.
    out = tmp_path / 'out'
    result = run('--allow-cpu', '--only', 'targets', out, budget=200)
    assert result.returncode == 0, result.stdout + result.stderr
    files = sorted(path.name for path in out.iterdir())
    assert files == ['env.txt', 'results.tar', 'targets.md']
    with tarfile.open(out / 'results.tar') as archive:
        names = set(archive.getnames())
    assert {
        'results/targets.csv',
        'results/targets.md',
        'results/targets.png',
    } <= names
    env = (out / 'env.txt').read_text()
    assert 'device cpu' in env.splitlines()[0]
    assert env.splitlines()[-1].startswith('targets: ok (')
    assert '## steps (' in env
    targets = (out / 'targets.md').read_text()
    assert targets.startswith('# Issue 54 targets: `')
    assert '## Console log' in targets and '--budget' in targets
    # Every variant of the tiny plan ran, the kernel's interpreted.
    assert targets.count('ok      random') == 4
    assert result.stdout.splitlines()[0].startswith('targets: ok (')


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is here')
def test_a_step_past_the_budget_is_recorded_and_fails_the_check(tmp_path):
    out = tmp_path / 'out'
    result = run('--allow-cpu', '--only', 'train-speed', out, budget=1)
    assert result.returncode == 1
    assert (out / 'env.txt').read_text().splitlines()[
        -1
    ] == 'train-speed: NOT RUN (budget spent)'
    assert (
        out / 'train-speed.txt'
    ).read_text().strip() == 'not run: the budget of 1 s was spent'


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is here')
def test_the_recipe_and_the_suite_on_the_cpu(tmp_path):
    # The AWA2 recipe's command (one epoch of two episodes, eager) and its
    # record, then the suite (one small test file) in its shard.
    out = tmp_path / 'out'
    result = run(
        '--allow-cpu',
        '--only',
        'awa2-recipe,suite',
        out,
        budget=300,
        timeout=300,
        DEVICE_CHECK_SUITE='tests/test_console.py',
    )
    assert result.returncode == 0, result.stdout + result.stderr
    files = sorted(path.name for path in out.iterdir())
    assert files == ['awa2-recipe.txt', 'env.txt', 'results.tar', 'suite.txt']
    steps = (out / 'env.txt').read_text().split('## steps (')[1]
    assert [line.split(': ')[0] for line in steps.splitlines()[1:]] == [
        'awa2-recipe',
        'suite',
    ]
    assert all(': ok (' in line for line in steps.splitlines()[1:]), steps
    with tarfile.open(out / 'results.tar') as archive:
        assert {
            'results/awa2_recipe.csv',
            'results/awa2_recipe.md',
        } <= set(archive.getnames())
        recipe = archive.extractfile('results/awa2_recipe.md').read().decode()
        record = archive.extractfile('results/awa2_recipe.csv').read().decode()
    assert 'SIMULATED' in recipe and '- finished in ' in recipe
    assert '(simulated)' in recipe and '- final: 1 of 1 epochs by ' in recipe
    assert record.splitlines()[0].startswith('device,finished,wall_s,')
    assert 'final epoch 1/1' in (out / 'awa2-recipe.txt').read_text()
    suite = (out / 'suite.txt').read_text()
    assert '## shard 0: tests/test_console.py' in suite
    assert 'test_runs_the_command_line PASSED' in suite


def test_an_interrupted_recipe_is_projected_from_its_pace(tmp_path):
    # The recipe's record (the script's inline Python) on a log cut in the
    # selection phase: lines stamped in whole seconds, so the pace is the
    # span's (not one epoch's difference, mostly 0 s at 2 epochs a second).
    text = SCRIPT.read_text()
    begin = text.index("# The recipe's record")
    program = text[begin : text.index('\nEOF\n', begin)]
    log = tmp_path / 'recipe.txt'
    stamps = [10, 10, 11, 11, 12]
    log.write_text(
        ''.join(
            f'{t} selection epoch {e}/100: loss=1.0\n'
            for e, t in enumerate(stamps, 1)
        )
    )
    results = tmp_path / 'results'
    argv = [str(log), str(tmp_path / 'none.json'), str(results), '124']
    argv += ['13', '12', 'cuda', '--device cuda --compile']
    subprocess.run(
        [sys.executable, '-c', program, *argv], check=True, cwd=tmp_path
    )
    record = (results / 'awa2_recipe.md').read_text()
    assert '5 of 100 epochs by 12 s, 0.50 s an epoch after the first' in record
    # 12 s + 95 epochs x 0.5 s; the final run's 100 epochs at that pace.
    assert 'projected whole recipe >= 60 s' in record
    assert 'about 110 s, target <= 600 s' in record
