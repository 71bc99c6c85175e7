r"""The benchmarks' worker processes on CUDA, tested on the CPU: a worker
that inherited an initialised CUDA refuses to run, the driver then spawns
the CUDA workers, CUDA timing uses events, and a run that measures nothing
exits non-zero with one line saying why."""

import gc
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip('psutil')
pytest.importorskip('matplotlib')

import torch  # noqa: E402

from apnet_pyg.scripting import run_script  # noqa: E402
from benchmarks import common, cuda_fork, train_step, workers  # noqa: E402
from benchmarks.__main__ import main  # noqa: E402
from benchmarks.propagation import grid, worker  # noqa: E402


def measure_spec(**changes):
    spec = {
        'method': 'agnn',
        'graph': vars(grid.random_graph_spec(40, 4)),
        'F': 16,
        'pass': 'forward',
        'device': 'cpu',
        'threads': 1,
        'seed': 0,
        'memory_cap_bytes': 1 << 30,
        'timing': {
            'min_runs': 1,
            'min_time': 0,
            'max_runs': 1,
            'time_cap': 10,
        },
    }
    spec.update(changes)
    return spec


def test_cuda_evidence_reads_torch_and_the_device_files(monkeypatch, tmp_path):
    # Descriptors as /proc/self/fd shows them: links to the files opened.
    for fd, target in [
        ('3', '/dev/nvidiactl'),
        ('4', '/dev/nvidia0'),
        ('5', '/dev/null'),
        ('6', '/dev/nvidia0'),
    ]:
        (tmp_path / fd).symlink_to(target)
    assert cuda_fork.open_device_files(str(tmp_path)) == [
        '/dev/nvidia0',
        '/dev/nvidiactl',
    ]
    assert cuda_fork.open_device_files(str(tmp_path / 'missing')) == []

    monkeypatch.setattr(cuda_fork, 'open_device_files', lambda: [])
    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: False)
    assert cuda_fork.cuda_initialisation_evidence() == []
    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: True)
    assert cuda_fork.cuda_initialisation_evidence() == [
        'torch.cuda.is_initialized()'
    ]
    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: False)
    monkeypatch.setattr(
        torch._C, '_cuda_isInBadFork', lambda: True, raising=False
    )
    assert cuda_fork.cuda_initialisation_evidence() == [
        'torch had initialised CUDA before the fork'
    ]

    # The driver's unified-memory device is open once CUDA is initialised;
    # NVML (torch.cuda.device_count) opens the others alone.
    monkeypatch.setattr(
        torch._C, '_cuda_isInBadFork', lambda: False, raising=False
    )
    monkeypatch.setattr(
        cuda_fork,
        'open_device_files',
        lambda: ['/dev/nvidia0', '/dev/nvidiactl'],
    )
    assert cuda_fork.cuda_initialisation_evidence() == []
    monkeypatch.setattr(
        cuda_fork,
        'open_device_files',
        lambda: ['/dev/nvidia-uvm', '/dev/nvidia0', '/dev/nvidiactl'],
    )
    assert cuda_fork.cuda_initialisation_evidence() == [
        'open device files /dev/nvidia-uvm, /dev/nvidia0, /dev/nvidiactl'
    ]


def run_entry(spec):
    r"""Runs :func:`workers._worker_entry` in this process: what the worker
    sends, and the specs its target was called with."""
    calls = []

    def target(spec):
        calls.append(spec)
        return {'ran': True}

    receiver, sender = multiprocessing.Pipe(duplex=False)
    try:
        workers._worker_entry(target, spec, sender)
    finally:
        gc.unfreeze()  # _worker_entry freezes the worker's objects.
    message = receiver.recv()
    receiver.close()
    return message, calls


def test_a_cuda_worker_refuses_to_run_where_cuda_was_inherited(monkeypatch):
    r"""Fails if a CUDA worker would run its pass in a process that
    inherited an initialised CUDA: the target (which records its calls)
    would be called and its result sent, as every pass was on an H200
    until its first CUDA call failed with 'CUDA error: initialization
    error', which does not say why."""
    monkeypatch.setattr(cuda_fork, 'open_device_files', lambda: [])
    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: True)
    message, calls = run_entry(measure_spec(device='cuda'))
    assert calls == []
    assert message == ('cuda-inherited', 'torch.cuda.is_initialized()')

    # Device files left open by a driver initialised behind torch's back.
    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: False)
    monkeypatch.setattr(
        cuda_fork,
        'open_device_files',
        lambda: ['/dev/nvidia-uvm', '/dev/nvidiactl'],
    )
    message, calls = run_entry(measure_spec(device='cuda:0'))
    assert calls == [] and message == (
        'cuda-inherited',
        'open device files /dev/nvidia-uvm, /dev/nvidiactl',
    )

    # A CPU worker has no CUDA to inherit: it runs.
    monkeypatch.setattr(workers, '_limit_address_space', lambda cap: None)
    message, calls = run_entry(measure_spec())
    assert message == ('ok', {'ran': True}) and len(calls) == 1


@pytest.mark.parametrize(
    'failure',
    [
        {
            'error': 'CUDA was initialised in the process this worker was '
            'forked from (open device files /dev/nvidia-uvm)',
            'cuda_inherited': 'open device files /dev/nvidia-uvm',
        },
        {
            'error': 'torch.AcceleratorError: CUDA error: initialization '
            "error\nSearch for `cudaErrorInitializationError' in "
            'https://docs.nvidia.com'
        },
        {
            'error': 'RuntimeError: Cannot re-initialize CUDA in forked '
            'subprocess. '
            "To use CUDA with multiprocessing, you must use the 'spawn' start "
            'method'
        },
    ],
)
def test_cuda_workers_are_spawned_once_a_forked_one_cannot_use_cuda(
    failure, monkeypatch, capsys
):
    # The forkserver's worker fails as on the H200; the pass runs again in
    # a spawned worker, and so does every CUDA pass after it.
    started = []

    def fake_run_worker(method, target, spec, memory_cap, timeout):
        started.append((spec['device'], method))
        if method == 'served':
            return {'measured': True}
        return dict(failure)

    # The start method stands for the context (a real one would set the
    # global forkserver's preload).
    monkeypatch.setattr(
        workers, '_worker_context', lambda method, preload: method
    )
    monkeypatch.setattr(workers, '_run_worker', fake_run_worker)
    monkeypatch.setattr(
        workers,
        '_run_served',
        lambda context, target, spec, memory_cap, timeout: fake_run_worker(
            'served', target, spec, memory_cap, timeout
        ),
    )
    monkeypatch.setattr(workers, 'CUDA_SPAWN_REASON', None)
    if workers.worker_start_method('cpu') != 'forkserver':
        pytest.skip('no forkserver on this platform')

    cpu = workers.run_isolated(None, {'device': 'cpu'}, 1, 1)
    assert cpu == failure and started == [('cpu', 'forkserver')]
    started.clear()

    assert workers.run_isolated(None, {'device': 'cuda'}, 1, 1) == {
        'measured': True
    }
    assert started == [('cuda', 'forkserver'), ('cuda', 'served')]
    reason = workers.CUDA_SPAWN_REASON
    assert reason.startswith('a worker forked from the forkserver ')
    if 'cuda_inherited' in failure:
        assert reason.endswith(
            'inherited an initialised CUDA (open device files /dev/nvidia-uvm)'
        )
    else:
        assert 'could not initialise CUDA' in reason and '\n' not in reason
    assert capsys.readouterr().out == (
        f'note: {reason}: CUDA passes run in a spawned worker from now on '
        f'(it imports torch and PyG itself, and is started again after a '
        f'failed pass)\n'
    )

    started.clear()
    workers.run_isolated(None, {'device': 'cuda:0'}, 1, 1)
    workers.run_isolated(None, {'device': 'cpu'}, 1, 1)
    assert started == [('cuda:0', 'served'), ('cpu', 'forkserver')]
    assert workers.worker_start_method('cuda') == 'spawn'


def pid_of_worker(spec):
    return {'pid': os.getpid()}


def failing_pass(spec):
    raise RuntimeError('the pass failed')


def test_the_spawned_cuda_worker_serves_passes_until_one_fails():
    # After a fork could not use CUDA, one spawned worker runs the CUDA
    # passes in turn (a fresh interpreter per pass cost seconds each on the
    # H200, more than the passes); a failed pass ends it, and the next pass
    # gets a fresh one. Run here on CPU specs, through the same pipe.
    context = multiprocessing.get_context('spawn')
    spec = {'device': 'cpu', 'memory_cap_bytes': 1 << 36}
    try:
        first = workers._run_served(context, pid_of_worker, spec, 1 << 36, 120)
        second = workers._run_served(
            context, pid_of_worker, spec, 1 << 36, 120
        )
        assert first['pid'] == second['pid'] != os.getpid()
        failed = workers._run_served(context, failing_pass, spec, 1 << 36, 120)
        assert failed == {'error': 'RuntimeError: the pass failed'}
        assert 'process' not in workers._SERVER
        third = workers._run_served(context, pid_of_worker, spec, 1 << 36, 120)
        assert third['pid'] != first['pid']
    finally:
        workers._stop_server()


def test_a_spawned_worker_checks_no_inherited_cuda(monkeypatch):
    # A spawned worker's own imports (PyG 2.8 on the H200) open the CUDA
    # device files: that is not an inherited CUDA, and the pass runs.
    monkeypatch.setattr(
        cuda_fork,
        'open_device_files',
        lambda: ['/dev/nvidia-uvm', '/dev/nvidia0', '/dev/nvidiactl'],
    )
    calls = []
    receiver, sender = multiprocessing.Pipe(duplex=False)
    status = workers._run_target(
        lambda spec: calls.append(spec) or {},
        {'device': 'cuda'},
        sender,
        forked=False,
    )
    assert status == 'ok' and len(calls) == 1
    assert receiver.recv() == ('ok', {})


def test_a_spawned_worker_measures_a_pass():
    # What a CUDA run falls back to, on the CPU: a fresh interpreter that
    # imports the worker's module itself.
    result = workers.run_isolated(
        worker.measure, measure_spec(), 1 << 31, 120, start_method='spawn'
    )
    assert result['status'] == 'ok', result
    assert result['runs'] == 1 and result['min_ms'] > 0


def test_cuda_timing_uses_events_recorded_after_the_queue_drained(monkeypatch):
    log, names = [], iter(['start', 'end'])

    class FakeEvent:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.name = next(names)

        def record(self):
            log.append(('record', self.name))

        def synchronize(self):
            log.append(('synchronize', self.name))

        def elapsed_time(self, end):
            return 250.0  # milliseconds

    monkeypatch.setattr(torch.cuda, 'Event', FakeEvent)
    monkeypatch.setattr(
        torch.cuda,
        'synchronize',
        lambda device=None: log.append(('drain', None)),
    )
    seconds = common._timed(
        lambda: log.append(('call', None)), torch.device('cuda')
    )
    assert seconds == 0.25
    assert log == [
        ('drain', None),
        ('record', 'start'),
        ('call', None),
        ('record', 'end'),
        ('synchronize', 'end'),
    ]


def test_copy_bandwidth_counts_read_and_write():
    # On the CPU only its arithmetic can be checked: positive, finite.
    bandwidth = common.copy_bandwidth(torch.device('cpu'), 1 << 20, 3)
    assert 1e6 < bandwidth < 1e14


def propagation_argv(out, *methods):
    return [
        'propagation',
        '--quick',
        '--out',
        str(out),
        '--nodes',
        '40',
        '--degrees',
        '4',
        '--features',
        '16',
        '--methods',
        *methods,
        '--min-runs',
        '1',
        '--min-time',
        '0',
    ]


def test_a_propagation_run_that_measures_nothing_exits_non_zero(
    tmp_path, monkeypatch, capsys
):
    # As on the H200: every worker fails, with CUDA's multi-line error.
    monkeypatch.setattr(
        workers,
        'run_isolated',
        lambda *args, **kwargs: {
            'error': 'torch.AcceleratorError: CUDA error: initialization error'
            '\nCUDA kernel errors might be asynchronously reported'
        },
    )
    assert run_script(main, propagation_argv(tmp_path, 'agnn')) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f'error: nothing was measured: 2 passes, 1 failed, 1 skipped '
        f'(first failure: agnn on random N=40 F=16 forward: '
        f'torch.AcceleratorError: CUDA error: initialization error); see '
        f'{tmp_path / "README.md"}'
    ]
    summary = (tmp_path / 'README.md').read_text()  # Written all the same.
    assert (
        '| agnn' not in summary and '## Skipped and failed passes' in summary
    )
    assert 'asynchronously' not in summary  # One line per failure.


def test_a_run_with_some_failed_passes_says_so(tmp_path, monkeypatch, capsys):
    run_isolated = workers.run_isolated

    def failing_gat(target, spec, *args, **kwargs):
        if spec['method'] == 'gat':
            return {'error': 'RuntimeError: boom'}
        return run_isolated(target, spec, *args, **kwargs)

    monkeypatch.setattr(workers, 'run_isolated', failing_gat)
    assert run_script(main, propagation_argv(tmp_path, 'agnn', 'gat')) == 0
    err = capsys.readouterr().err.strip()
    assert err == (
        f'warning: 1 of 4 passes failed (first: gat on random: '
        f'RuntimeError: boom); see {tmp_path / "README.md"}'
    )


def test_a_train_step_run_that_measures_nothing_exits_non_zero(
    tmp_path, monkeypatch, capsys
):
    def failing_step(*args, **kwargs):
        # torch.AcceleratorError, CUDA's error, is a RuntimeError.
        raise RuntimeError(
            'CUDA error: initialization error\n'
            'Search for cudaErrorInitializationError'
        )

    monkeypatch.setattr(train_step, '_step', failing_step)
    argv = [
        'train_step',
        '--quick',
        '--out',
        str(tmp_path),
        '--steps',
        '1',
        '--warmup',
        '0',
        '--threads',
        '1',
    ]
    assert run_script(main, argv) == 1
    assert capsys.readouterr().err.splitlines() == [
        'error: nothing was measured: an episode failed (CUDA error: '
        'initialization error)'
    ]
    assert not (tmp_path / 'train_step.csv').exists()


def test_cuda_fork_diagnosis_reports_after_each_import(capsys):
    # In a fresh interpreter, as it is meant to run (this one may have
    # initialised CUDA in an earlier test).
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.cuda_fork', 'json', 'torch'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    status, lines = result.returncode, result.stdout.splitlines()
    assert lines[0] == 'after import json: CUDA untouched', result.stderr
    assert lines[1].startswith('after import torch: ')
    if status == 0:
        assert lines[2] == 'a process forked after these imports used CUDA'
    else:  # No GPU here: the child's error, on one line.
        assert status == 1 and lines[2].startswith(
            'a process forked after these imports could not use CUDA ('
        )
    assert len(lines) == 3

    assert cuda_fork.main(['--help']) == 2
    assert capsys.readouterr().err == (
        'usage: python -m benchmarks.cuda_fork [MODULE ...]  (default: '
        'torch torch_geometric apnet_pyg.nn benchmarks.propagation.worker)\n'
    )
