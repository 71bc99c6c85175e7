r"""The benchmarks' isolated worker processes: each pass runs in a fresh
process (forked from a forkserver, or spawned), watched for its memory and
time, and reports its result or one line of error."""

import contextlib
import gc
import multiprocessing
import resource
import sys
import time
import traceback
import types
from typing import Callable, Dict, Optional, Sequence

import psutil
import torch

from benchmarks.common import GB, log, proc_status_kb
from benchmarks.cuda_fork import cuda_initialisation_evidence

# Workers are forked from a forkserver: a server process started by exec (a
# fresh interpreter, whatever this process did) that imports torch, PyG and
# the suite's worker module once, so that a worker starts in milliseconds.
#
# A process forked after CUDA was initialised cannot use CUDA. On an H200
# every CUDA worker failed with 'CUDA error: initialization error'
# (cudaErrorInitializationError), the error of a process forked after the
# CUDA driver was initialised by something other than torch (torch marks a
# fork after its own initialisation, and raises 'Cannot re-initialize CUDA
# in forked subprocess' instead). The server is a fresh interpreter, so
# its preloaded imports did it: torch, PyG with the optional packages
# installed there (there PyG imports numba and transformers, torch imports
# Triton), apnet_pyg.nn or the worker module. None of them calls CUDA at
# import on a CPU-only build, so which one needs a GPU: ``python -m
# benchmarks.cuda_fork`` names it.
#
# So a CUDA worker first checks that it inherited no initialised CUDA
# (cuda_initialisation_evidence) and refuses to run otherwise; the
# driver then runs the CUDA passes in a spawned worker for the rest of the
# run, as it does when a forked worker fails to initialise CUDA for any
# other reason. (On the H200, importing PyG 2.8 opened the driver: every
# forked worker refused.) A fresh interpreter imports torch and PyG in
# seconds, more than most passes take, so one spawned worker runs the
# passes one after another (_serve); on CUDA the passes' peaks are reset
# at entry, which the CPU's resident-set peak cannot be.
_CONTEXTS: Dict[str, multiprocessing.context.BaseContext] = {}
#: Why CUDA workers are spawned instead of forked, once a forked one could
#: not use CUDA (None while forking works).
CUDA_SPAWN_REASON: Optional[str] = None

# The errors of a forked process that cannot initialise CUDA.
_CUDA_FORK_ERRORS = (
    'initialization error',
    'Cannot re-initialize CUDA in forked subprocess',
)


def worker_start_method(device: str) -> str:
    r"""How the workers of :obj:`device` start: ``'forkserver'``, or
    ``'spawn'`` where there is no forkserver or, for CUDA, once a forked
    worker could not use CUDA (:data:`CUDA_SPAWN_REASON`)."""
    if torch.device(device).type == 'cuda' and CUDA_SPAWN_REASON is not None:
        return 'spawn'
    if 'forkserver' in multiprocessing.get_all_start_methods():
        return 'forkserver'
    return 'spawn'


def _worker_context(method: str, preload: Sequence[str]):
    if method not in _CONTEXTS:
        context = multiprocessing.get_context(method)
        if method == 'forkserver':
            # Imported once by the server; every worker forks from it.
            context.set_forkserver_preload(list(preload))
        _CONTEXTS[method] = context
    return _CONTEXTS[method]


@contextlib.contextmanager
def _main_module_hidden():
    # A forkserver/spawn worker re-runs the caller's main script unless it
    # was started with -m; the worker needs nothing from it, and a script
    # without an `if __name__ == '__main__'` guard would recurse.
    main = sys.modules['__main__']
    sys.modules['__main__'] = types.ModuleType('__main__')
    try:
        yield
    finally:
        sys.modules['__main__'] = main


def _limit_address_space(memory_cap: float) -> None:
    # A CPU worker that allocates past the cap gets a clean allocation error
    # instead of waking the kernel's OOM killer between two watchdog polls.
    try:
        vm_size = (proc_status_kb('VmSize') or 0) * 1024
        limit = int(vm_size + memory_cap + GB)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass


def _run_target(
    target: Callable[[dict], dict], spec: dict, connection, forked: bool
) -> str:
    # Runs one pass and sends its result; returns the status sent.
    try:
        if torch.device(spec['device']).type == 'cpu':
            _limit_address_space(spec['memory_cap_bytes'])
        elif forked:
            # Before anything touches CUDA: a CUDA inherited initialised
            # fails at first use, with an error that does not say why. (A
            # spawned worker initialised nothing it inherited: the device
            # files its own imports open are its own.)
            evidence = cuda_initialisation_evidence()
            if evidence:
                connection.send(('cuda-inherited', '; '.join(evidence)))
                return 'cuda-inherited'
        connection.send(('ok', target(spec)))
        return 'ok'
    except BaseException as error:  # Reported to the parent, not raised.
        connection.send(
            (
                'error',
                ''.join(
                    traceback.format_exception_only(type(error), error)
                ).strip(),
            )
        )
        return 'error'


def _worker_entry(
    target: Callable[[dict], dict], spec: dict, connection, forked: bool = True
) -> None:
    # The imported modules' objects will never be garbage: keep them out
    # of the collections PeakMemory runs (a full one takes 0.25 s).
    gc.freeze()
    try:
        _run_target(target, spec, connection, forked)
    finally:
        connection.close()


def _serve(connection) -> None:
    # A spawned CUDA worker that runs passes one after another, until the
    # driver closes the pipe or a pass fails (a CUDA error can leave the
    # context unusable): a fresh interpreter costs seconds (torch and PyG
    # imported again), more than most passes. The passes' peaks stay apart:
    # PeakMemory empties the cache and resets the peak at entry.
    gc.freeze()
    try:
        while True:
            try:
                target, spec = connection.recv()
            except EOFError:
                return
            if _run_target(target, spec, connection, forked=False) != 'ok':
                return
    finally:
        connection.close()


#: The persistent spawned CUDA worker (process, pipe), started on first use.
_SERVER: Dict[str, object] = {}


def _start_process(context, entry: Callable, args: tuple):
    process = context.Process(target=entry, args=args, daemon=True)
    with _main_module_hidden():
        process.start()
    return process


def _await_result(
    process, receiver, memory_cap: float, timeout: float
) -> dict:
    # The worker's result, or {'error': why}: it passed the memory cap or
    # the timeout (then it is killed), died, or its pass raised.
    watched = psutil.Process(process.pid)
    start = time.perf_counter()
    error = None
    while not receiver.poll(0.05):
        if not process.is_alive():
            break
        try:
            rss = watched.memory_info().rss
        except psutil.NoSuchProcess:
            break
        if rss > memory_cap:
            error = (
                f'memory: RSS passed the {memory_cap / GB:.3g} GB '
                f'cap at run time'
            )
            break
        if time.perf_counter() - start > timeout:
            error = f'timeout: worker ran past {timeout:.0f} s'
            break
    if error is None:
        try:
            status, payload = receiver.recv()
        except EOFError:
            process.join(5)
            error = f'worker died (exit code {process.exitcode})'
        else:
            if status == 'ok':
                return payload
            if status == 'cuda-inherited':
                return {
                    'error': f'CUDA was initialised in the process '
                    f'this worker was forked from ({payload})',
                    'cuda_inherited': payload,
                }
            error = payload
    if process.is_alive():
        process.kill()
    return {'error': error}


def _run_worker(
    context,
    target: Callable[[dict], dict],
    spec: dict,
    memory_cap: float,
    timeout: float,
) -> dict:
    receiver, sender = context.Pipe(duplex=False)
    forked = context.get_start_method() != 'spawn'
    process = _start_process(
        context, _worker_entry, (target, spec, sender, forked)
    )
    sender.close()
    try:
        return _await_result(process, receiver, memory_cap, timeout)
    finally:
        process.join(30)
        receiver.close()


def _run_served(
    context,
    target: Callable[[dict], dict],
    spec: dict,
    memory_cap: float,
    timeout: float,
) -> dict:
    # On the persistent worker (_serve), started again after a failure.
    if 'process' in _SERVER and not _SERVER['process'].is_alive():
        _stop_server()
    if 'process' not in _SERVER:
        connection, child = context.Pipe(duplex=True)
        _SERVER['process'] = _start_process(context, _serve, (child,))
        _SERVER['connection'] = connection
        child.close()
    process, connection = _SERVER['process'], _SERVER['connection']
    connection.send((target, spec))
    result = _await_result(process, connection, memory_cap, timeout)
    if 'error' in result:
        _stop_server()
    return result


def _stop_server() -> None:
    process = _SERVER.pop('process', None)
    connection = _SERVER.pop('connection', None)
    if connection is not None:
        connection.close()  # The worker's recv() ends: it returns.
    if process is not None:
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join(10)


def _cuda_fork_problem(result: dict) -> Optional[str]:
    r"""Why a forked CUDA worker could not use CUDA, from its result, or
    :obj:`None` where it could."""
    if 'cuda_inherited' in result:
        return (
            f'a worker forked from the forkserver inherited an '
            f'initialised CUDA ({result["cuda_inherited"]})'
        )
    error = result.get('error') or ''
    if any(text in error for text in _CUDA_FORK_ERRORS):
        return (
            f'a worker forked from the forkserver could not initialise '
            f'CUDA ({error.splitlines()[0]})'
        )
    return None


def run_isolated(
    target: Callable[[dict], dict],
    spec: dict,
    memory_cap: float,
    timeout: float,
    preload: Sequence[str] = (),
    start_method: Optional[str] = None,
) -> dict:
    r"""Runs :obj:`target(spec)` in a fresh process and returns its result.

    The worker is killed if its resident memory passes :obj:`memory_cap`
    bytes or it runs longer than :obj:`timeout` seconds; the result is then
    :obj:`{'error': reason}`, as it is if :obj:`target` raises. The worker
    starts as :func:`worker_start_method` says for :obj:`spec['device']`
    (or as :obj:`start_method` says); a forked CUDA worker that cannot use
    CUDA is run again, spawned, and so are the CUDA passes after it
    (:data:`CUDA_SPAWN_REASON`, logged once), one after another in one
    spawned worker (:func:`_serve`), started again after a failed pass.
    """
    global CUDA_SPAWN_REASON
    cuda = torch.device(spec['device']).type == 'cuda'
    method = start_method or worker_start_method(spec['device'])
    if cuda and method == 'spawn' and start_method is None:
        return _run_served(
            _worker_context('spawn', preload),
            target,
            spec,
            memory_cap,
            timeout,
        )
    result = _run_worker(
        _worker_context(method, preload), target, spec, memory_cap, timeout
    )
    if cuda and method != 'spawn':
        problem = _cuda_fork_problem(result)
        if problem is not None and start_method is None:
            CUDA_SPAWN_REASON = problem
            log(
                f'note: {problem}: CUDA passes run in a spawned worker from '
                f'now on (it imports torch and PyG itself, and is started '
                f'again after a failed pass)'
            )
            return _run_served(
                _worker_context('spawn', preload),
                target,
                spec,
                memory_cap,
                timeout,
            )
        if problem is not None:
            result = _run_worker(
                _worker_context('spawn', preload),
                target,
                spec,
                memory_cap,
                timeout,
            )
    return result
