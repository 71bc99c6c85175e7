r"""Whether a process forked from this one can use CUDA, and
``python -m benchmarks.cuda_fork``, which finds the import that breaks it.

A process forked after the CUDA driver was initialised cannot use CUDA:
torch raises ``Cannot re-initialize CUDA in forked subprocess`` where torch
initialised it, and the first CUDA call fails with ``CUDA error:
initialization error`` where something else did, unseen by torch. The
benchmarks fork their workers from a server that has imported
:data:`PROPAGATION_PRELOAD` (see :func:`benchmarks.workers.run_isolated`).

``python -m benchmarks.cuda_fork [MODULE ...]`` imports the modules (by
default :data:`PROPAGATION_PRELOAD`) one after the other in a fresh
interpreter, as that server does, prints after each import the signs of an
initialised CUDA (:func:`cuda_initialisation_evidence`), then forks a child
that puts a tensor on the GPU. It exits 0 where the child could use CUDA,
1 where it could not. It imports nothing heavy itself: the first import
that leaves signs is the one that breaks forked workers.
"""

import importlib
import os
import os.path as osp
import sys
from typing import List, Optional, Sequence

#: The modules the propagation suite's forkserver imports before it forks
#: a worker.
PROPAGATION_PRELOAD = (
    'torch',
    'torch_geometric',
    'apnet_pyg.nn',
    'benchmarks.propagation.worker',
)


def open_device_files(fd_dir: str = '/proc/self/fd') -> List[str]:
    r"""The NVIDIA device files this process holds open: the driver opens
    them when CUDA (or NVML) is initialised, and a forked child inherits
    them."""
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return []
    files = set()
    for name in names:
        try:
            target = os.readlink(osp.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith('/dev/nvidia'):
            files.add(target)
    return sorted(files)


def cuda_initialisation_evidence() -> List[str]:
    r"""Signs that CUDA was initialised in this process or in the process
    it was forked from (empty where there are none): torch's own record,
    torch's mark of a fork after its initialisation (where torch is
    imported), and an open unified-memory device file ``/dev/nvidia-uvm``,
    which the CUDA driver opens when it is initialised, by torch or not.
    NVML, which only queries the devices (:func:`torch.cuda.device_count`
    uses it), opens ``/dev/nvidiactl`` and ``/dev/nvidiaN`` alone: those
    are no sign, a forked child can still use CUDA."""
    evidence = []
    torch = sys.modules.get('torch')
    if torch is not None:
        if torch.cuda.is_initialized():
            evidence.append('torch.cuda.is_initialized()')
        if getattr(torch._C, '_cuda_isInBadFork', lambda: False)():
            evidence.append('torch had initialised CUDA before the fork')
    files = open_device_files()
    if any(name.startswith('/dev/nvidia-uvm') for name in files):
        evidence.append('open device files ' + ', '.join(files))
    return evidence


def _forked_child_uses_cuda() -> Optional[str]:
    r"""Forks a child that puts a tensor on the GPU: :obj:`None` where it
    could, else its error's first line."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # The child: report, and leave without cleanup.
        os.close(read)
        try:
            import torch

            torch.ones(1, device='cuda').sum().item()
            message = ''
        except BaseException as error:
            lines = str(error).strip().splitlines()
            message = f'{type(error).__name__}: {lines[0] if lines else ""}'
        os.write(write, message.encode()[:4000] or b'-')
        os._exit(0)
    os.close(write)
    with os.fdopen(read, 'rb') as pipe:
        message = pipe.read().decode()
    os.waitpid(pid, 0)
    if message == '-':
        return None
    return message or 'the child died before it reported'


def diagnose(modules: Sequence[str]) -> int:
    r"""Imports :obj:`modules` in turn, printing the signs of an initialised
    CUDA after each, then whether a forked child can use CUDA; returns the
    exit status (0: it can)."""
    first = None
    for module in modules:
        importlib.import_module(module)
        evidence = cuda_initialisation_evidence()
        if evidence and first is None:
            first = module
        files = open_device_files()
        if files and not evidence:  # NVML's: not a sign, but worth seeing.
            evidence = [
                'CUDA untouched; open device files ' + ', '.join(files)
            ]
        print(
            f'after import {module}: '
            f'{"; ".join(evidence) if evidence else "CUDA untouched"}',
            flush=True,
        )
    error = _forked_child_uses_cuda()
    if error is None:
        print('a process forked after these imports used CUDA')
        return 0
    print(
        f'a process forked after these imports could not use CUDA '
        f'({error})'
        + (
            f'; the first import that left CUDA initialised: {first}'
            if first
            else ''
        )
    )
    return 1


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(arg.startswith('-') for arg in argv):
        print(
            'usage: python -m benchmarks.cuda_fork [MODULE ...]  (default: '
            + ' '.join(PROPAGATION_PRELOAD)
            + ')',
            file=sys.stderr,
        )
        return 2
    return diagnose(argv or PROPAGATION_PRELOAD)


if __name__ == '__main__':
    sys.exit(main())
