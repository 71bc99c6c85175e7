r"""The training profile (``python -m benchmarks profile``): its counts from
the profiler's events, and a CPU smoke test through the real training
loop."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip('psutil')

from benchmarks import profile_training  # noqa: E402
from benchmarks.__main__ import main  # noqa: E402


def event(count, device_us=0.0, cpu_us=0.0, on_device=False):
    return {
        'count': count,
        'device_us': device_us,
        'cpu_us': cpu_us,
        'on_device': on_device,
    }


def test_counts_per_episode_from_the_profilers_event_names():
    # As Kineto names them: runtime calls on the host, kernels and copies
    # on the device. The short run's one-time work (a pageable copy of the
    # features, its launches) cancels out.
    short = {
        'cudaLaunchKernel': event(30),
        'cudaStreamSynchronize': event(2),
        'Memcpy HtoD (Pageable -> Device)': event(3, 900.0, on_device=True),
        'Memcpy DtoH (Device -> Pageable)': event(2, 4.0, on_device=True),
        'void gemv_kernel<float>': event(10, 50.0, on_device=True),
        'aten::mm': event(10, cpu_us=100.0),
    }
    long = {
        'cudaLaunchKernel': event(230),
        'cudaLaunchKernelExC': event(20),
        'cudaStreamSynchronize': event(12),
        'cudaMemcpyAsync': event(20),
        'Memcpy HtoD (Pageable -> Device)': event(13, 920.0, on_device=True),
        'Memcpy HtoD (Pinned -> Device)': event(5, 5.0, on_device=True),
        'Memcpy DtoH (Device -> Pageable)': event(12, 24.0, on_device=True),
        'void gemv_kernel<float>': event(110, 550.0, on_device=True),
        'sm90_xmma_gemm': event(100, 1000.0, on_device=True),
        'Memset (Device)': event(10, 10.0, on_device=True),
        'aten::mm': event(110, cpu_us=1100.0),
    }
    events = profile_training.per_episode(long, short, episodes=10)
    figures = profile_training.counts(events)
    assert figures == {
        'launches': 22.0,
        'kernels': 20.0,
        'syncs': 1.0,
        'd2h': 1.0,
        'h2d_pageable': 1.0,
        'h2d': 1.5,
        'device_us': (20 + 5 + 20 + 500 + 1000 + 10) / 10,
    }
    top = profile_training.top_events(events, on_device=True, top=2)
    assert [entry['name'] for entry in top] == [
        'sm90_xmma_gemm',
        'void gemv_kernel<float>',
    ]
    assert top[0]['count'] == 10.0 and top[0]['device_us'] == 100.0
    assert [
        entry['name']
        for entry in profile_training.top_events(
            events, on_device=False, top=5
        )
    ] == ['aten::mm']


def test_profile_runs_on_the_cpu(tmp_path):
    main(
        [
            'profile',
            '--out',
            str(tmp_path),
            '--episodes',
            '2',
            '--skip',
            '1',
            '--threads',
            '1',
            '--top',
            '5',
        ]
    )
    text = (tmp_path / 'profile.md').read_text()
    assert (
        '| kernel launches (cudaLaunchKernel and kin) | not applicable '
        '(CPU) |' in text
    )
    assert (
        'a profiled run of 3 episodes minus those of one of 1, over 2' in text
    )
    top = text.split('## Top 5 operators by self CPU time, per episode')[1]
    rows = [line for line in top.splitlines() if line.startswith('| aten::')]
    assert rows, top  # The training's matrix products, at least.
    assert 'Machine: cpu ' in text


@pytest.mark.parametrize('flag', ['--episodes', '--skip', '--top'])
def test_profile_refuses_a_count_below_one(flag, tmp_path, capsys):
    from apnet_pyg.scripting import run_script

    out = tmp_path / 'out'
    assert run_script(main, ['profile', flag, '0', '--out', str(out)]) == 1
    assert capsys.readouterr().err.strip() == (
        f'error: {flag} must be a positive integer (got 0)'
    )
    assert not out.exists()
