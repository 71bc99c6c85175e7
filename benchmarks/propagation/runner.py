r"""The driver of the propagation benchmark: runs the configurations of
the grid one after the other, each pass in a worker process, skipping
those the cost model rules out, and adds degrees around the crossover."""

import os.path as osp
import shutil
import tempfile
import time
from typing import Dict, List, Optional, Tuple

import psutil
import torch

from benchmarks import common, workers
from benchmarks.common import GB, MB
from benchmarks.cuda_fork import PROPAGATION_PRELOAD
from benchmarks.propagation import worker
from benchmarks.propagation.cost_model import (
    IMPORT_BYTES,
    PREDICTION_SLACK,
    element_size,
    estimate_peak_bytes,
    floor_bytes,
    gather_floor_bytes,
    predict_seconds,
    setup_bytes,
    work,
)
from benchmarks.propagation.crossover import next_refinement
from benchmarks.propagation.grid import (
    DENSE,
    PASSES,
    SPARSE,
    GraphSpec,
    RunSettings,
    build_edge_index,
    grid,
    is_saved,
    method_proj_channels,
    random_graph_spec,
)

#: The columns of propagation.csv.
COLUMNS = (
    'method',
    'graph',
    'N',
    'E',
    'degree',
    'edge_fraction',
    'F',
    'dtype',
    'proj_channels',
    'pass',
    'status',
    'runs',
    'min_ms',
    'median_ms',
    'floor_ms',
    'gather_floor_ms',
    'peak_mb',
    'est_peak_mb',
    'setup_mb',
    'device',
    'threads',
    'load_start',
    'load_end',
    'other_cores',
    'source',
    'note',
)

# A timing taken while other processes kept more cores than this busy is
# provisional.
BUSY_CORES = 0.25


class Runner:
    r"""Runs configurations one after the other and collects the rows."""

    def __init__(
        self,
        settings: RunSettings,
        log=common.log,
        bandwidth: Optional[float] = None,
    ):
        self.settings = settings
        self.rows: List[dict] = []
        self.log = log
        self.waited = 0.0  # Seconds spent waiting for a quiet machine.
        self.started = time.perf_counter()
        #: Measured copy bandwidth (bytes/s) of the device, for floor_ms.
        self.bandwidth = bandwidth
        # The graphs built once for every worker (is_saved): their files.
        self.graph_dir: Optional[str] = None
        self.graph_files: Dict[GraphSpec, str] = {}
        self.cuda = torch.device(settings.device).type == 'cuda'

    def close(self) -> None:
        r"""Removes the graph files of :meth:`graph_file`."""
        if self.graph_dir is not None:
            shutil.rmtree(self.graph_dir, ignore_errors=True)
            self.graph_dir = None
            self.graph_files.clear()

    def graph_file(self, graph: GraphSpec) -> Optional[str]:
        r"""The file the workers read :obj:`graph` from, built on first use,
        or :obj:`None` for a graph each worker builds itself (cheaper than
        reading it)."""
        if not is_saved(graph):
            return None
        if graph not in self.graph_files:
            if self.graph_dir is None:
                self.graph_dir = tempfile.mkdtemp(prefix='apnet-graphs-')
            path = osp.join(
                self.graph_dir,
                f'{graph.kind}-{graph.num_nodes}-{graph.num_edges}.pt',
            )
            torch.save(build_edge_index(graph, self.settings.seed), path)
            self.graph_files[graph] = path
        return self.graph_files[graph]

    def budget_reason(self) -> Optional[str]:
        r"""Why no further pass starts, once :obj:`settings.budget` seconds
        have passed since the run began."""
        budget = self.settings.budget
        if budget is not None and time.perf_counter() - self.started > budget:
            return f"budget: the run's --budget of {budget:g} s was spent"
        return None

    def row(
        self,
        method: str,
        graph: GraphSpec,
        F: int,
        pass_: str,
        source: str,
        dtype: str = 'float32',
        **values,
    ) -> dict:
        row = {
            'method': method,
            'graph': graph.kind,
            'N': graph.num_nodes,
            'E': graph.num_edges,
            'degree': graph.degree,
            'edge_fraction': graph.edge_fraction,
            'F': F,
            'dtype': dtype,
            'proj_channels': method_proj_channels(method),
            'pass': pass_,
            'device': self.settings.device,
            'threads': self.settings.threads,
            'source': source,
            'runs': None,
            'min_ms': None,
            'median_ms': None,
            'peak_mb': None,
            'note': '',
            '_work': work(method, graph, F),
        }
        row.update(values)
        if self.bandwidth and row.get('status') == 'ok':
            element = element_size(dtype)
            row['floor_ms'] = (
                1e3 * floor_bytes(graph, F, pass_, element) / self.bandwidth
            )
            row['gather_floor_ms'] = (
                1e3
                * gather_floor_bytes(
                    graph, F, pass_, row['proj_channels'] or 0, element
                )
                / self.bandwidth
            )
        self.rows.append(row)
        return row

    def memory_cap(self) -> Tuple[float, str]:
        cap = self.settings.memory_cap
        if not self.cuda:
            # Leave room for whatever else runs on the machine.
            available = psutil.virtual_memory().available - 1 * GB
            if available < cap:
                return available, ' (free RAM)'
        return cap, ''

    def skip_reason(
        self,
        method: str,
        graph: GraphSpec,
        F: int,
        pass_: str,
        dtype: str = 'float32',
    ) -> Tuple[Optional[str], float]:
        backward = pass_ == 'forward+backward'
        estimate = estimate_peak_bytes(method, graph, F, backward)
        needed = estimate + setup_bytes(method, graph, F, backward)
        cap, why = self.memory_cap()
        if self.cuda:
            cap = min(
                cap,
                0.9
                * torch.cuda.get_device_properties(
                    torch.device(self.settings.device)
                ).total_memory,
            )
        else:
            needed += IMPORT_BYTES
        if needed > cap:
            return (
                f'memory: needs ~{needed / GB:.1f} GB (estimate) > '
                f'{cap / GB:.3g} GB cap{why}'
            ), estimate
        prediction = predict_seconds(method, graph, F, pass_, self.rows, dtype)
        # The operation count is a rough model: only a clear excess skips
        # here; a borderline pass runs, and its warm-up enforces the cap.
        if (
            prediction is not None
            and prediction[0] > PREDICTION_SLACK * self.settings.time_cap
        ):
            seconds, reference = prediction
            return (
                f'time cap: predicted {seconds:.0f} s per run > '
                f'{self.settings.time_cap:g} s (scaled from N='
                f'{reference["N"]}, degree {reference["degree"]:g})'
            ), estimate
        return None, estimate

    def run(
        self,
        method: str,
        graph: GraphSpec,
        F: int,
        source: str = 'grid',
        dtype: str = 'float32',
    ) -> List[dict]:
        r"""Measures both passes of one configuration (forward+backward is
        skipped when forward already was: it contains a forward)."""
        rows = []
        skipped_forward = None
        for pass_ in PASSES:
            reason, estimate = self.skip_reason(method, graph, F, pass_, dtype)
            reason = self.budget_reason() or reason
            if reason is None and skipped_forward is not None:
                reason = f'forward skipped ({skipped_forward})'
            if reason is not None:
                rows.append(
                    self.row(
                        method,
                        graph,
                        F,
                        pass_,
                        source,
                        dtype,
                        status='skipped',
                        note=reason,
                        est_peak_mb=estimate / MB,
                    )
                )
                skipped_forward = skipped_forward or reason
                self.log(
                    f'  skipped {method:12s} {graph.kind:8s} '
                    f'N={graph.num_nodes:<6d} d={graph.degree_label:8s} '
                    f'F={F:<4d} {dtype:8s} {pass_:16s} {reason}'
                )
                continue
            result = self.measure(method, graph, F, pass_, dtype)
            status = result.pop('status', 'failed')
            note = result.pop('note', result.pop('error', ''))
            row = self.row(
                method,
                graph,
                F,
                pass_,
                source,
                dtype,
                status=status,
                note=note,
                est_peak_mb=estimate / MB,
                **result,
            )
            rows.append(row)
            self.log(self.describe(row))
            if status != 'ok':
                skipped_forward = skipped_forward or note
        return rows

    def measure(
        self,
        method: str,
        graph: GraphSpec,
        F: int,
        pass_: str,
        dtype: str = 'float32',
    ) -> dict:
        settings = self.settings
        cap, _ = self.memory_cap()
        spec = {
            'method': method,
            'graph': vars(graph),
            'F': F,
            'dtype': dtype,
            'pass': pass_,
            'device': settings.device,
            'threads': settings.threads,
            'seed': settings.seed,
            'memory_cap_bytes': cap,
            'edges_file': self.graph_file(graph),
            'timing': {
                'min_runs': settings.min_runs,
                'min_time': settings.min_time,
                'max_runs': settings.max_runs,
                'time_cap': settings.time_cap,
            },
        }
        self.wait_for_quiet()
        # Setup (graph generation) plus the warm-up and timed runs.
        timeout = 300 + 2 * settings.time_cap * (settings.min_runs + 2)
        result = workers.run_isolated(
            worker.measure, spec, cap, timeout, preload=PROPAGATION_PRELOAD
        )
        if 'error' in result:
            # The first line says what failed (CUDA's errors add lines of
            # advice, which would break the summary's tables).
            error = (result['error'] or 'failed').strip().splitlines()[0]
            kind = 'skipped' if error.startswith('memory') else 'failed'
            return {'status': kind, 'note': error}
        return result

    def wait_for_quiet(self) -> None:
        r"""Waits (a bounded time) until other processes keep at most
        :data:`BUSY_CORES` cores busy, so that a timing is not taken in the
        middle of someone else's burst of work."""
        budget = min(
            self.settings.quiet_wait,
            self.settings.quiet_wait_total - self.waited,
        )
        waited = common.wait_for_quiet(BUSY_CORES, budget)
        self.waited += waited
        if waited >= 1.0:
            self.log(
                f'  (waited {waited:.0f} s for other processes; '
                f'{self.waited:.0f} s in all)'
            )

    @staticmethod
    def describe(row: dict) -> str:
        text = (
            f'  {row["status"]:7s} {row["method"]:12s} '
            f'{row["graph"]:8s} N={row["N"]:<6d} '
            f'd={row["degree"]:<8.4g} F={row["F"]:<4d} '
            f'{row.get("dtype", "float32"):8s} {row["pass"]:16s}'
        )
        if row['status'] == 'ok':
            text += (
                f' median {common.format_ms(row["median_ms"]):>8s} '
                f'({row["runs"]} runs)  peak '
                f'{common.format_mb(row["peak_mb"]):>8s}  '
                f'other load {row["other_cores"]:.2f} cores'
            )
        else:
            text += f' {row["note"]}'
        return text


def run_grid(
    settings: RunSettings, log=common.log, bandwidth: Optional[float] = None
) -> Tuple[List[dict], Dict[str, str]]:
    r"""Measures the grid of :obj:`settings`; returns the rows and why a
    real graph is missing (by kind). :obj:`bandwidth`, the device's copy
    bandwidth in bytes/s, gives each row its ``floor_ms``."""
    runner = Runner(settings, log, bandwidth)
    configurations, missing = grid(settings)
    if not configurations:  # benchmarks.propagation.check_arguments
        raise ValueError(
            'nothing to measure: the --nodes, --degrees and '
            '--methods given leave no configuration'
        )
    log(f'{len(configurations)} configurations x {len(PASSES)} passes')
    try:
        for method, graph, F, dtype in configurations:
            runner.run(method, graph, F, dtype=dtype)
        if (
            settings.refine
            and SPARSE in settings.methods
            and DENSE in settings.methods
        ):
            refine_crossovers(runner, settings, log)
    finally:
        runner.close()
    return runner.rows, missing


def float32_rows(rows: List[dict]) -> List[dict]:
    r"""The rows of float32 passes (a row without a dtype is one)."""
    return [row for row in rows if row.get('dtype', 'float32') == 'float32']


def refine_crossovers(
    runner: Runner, settings: RunSettings, log=common.log, max_steps: int = 3
) -> None:
    log('refining the sparse/dense crossover')
    for F in settings.features:
        for N in settings.nodes:
            for _ in range(max_steps):
                # The crossover of the float32 layers.
                degree = next_refinement(float32_rows(runner.rows), N, F)
                if degree is None:
                    break
                graph = random_graph_spec(N, degree)
                runner.run(SPARSE, graph, F, source='refinement')
                # The dense time is flat in the degree: measure it at the
                # refinement point only when that is cheap.
                prediction = predict_seconds(
                    DENSE, graph, F, 'forward+backward', runner.rows
                )
                if prediction is not None and prediction[0] < 1.0:
                    runner.run(DENSE, graph, F, source='refinement')
