r"""The machine a run or a measurement ran on.

Training on the CPU repeats bit for bit only on the same processor model at
the same thread count: the order of floating-point reductions follows the
threads, and the math library picks its kernels by processor. Training
amplifies those last bits (the demo's run on an AMD EPYC selects other
epochs than on an Intel Xeon), so every run records where it ran
(:func:`describe_environment`, in :obj:`metrics.json`), and the benchmarks
describe their machine with the same functions. A virtual machine may show
one model name for different processors ("AMD EPYC" for several
generations), so the record also holds the processor's family, model and
stepping (:func:`cpu_id`) and the instruction set torch dispatches its
kernels to, which differ where the name does not.
"""

import os
import platform
from typing import Dict, Union

import numpy as np
import torch
import torch_geometric


def _first_processor() -> Dict[str, str]:
    r"""The fields of the first processor in Linux's :obj:`/proc/cpuinfo`
    (empty where there is none)."""
    fields = {}
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if not line.strip():  # The first processor is enough.
                    break
                key, _, value = line.partition(':')
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_model() -> str:
    r"""The processor's model name (Linux's :obj:`/proc/cpuinfo`; elsewhere
    what :mod:`platform` knows)."""
    return (
        _first_processor().get('model name')
        or platform.processor()
        or platform.machine()
    )


def cpu_id() -> str:
    r"""The processor's family, model and stepping (Linux's
    :obj:`/proc/cpuinfo`), e.g. :obj:`"family 26 model 2 stepping 1"`; an
    empty string where they are unknown."""
    fields = _first_processor()
    return ' '.join(
        f'{key.split()[-1]} {fields[key]}'
        for key in ('cpu family', 'model', 'stepping')
        if key in fields
    )


def cpu_capability() -> str:
    r"""The instruction set torch's CPU kernels dispatch to (e.g.
    :obj:`"AVX2"`, :obj:`"AVX512"`); an empty string on a torch that does
    not say."""
    capability = getattr(torch.backends.cpu, 'get_cpu_capability', None)
    return capability() if capability is not None else ''


def available_cores() -> int:
    r"""The cores this process may run on."""
    if hasattr(os, 'sched_getaffinity'):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def describe_environment(
    device: Union[str, torch.device] = 'cpu',
) -> Dict[str, str]:
    r"""What decides whether two runs can agree bit for bit: the processor
    (its name, :func:`cpu_id` and :func:`cpu_capability`), the cores and
    torch threads, the GPU (for a CUDA :obj:`device`) and the versions of
    Python, torch, PyG and NumPy (which draws the simulator's features)."""
    device = torch.device(device)
    return {
        'cpu': cpu_model(),
        'cpu_id': cpu_id(),
        'cpu_capability': cpu_capability(),
        'cores': str(available_cores()),
        'threads': str(torch.get_num_threads()),
        'gpu': torch.cuda.get_device_name(device)
        if device.type == 'cuda'
        else 'none',
        'python': platform.python_version(),
        'torch': torch.__version__,
        'torch_geometric': torch_geometric.__version__,
        'numpy': np.__version__,
    }
