r"""The machine a run or a measurement ran on.

Training on the CPU repeats bit for bit only on the same processor model at
the same thread count: the order of floating-point reductions follows the
threads, and the math library picks its kernels by processor. Training
amplifies those last bits (the demo's run on an AMD EPYC selects other
epochs than on an Intel Xeon), so every run records where it ran
(:func:`describe_environment`, in :obj:`metrics.json`), and the benchmarks
describe their machine with the same functions.
"""
import os
import platform
from typing import Dict, Union

import torch
import torch_geometric


def cpu_model() -> str:
    r"""The processor's model name (Linux's :obj:`/proc/cpuinfo`; elsewhere
    what :mod:`platform` knows)."""
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def available_cores() -> int:
    r"""The cores this process may run on."""
    if hasattr(os, 'sched_getaffinity'):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def describe_environment(
        device: Union[str, torch.device] = 'cpu') -> Dict[str, str]:
    r"""What decides whether two runs can agree bit for bit: the processor,
    the cores and torch threads, the GPU (for a CUDA :obj:`device`) and the
    versions of Python, torch and PyG."""
    device = torch.device(device)
    return {
        'cpu': cpu_model(),
        'cores': str(available_cores()),
        'threads': str(torch.get_num_threads()),
        'gpu': torch.cuda.get_device_name(device)
        if device.type == 'cuda' else 'none',
        'python': platform.python_version(),
        'torch': torch.__version__,
        'torch_geometric': torch_geometric.__version__,
    }
