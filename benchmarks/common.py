r"""What every benchmark suite needs: a description of the machine, timing
and peak-memory measurement inside a worker process, isolated worker
processes with a memory watchdog, and CSV / markdown output.

A suite runs every configuration in a fresh process (forked from a
*forkserver* that has already imported :mod:`torch` and PyG, so a worker
starts in a fraction of a second): the CPU high-water mark of one
configuration then cannot leak into the next one, and a configuration that
runs out of memory kills its worker, not the suite. CUDA workers are
spawned instead once a forked one finds CUDA unusable (see
:func:`run_isolated`).
"""
import contextlib
import csv
import ctypes
import gc
import io
import math
import multiprocessing
import os
import os.path as osp
import platform
import re
import resource
import signal
import statistics
import sys
import time
import traceback
import types
from typing import (
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Sequence,
    Tuple,
)

import psutil
import torch

from apnet_pyg.utils import atomic_write_text, make_output_folder
from apnet_pyg.environment import describe_environment
from benchmarks.cuda_fork import cuda_initialisation_evidence

MB = float(1 << 20)
GB = float(1 << 30)

#: The directory that holds the ``benchmarks`` package (the repository root).
REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
RESULTS_ROOT = osp.join(REPO_ROOT, 'benchmarks', 'results')


def log(text: str) -> None:
    # Flushed: progress shows up in a redirected log while the suite runs.
    print(text, flush=True)


# ---------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------
def describe_machine(device: str) -> Dict[str, str]:
    r"""The facts a reader needs to compare two result files: those of
    :func:`~apnet_pyg.environment.describe_environment` (the thread
    count torch runs with now), the memory and the OS."""
    # Everything describe_environment records, so the two never disagree.
    return {
        **describe_environment(device),
        'ram_gb': f'{psutil.virtual_memory().total / GB:.1f}',
        'device': device,
        'os': platform.platform(),
    }


def _slug(text: str) -> str:
    return re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')


def machine_slug(machine: Dict[str, str]) -> str:
    r"""A short directory name such as ``cpu-amd-epyc-2c`` or
    ``cuda-h100``."""
    if machine['gpu'] != 'none':
        words = [w for w in re.split(r'[\s\-_]+', machine['gpu'].lower())
                 if w not in ('nvidia', 'tesla', 'geforce', 'amd', 'radeon')]
        model = next((w for w in words if re.search(r'\d', w)),
                     words[0] if words else 'gpu')
        return f'cuda-{_slug(model)}'
    model = re.sub(r'\(r\)|\(tm\)|\bprocessor\b|\bcpu\b|@.*$', ' ',
                   machine['cpu'].lower())
    model = re.sub(r'\b\d+-core\b', ' ', model)
    return f"cpu-{_slug(model)}-{machine['cores']}c"


def processor(machine: Dict[str, str]) -> str:
    r"""The processor a machine record names: the GPU's name for a CUDA
    device, else the CPU's name with its family, model and stepping
    (:func:`~apnet_pyg.environment.cpu_id`; a record written before
    they were recorded says so), which tell apart the generations that a
    name such as ``AMD EPYC`` covers."""
    if machine.get('gpu', 'none') != 'none':
        return machine['gpu']
    cpu_id = machine.get('cpu_id') or 'family and model not recorded'
    return f"{machine.get('cpu', '')}, {cpu_id}"


def recorded_machines(folder: str) -> List[Tuple[str, Dict[str, str]]]:
    r"""The machine records of the results in :obj:`folder`, as
    ``(file, record)``: the ``## Machine`` table of the propagation suite's
    ``README.md`` and the ``Machine:`` line of ``train_step.md``."""
    records = []
    for name in ('README.md', 'train_step.md'):
        path = osp.join(folder, name)
        try:
            with open(path, encoding='utf-8') as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        if name == 'README.md' and '\n## Machine\n' in text:
            section = text.split('\n## Machine\n', 1)[1].split('\n## ')[0]
            rows = re.findall(r'^\| (\w+) \| (.*) \|$', section, re.M)
            records.append((path, {k: v.strip() for k, v in rows}))
        elif name == 'train_step.md':
            line = next((line for line in text.splitlines()
                         if line.startswith('Machine: ')), None)
            if line is not None:
                items = line[len('Machine: '):].split(', ')
                records.append((path, {
                    key: value.strip() for key, _, value in
                    (item.partition(' ') for item in items)}))
    return records


def check_results_folder(folder: str, machine: Dict[str, str],
                         slug: str) -> None:
    r"""Refuses to write the default results of :obj:`machine` into
    :obj:`folder` (``results/<slug>``) where its results record another
    :func:`processor`, or only the name of this one (written before the
    family and model were recorded, on any processor of that name): the
    folder name does not tell processors of one name apart, and the
    committed results of one would be overwritten with those of another.
    :obj:`--machine` or :obj:`--out` choose the folder explicitly."""
    ours = processor(machine)
    for path, record in recorded_machines(folder):
        theirs = processor(record)
        if theirs != ours:
            raise ValueError(
                f"'{path}' holds the results of a processor not recorded "
                f"as this one (recorded: {theirs}; this one: {ours}): pass "
                f"--machine NAME to write to benchmarks/results/NAME "
                f"(--machine {slug} replaces them), or --out FOLDER")


def check_device(device: str) -> None:
    r"""Refuses a :obj:`--device` the suites cannot measure on: they time
    and measure memory on the CPU or a CUDA device only."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ('cpu', 'cuda'):
        raise ValueError(f"--device must be cpu, cuda or cuda:N (got "
                         f"'{device}')")
    if parsed.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(f'--device {device}: torch sees no CUDA device '
                             f'here; use --device cpu')
        if parsed.index is not None and \
                parsed.index >= torch.cuda.device_count():
            raise ValueError(f'--device {device}: there are only '
                             f'{torch.cuda.device_count()} CUDA devices')


def check_machine_name(name: Optional[str]) -> None:
    r"""Refuses a :obj:`--machine` that is not a plain folder name: it is
    joined onto ``benchmarks/results/``, which a path would escape."""
    if name is not None and (not re.fullmatch(r'[A-Za-z0-9._-]+', name)
                             or name in ('.', '..')):
        raise ValueError(f"--machine must be a plain folder name (letters, "
                         f"digits, '.', '_', '-'; got '{name}'); use --out "
                         f"to write elsewhere")


def prepare_run(device: str, threads: int, quick: bool,
                machine_name: Optional[str] = None,
                out: Optional[str] = None) -> Tuple[Dict[str, str], str, str]:
    r"""What every suite does before measuring: refuses a device that is
    not there, a thread count below 1, a :obj:`--machine` that is not a
    folder name and an empty :obj:`--out`, fixes the thread count,
    describes the machine and creates the output directory (default
    ``results/<machine>[/quick]``, refused where its results, or those of
    ``results/<machine>``, are not recorded as this processor's:
    :func:`check_results_folder`). Returns ``(machine, slug, out_dir)``."""
    if out is not None and not out.strip():
        # An empty --out would fall back to the default, the committed
        # results folder of this machine.
        raise ValueError("--out is empty: name an output folder, or leave "
                         "--out out for benchmarks/results/<machine>")
    if threads < 1:
        raise ValueError(f'--threads must be a positive integer (got '
                         f'{threads}); leave it out for all cores')
    check_device(device)
    check_machine_name(machine_name)
    torch.set_num_threads(threads)
    machine = describe_machine(device)
    slug = machine_name or machine_slug(machine)
    out_dir = out if out is not None else osp.join(
        RESULTS_ROOT, slug, 'quick' if quick else '')
    if machine_name is None and out is None:
        for folder in dict.fromkeys([osp.join(RESULTS_ROOT, slug),
                                     osp.normpath(out_dir)]):
            check_results_folder(folder, machine, slug)
    make_output_folder(out_dir)
    return machine, slug, out_dir


# ---------------------------------------------------------------------------
# Measurement inside a worker
# ---------------------------------------------------------------------------
class TimeCapExceeded(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: Optional[float]):
    r"""Raises :class:`TimeCapExceeded` once :obj:`seconds` have passed (at
    the next Python-level step: a single long kernel is not interrupted)."""
    if not seconds or not hasattr(signal, 'setitimer'):
        yield
        return

    def on_alarm(signum, frame):
        raise TimeCapExceeded

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def synchronize(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def _timed(fn: Callable[[], None], device: torch.device) -> float:
    r"""Seconds one call of :obj:`fn` takes: on CUDA, between two events
    on the device's stream, recorded after the queue was drained (so the
    device's idle time waiting for the host's launches counts too); on
    CPU, :func:`time.perf_counter`."""
    synchronize(device)
    if device.type == 'cuda':
        start_event = torch.cuda.Event(enable_timing=True)
        end_event = torch.cuda.Event(enable_timing=True)
        start_event.record()
        fn()
        end_event.record()
        end_event.synchronize()
        return start_event.elapsed_time(end_event) / 1e3  # ms -> s
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def warm_up(fn: Callable[[], None], device: torch.device,
            time_cap: Optional[float]) -> None:
    r"""The calls of :obj:`fn` before :func:`time_runs`, not counted.

    The first call pays for lazy initialisation and first-touch page
    faults, and is the time-cap probe: it raises :class:`TimeCapExceeded`
    past :obj:`time_cap` seconds.
    """
    with time_limit(time_cap):
        first = _timed(fn, device)
    if first < 0.1:  # Cheap: a second warm-up settles caches and allocator.
        _timed(fn, device)


def time_runs(fn: Callable[[], None], device: torch.device, min_runs: int,
              min_time: float, max_runs: int) -> List[float]:
    r"""Seconds taken by each of at least :obj:`min_runs` calls of
    :obj:`fn` (more, up to :obj:`max_runs`, until :obj:`min_time` seconds
    are spent); call :func:`warm_up` first."""
    times: List[float] = []
    while len(times) < min_runs or (sum(times) < min_time
                                    and len(times) < max_runs):
        times.append(_timed(fn, device))
    return times


def _malloc_trim() -> None:
    # Gives freed heap memory back to the OS, so that the next baseline
    # counts live tensors only.
    try:
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _proc_status_kb(field: str) -> Optional[int]:
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith(field + ':'):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_rss_peak() -> bool:
    # Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current RSS.
    try:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        return True
    except OSError:
        return False


def current_rss_bytes() -> int:
    return psutil.Process().memory_info().rss


def peak_rss_bytes() -> int:
    hwm = _proc_status_kb('VmHWM')
    if hwm is not None:
        return hwm * 1024
    # ru_maxrss is in kB on Linux, bytes on macOS.
    scale = 1 if sys.platform == 'darwin' else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


class PeakMemory:
    r"""Peak memory above the level at entry: on CUDA, from
    :func:`torch.cuda.max_memory_allocated` (its peak reset at entry); on
    CPU, the process's RSS high-water mark (``VmHWM``, reset at entry).
    Enter it after :func:`warm_up`, so that one-time first-call costs are
    not counted. :obj:`peak_bytes` stays :obj:`None` on a CPU whose
    high-water mark cannot be reset (no writable ``/proc/self/clear_refs``):
    the process's lifetime peak would count the setup and the warm-up."""
    def __init__(self, device: torch.device):
        self.device = device
        self.peak_bytes: Optional[int] = None

    def __enter__(self) -> 'PeakMemory':
        gc.collect()
        if self.device.type == 'cuda':
            synchronize(self.device)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.baseline = torch.cuda.memory_allocated(self.device)
        else:
            _malloc_trim()
            self.exact = _reset_rss_peak()
            self.baseline = current_rss_bytes()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == 'cuda':
            synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
        elif not self.exact:
            return
        else:
            peak = peak_rss_bytes()
        self.peak_bytes = max(0, peak - self.baseline)

    @property
    def peak_mb(self) -> Optional[float]:
        return None if self.peak_bytes is None else self.peak_bytes / MB


class LoadMonitor:
    r"""The 1-minute load average at entry and exit, and the CPU cores kept
    busy by *other* processes in between (all CPU time of the machine minus
    this process's own): the load average also counts this benchmark's own
    threads, so the second number is the one that says whether a timing was
    disturbed."""
    def __enter__(self) -> 'LoadMonitor':
        self.load_start = os.getloadavg()[0]
        self._machine = self._busy_seconds()
        self._own = self._own_seconds()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = max(time.perf_counter() - self._start, 1e-9)
        self.load_end = os.getloadavg()[0]
        machine = self._busy_seconds() - self._machine
        own = self._own_seconds() - self._own
        self.other_cores = max(0.0, (machine - own) / wall)

    @staticmethod
    def _busy_seconds() -> float:
        times = psutil.cpu_times()
        return sum(times) - times.idle - getattr(times, 'iowait', 0.0)

    @staticmethod
    def _own_seconds() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime


def other_cores(window: float) -> float:
    r"""CPU cores kept busy by other processes over the next
    :obj:`window` seconds (this process sleeps meanwhile)."""
    with LoadMonitor() as load:
        time.sleep(window)
    return load.other_cores


def wait_for_quiet(busy_cores: float, max_wait: float,
                   window: float = 0.25) -> float:
    r"""Waits until other processes keep at most :obj:`busy_cores` cores
    busy over a :obj:`window`, or :obj:`max_wait` seconds have passed;
    returns the seconds waited."""
    start = time.perf_counter()
    while max_wait > 0 and other_cores(window) > busy_cores:
        if time.perf_counter() - start + window > max_wait:
            break
    return time.perf_counter() - start if max_wait > 0 else 0.0


def copy_bandwidth(device: torch.device, num_bytes: int = 1 << 30,
                   repeats: int = 10) -> float:
    r"""Bytes per second that a device-to-device copy of :obj:`num_bytes`
    moves (read and write counted: twice the size over the time), the
    median of :obj:`repeats` copies after one untimed: the floor under
    which no memory-bound pass can go on this device."""
    def median_seconds() -> float:
        source = torch.ones(num_bytes // 4, device=device)
        target = torch.empty_like(source)

        def copy():
            target.copy_(source)

        copy()
        return statistics.median(_timed(copy, device)
                                 for _ in range(repeats))

    seconds = median_seconds()
    if device.type == 'cuda':  # The buffers' memory back to the device.
        torch.cuda.empty_cache()
    return 2 * (num_bytes // 4) * 4 / seconds


def measure_copy_bandwidth(spec: dict) -> dict:
    r"""A worker's target (:func:`run_isolated`): the copy bandwidth of
    :obj:`spec['device']`, in bytes per second."""
    return {'bytes_per_second': copy_bandwidth(torch.device(spec['device']))}


def summarize_times(times: Sequence[float]) -> Dict[str, float]:
    return {
        'runs': len(times),
        'min_ms': 1e3 * min(times),
        'median_ms': 1e3 * statistics.median(times),
    }


def is_out_of_memory(error: BaseException) -> bool:
    text = str(error).lower()
    return isinstance(error, MemoryError) or 'out of memory' in text or \
        "can't allocate memory" in text


# ---------------------------------------------------------------------------
# Isolated worker processes
# ---------------------------------------------------------------------------
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
_CUDA_FORK_ERRORS = ('initialization error',
                     'Cannot re-initialize CUDA in forked subprocess')


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
        vm_size = (_proc_status_kb('VmSize') or 0) * 1024
        limit = int(vm_size + memory_cap + GB)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass


def _run_target(target: Callable[[dict], dict], spec: dict, connection,
                forked: bool) -> str:
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
        connection.send(('error', ''.join(
            traceback.format_exception_only(type(error), error)).strip()))
        return 'error'


def _worker_entry(target: Callable[[dict], dict], spec: dict,
                  connection, forked: bool = True) -> None:
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


def _await_result(process, receiver, memory_cap: float,
                  timeout: float) -> dict:
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
            error = (f'memory: RSS passed the {memory_cap / GB:.3g} GB '
                     f'cap at run time')
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
                return {'error': f'CUDA was initialised in the process '
                        f'this worker was forked from ({payload})',
                        'cuda_inherited': payload}
            error = payload
    if process.is_alive():
        process.kill()
    return {'error': error}


def _run_worker(context, target: Callable[[dict], dict], spec: dict,
                memory_cap: float, timeout: float) -> dict:
    receiver, sender = context.Pipe(duplex=False)
    forked = context.get_start_method() != 'spawn'
    process = _start_process(context, _worker_entry,
                             (target, spec, sender, forked))
    sender.close()
    try:
        return _await_result(process, receiver, memory_cap, timeout)
    finally:
        process.join(30)
        receiver.close()


def _run_served(context, target: Callable[[dict], dict], spec: dict,
                memory_cap: float, timeout: float) -> dict:
    # On the persistent worker (_serve), started again after a failure.
    if 'process' in _SERVER and not _SERVER['process'].is_alive():
        _stop_server()
    if 'process' not in _SERVER:
        connection, child = context.Pipe(duplex=True)
        _SERVER['process'] = _start_process(context, _serve, (child, ))
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
        return (f"a worker forked from the forkserver inherited an "
                f"initialised CUDA ({result['cuda_inherited']})")
    error = result.get('error') or ''
    if any(text in error for text in _CUDA_FORK_ERRORS):
        return (f'a worker forked from the forkserver could not initialise '
                f'CUDA ({error.splitlines()[0]})')
    return None


def run_isolated(target: Callable[[dict], dict], spec: dict,
                 memory_cap: float, timeout: float,
                 preload: Sequence[str] = (),
                 start_method: Optional[str] = None) -> dict:
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
        return _run_served(_worker_context('spawn', preload), target, spec,
                           memory_cap, timeout)
    result = _run_worker(_worker_context(method, preload), target, spec,
                         memory_cap, timeout)
    if cuda and method != 'spawn':
        problem = _cuda_fork_problem(result)
        if problem is not None and start_method is None:
            CUDA_SPAWN_REASON = problem
            log(f'note: {problem}: CUDA passes run in a spawned worker from '
                f'now on (it imports torch and PyG itself, and is started '
                f'again after a failed pass)')
            return _run_served(_worker_context('spawn', preload), target,
                               spec, memory_cap, timeout)
        if problem is not None:
            result = _run_worker(_worker_context('spawn', preload), target,
                                 spec, memory_cap, timeout)
    return result


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------
def write_csv(path: str, rows: Iterable[dict], columns: Sequence[str]) -> None:
    buffer = io.StringIO(newline='')
    writer = csv.DictWriter(buffer, fieldnames=list(columns),
                            extrasaction='ignore')
    writer.writeheader()
    for row in rows:
        writer.writerow({key: format_value(row.get(key))
                         for key in columns})
    atomic_write_text(buffer.getvalue(), path)


def format_value(value) -> str:
    if value is None:
        return ''
    if isinstance(value, float):
        if math.isnan(value):
            return ''
        return f'{value:.4g}' if abs(value) < 1e4 else f'{value:.0f}'
    return str(value)


def markdown_table(header: Sequence[str],
                   rows: Iterable[Sequence[str]]) -> str:
    lines = ['| ' + ' | '.join(header) + ' |',
             '|' + '|'.join('---' for _ in header) + '|']
    lines += ['| ' + ' | '.join(str(cell) for cell in row) + ' |'
              for row in rows]
    return '\n'.join(lines)


def format_ms(ms: Optional[float]) -> str:
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return '-'
    if ms >= 1000:
        return f'{ms / 1000:.2f} s'
    if ms >= 10:
        return f'{ms:.0f} ms'
    if ms >= 1:
        return f'{ms:.1f} ms'
    return f'{ms:.2f} ms'


def format_mb(mb: Optional[float]) -> str:
    if mb is None or (isinstance(mb, float) and math.isnan(mb)):
        return '-'
    if mb >= 1024:
        return f'{mb / 1024:.2f} GB'
    return f'{mb:.0f} MB'
