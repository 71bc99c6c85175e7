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
import os
import os.path as osp
import platform
import re
import resource
import signal
import statistics
import sys
import time
from typing import (
    Any,
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

from apnet_pyg.environment import describe_environment
from apnet_pyg.files import atomic_write_text, make_output_folder

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
        words = [
            w
            for w in re.split(r'[\s\-_]+', machine['gpu'].lower())
            if w not in ('nvidia', 'tesla', 'geforce', 'amd', 'radeon')
        ]
        model = next(
            (w for w in words if re.search(r'\d', w)),
            words[0] if words else 'gpu',
        )
        return f'cuda-{_slug(model)}'
    model = re.sub(
        r'\(r\)|\(tm\)|\bprocessor\b|\bcpu\b|@.*$', ' ', machine['cpu'].lower()
    )
    model = re.sub(r'\b\d+-core\b', ' ', model)
    return f'cpu-{_slug(model)}-{machine["cores"]}c'


def processor(machine: Dict[str, str]) -> str:
    r"""The processor a machine record names: the GPU's name for a CUDA
    device, else the CPU's name with its family, model and stepping
    (:func:`~apnet_pyg.environment.cpu_id`; a record written before
    they were recorded says so), which tell apart the generations that a
    name such as ``AMD EPYC`` covers."""
    if machine.get('gpu', 'none') != 'none':
        return machine['gpu']
    cpu_id = machine.get('cpu_id') or 'family and model not recorded'
    return f'{machine.get("cpu", "")}, {cpu_id}'


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
            line = next(
                (
                    line
                    for line in text.splitlines()
                    if line.startswith('Machine: ')
                ),
                None,
            )
            if line is not None:
                items = line[len('Machine: ') :].split(', ')
                records.append(
                    (
                        path,
                        {
                            key: value.strip()
                            for key, _, value in (
                                item.partition(' ') for item in items
                            )
                        },
                    )
                )
    return records


def check_results_folder(
    folder: str, machine: Dict[str, str], slug: str
) -> None:
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
                f'as this one (recorded: {theirs}; this one: {ours}): pass '
                f'--machine NAME to write to benchmarks/results/NAME '
                f'(--machine {slug} replaces them), or --out FOLDER'
            )


def check_device(device: str) -> None:
    r"""Refuses a :obj:`--device` the suites cannot measure on: they time
    and measure memory on the CPU or a CUDA device only."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        parsed = None
    if parsed is None or parsed.type not in ('cpu', 'cuda'):
        raise ValueError(
            f"--device must be cpu, cuda or cuda:N (got '{device}')"
        )
    if parsed.type == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError(
                f'--device {device}: torch sees no CUDA device '
                f'here; use --device cpu'
            )
        if (
            parsed.index is not None
            and parsed.index >= torch.cuda.device_count()
        ):
            raise ValueError(
                f'--device {device}: there are only '
                f'{torch.cuda.device_count()} CUDA devices'
            )


def check_machine_name(name: Optional[str]) -> None:
    r"""Refuses a :obj:`--machine` that is not a plain folder name: it is
    joined onto ``benchmarks/results/``, which a path would escape."""
    if name is not None and (
        not re.fullmatch(r'[A-Za-z0-9._-]+', name) or name in ('.', '..')
    ):
        raise ValueError(
            f'--machine must be a plain folder name (letters, '
            f"digits, '.', '_', '-'; got '{name}'); use --out "
            f'to write elsewhere'
        )


def fill_defaults(
    args, defaults: Dict[str, Any], quick_defaults: Dict[str, Any]
) -> None:
    r"""Sets each option of :obj:`args` not given (:obj:`None`) to its
    default, or to its :obj:`--quick` default."""
    for key, value in (quick_defaults if args.quick else defaults).items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def prepare_run(
    device: str,
    threads: int,
    quick: bool,
    machine_name: Optional[str] = None,
    out: Optional[str] = None,
) -> Tuple[Dict[str, str], str, str]:
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
        raise ValueError(
            '--out is empty: name an output folder, or leave '
            '--out out for benchmarks/results/<machine>'
        )
    if threads < 1:
        raise ValueError(
            f'--threads must be a positive integer (got '
            f'{threads}); leave it out for all cores'
        )
    check_device(device)
    check_machine_name(machine_name)
    torch.set_num_threads(threads)
    machine = describe_machine(device)
    slug = machine_name or machine_slug(machine)
    out_dir = (
        out
        if out is not None
        else osp.join(RESULTS_ROOT, slug, 'quick' if quick else '')
    )
    if machine_name is None and out is None:
        for folder in dict.fromkeys(
            [osp.join(RESULTS_ROOT, slug), osp.normpath(out_dir)]
        ):
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


def warm_up(
    fn: Callable[[], None], device: torch.device, time_cap: Optional[float]
) -> None:
    r"""The calls of :obj:`fn` before :func:`time_runs`, not counted.

    The first call pays for lazy initialisation and first-touch page
    faults, and is the time-cap probe: it raises :class:`TimeCapExceeded`
    past :obj:`time_cap` seconds.
    """
    with time_limit(time_cap):
        first = _timed(fn, device)
    if first < 0.1:  # Cheap: a second warm-up settles caches and allocator.
        _timed(fn, device)


def time_runs(
    fn: Callable[[], None],
    device: torch.device,
    min_runs: int,
    min_time: float,
    max_runs: int,
) -> List[float]:
    r"""Seconds taken by each of at least :obj:`min_runs` calls of
    :obj:`fn` (more, up to :obj:`max_runs`, until :obj:`min_time` seconds
    are spent); call :func:`warm_up` first."""
    times: List[float] = []
    while len(times) < min_runs or (
        sum(times) < min_time and len(times) < max_runs
    ):
        times.append(_timed(fn, device))
    return times


def _malloc_trim() -> None:
    # Gives freed heap memory back to the OS, so that the next baseline
    # counts live tensors only.
    try:
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):
        pass


def proc_status_kb(field: str) -> Optional[int]:
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
    hwm = proc_status_kb('VmHWM')
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


def wait_for_quiet(
    busy_cores: float, max_wait: float, window: float = 0.25
) -> float:
    r"""Waits until other processes keep at most :obj:`busy_cores` cores
    busy over a :obj:`window`, or :obj:`max_wait` seconds have passed;
    returns the seconds waited."""
    start = time.perf_counter()
    while max_wait > 0 and other_cores(window) > busy_cores:
        if time.perf_counter() - start + window > max_wait:
            break
    return time.perf_counter() - start if max_wait > 0 else 0.0


def copy_bandwidth(
    device: torch.device, num_bytes: int = 1 << 30, repeats: int = 10
) -> float:
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
        return statistics.median(_timed(copy, device) for _ in range(repeats))

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
    return (
        isinstance(error, MemoryError)
        or 'out of memory' in text
        or "can't allocate memory" in text
    )


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------
def write_csv(path: str, rows: Iterable[dict], columns: Sequence[str]) -> None:
    buffer = io.StringIO(newline='')
    writer = csv.DictWriter(
        buffer, fieldnames=list(columns), extrasaction='ignore'
    )
    writer.writeheader()
    for row in rows:
        writer.writerow({key: format_value(row.get(key)) for key in columns})
    atomic_write_text(buffer.getvalue(), path)


def format_value(value) -> str:
    if value is None:
        return ''
    if isinstance(value, float):
        if math.isnan(value):
            return ''
        return f'{value:.4g}' if abs(value) < 1e4 else f'{value:.0f}'
    return str(value)


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[str]]
) -> str:
    lines = [
        '| ' + ' | '.join(header) + ' |',
        '|' + '|'.join('---' for _ in header) + '|',
    ]
    lines += [
        '| ' + ' | '.join(str(cell) for cell in row) + ' |' for row in rows
    ]
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
