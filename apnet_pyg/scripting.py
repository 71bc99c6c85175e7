r"""What every command-line entry point of the package shares: an error
prints one line, not a traceback, unless :obj:`--debug` is given; runs
side by side in worker processes (:func:`map_in_workers`)."""

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterator, List, Optional, Sequence

import torch


def error_line(error: Exception) -> str:
    r"""The one line an error prints on the command line: its message on
    one line; for an error of an unexpected type, also its type and how to
    see the traceback."""
    message = ' '.join(str(error).split()) or type(error).__name__
    if not isinstance(error, (ValueError, OSError, RuntimeError)):
        message = (
            f'{type(error).__name__}: {message} (--debug shows the traceback)'
        )
    return f'error: {message}'


def run_script(
    main: Callable[[List[str]], Any], argv: Optional[List[str]] = None
) -> int:
    r"""Runs the :obj:`main(argv)` of an example or benchmark script as
    :obj:`apnet-zsl` runs its commands, and returns the exit status: an
    error prints one line (:func:`error_line`) and gives 1, unless
    :obj:`--debug` is among the arguments (it is removed before
    :obj:`main` sees them), which shows the traceback. Usage errors
    (:class:`SystemExit`) pass through."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = '--debug' in argv
    try:
        main([arg for arg in argv if arg != '--debug'])
    except KeyboardInterrupt:
        print('interrupted', file=sys.stderr)
        return 130
    except Exception as error:
        if debug:
            raise
        print(error_line(error), file=sys.stderr)
        return 1
    return 0


#: What :func:`map_in_workers` gave a worker process when it started.
_WORKER_STATE: Any = None


def _start_worker(state: Any, threads: int) -> None:
    global _WORKER_STATE
    _WORKER_STATE = state
    torch.set_num_threads(threads)


def _call_in_worker(function: Callable[[Any, Any], Any], job: Any) -> Any:
    return function(_WORKER_STATE, job)


def map_in_workers(
    function: Callable[[Any, Any], Any],
    jobs: Sequence[Any],
    state: Any,
    workers: int = 1,
    threads: int = 1,
) -> Iterator[Any]:
    r""":obj:`function(state, job)` for every job of :obj:`jobs`, in their
    order: in this process, or with :obj:`workers > 1` in that many worker
    processes of :obj:`threads` torch threads each (so that they share the
    cores rather than oversubscribe them). A worker gets :obj:`state` once,
    when it starts: inherited where the platform forks (closures too),
    pickled once where it spawns; :obj:`function` and every job and
    result are pickled. A run seeded on its own gives the same result
    wherever it runs."""
    if workers < 1:
        raise ValueError(f"'workers' must be at least 1 (got {workers})")
    if workers == 1 or len(jobs) < 2:
        yield from (function(state, job) for job in jobs)
        return
    forks = 'fork' in multiprocessing.get_all_start_methods()
    with ProcessPoolExecutor(
        min(workers, len(jobs)),
        mp_context=multiprocessing.get_context('fork' if forks else 'spawn'),
        initializer=_start_worker,
        initargs=(state, threads),
    ) as pool:
        yield from pool.map(_call_in_worker, [function] * len(jobs), jobs)
