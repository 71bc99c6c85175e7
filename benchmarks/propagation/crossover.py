r"""The sparse / dense crossover of the propagation benchmark: the average
degree above which :class:`~apnet_pyg.nn.DenseAPNetConv` beats the sparse
:class:`~apnet_pyg.nn.APNetConv`, from the measured rows."""

import math
from typing import Dict, List, Optional, Sequence

from benchmarks.propagation.grid import DENSE, PASSES, SPARSE, RunSettings


def _loglog_interpolate(points: Dict[float, float], x: float) -> float:
    r"""Piecewise-linear interpolation in log-log space, constant beyond the
    measured range."""
    xs = sorted(points)
    if x <= xs[0]:
        return points[xs[0]]
    if x >= xs[-1]:
        return points[xs[-1]]
    for left, right in zip(xs, xs[1:]):
        if left <= x <= right:
            t = (math.log(x) - math.log(left)) / (
                math.log(right) - math.log(left)
            )
            return math.exp(
                (1 - t) * math.log(points[left]) + t * math.log(points[right])
            )
    raise AssertionError


def _min_times(
    rows: Sequence[dict], method: str, N: int, F: int, pass_: str
) -> Dict[float, float]:
    # The min: a burst of work elsewhere on the machine cannot fake a
    # crossing.
    return {
        row['degree']: row['min_ms']
        for row in rows
        if row['method'] == method
        and row['N'] == N
        and row['F'] == F
        and row['pass'] == pass_
        and row['status'] == 'ok'
        and row['graph'] in ('random', 'complete')
    }


def find_crossover(
    rows: Sequence[dict], N: int, F: int, pass_: str
) -> Optional[dict]:
    r"""The average degree above which the dense layer is faster than the
    sparse one, at :obj:`N` nodes.

    The ratio :math:`t_\text{dense} / t_\text{sparse}` of the min times
    is taken at every
    degree where the sparse layer was measured (the dense time, flat in the
    degree, interpolated in log-log space where it was not measured there),
    and the crossing of 1 is interpolated linearly in
    :math:`(\log d, \log t_\text{dense} / t_\text{sparse})`.
    """
    sparse = _min_times(rows, SPARSE, N, F, pass_)
    dense = _min_times(rows, DENSE, N, F, pass_)
    if not sparse or not dense:
        return None
    degrees = sorted(sparse)
    log_ratio = [
        math.log(_loglog_interpolate(dense, d) / sparse[d]) for d in degrees
    ]
    result = {
        'N': N,
        'F': F,
        'pass': pass_,
        'degrees': degrees,
        'ratios': [math.exp(r) for r in log_ratio],
        'degree': None,
        'bound': None,
        'bracket': None,
    }
    if log_ratio[0] <= 0:
        # Dense already faster at the sparsest measured graph.
        result.update(bound='below', degree=degrees[0])
        return result
    for (d1, r1), (d2, r2) in zip(
        zip(degrees, log_ratio), zip(degrees[1:], log_ratio[1:])
    ):
        if r1 > 0 >= r2:
            t = r1 / (r1 - r2)
            degree = math.exp(math.log(d1) + t * (math.log(d2) - math.log(d1)))
            result.update(degree=degree, bracket=(d1, d2))
            return result
    result.update(bound='above', degree=degrees[-1])
    return result


def _extrapolated_crossing(
    degrees: Sequence[float], ratios: Sequence[float]
) -> float:
    r"""Where the ratio would reach 1 beyond the last measured degree,
    following its log-log slope over the last two degrees (at least as steep
    as :math:`d^{-1/4}`; :math:`d^{-1}`, sparse time proportional to the
    edges, from a single point)."""
    slope = -1.0
    if len(degrees) >= 2:
        slope = (math.log(ratios[-1]) - math.log(ratios[-2])) / (
            math.log(degrees[-1]) - math.log(degrees[-2])
        )
        slope = min(slope, -0.25)
    return degrees[-1] * math.exp(-math.log(ratios[-1]) / slope)


def next_refinement(rows: Sequence[dict], N: int, F: int) -> Optional[float]:
    r"""A degree where measuring the sparse layer pins the forward+backward
    crossover down: its current estimate, by log-log interpolation inside a
    bracket wider than 2x, or by extrapolation (at most to the log-midpoint
    of what is left) when the sparse layer is faster everywhere measured;
    :obj:`None` when the estimate is good enough."""
    crossover = find_crossover(rows, N, F, 'forward+backward')
    if crossover is None:
        return None
    degrees, ratios = crossover['degrees'], crossover['ratios']
    if crossover['bracket'] is not None:
        low, high = crossover['bracket']
        if high / low <= 2:
            return None
        candidate = crossover['degree']
    elif crossover['bound'] == 'below':
        # Dense faster even at the sparsest graph: one step towards 1.
        candidate = degrees[0] / 4
        if candidate < 1:
            return None
    else:
        # Up to the next degree the sparse layer was attempted at (and
        # skipped), or the complete graph.
        attempted = [
            row['degree']
            for row in rows
            if row['method'] == SPARSE
            and row['N'] == N
            and row['F'] == F
            and row['degree'] > degrees[-1]
            and row['graph'] in ('random', 'complete')
        ]
        high = min(attempted, default=N - 1)
        candidate = min(
            _extrapolated_crossing(degrees, ratios),
            math.sqrt(degrees[-1] * high),
        )
    candidate = float(round(candidate))
    # Within 20% of a degree already tried: nothing new to learn there.
    tried = [
        row['degree']
        for row in rows
        if row['method'] == SPARSE and row['N'] == N and row['F'] == F
    ]
    if any(abs(math.log(candidate / d)) < math.log(1.2) for d in tried):
        return None
    return candidate


def crossover_rows(rows: Sequence[dict], settings: RunSettings) -> List[dict]:
    table = []
    for F in settings.features:
        for N in settings.nodes:
            for pass_ in PASSES:
                crossover = find_crossover(rows, N, F, pass_)
                if crossover is not None:
                    table.append(crossover)
    return table
