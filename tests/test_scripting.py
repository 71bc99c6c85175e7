import multiprocessing
import os

import pytest
import torch

from apnet_pyg.scripting import map_in_workers


def seeded_draw(state, job):
    # What a worker has: the state it was started with, its torch threads
    # and its process; the draw depends on the job's seed alone.
    offset, seed = state, job
    generator = torch.Generator().manual_seed(seed)
    draw = float(torch.rand((), generator=generator)) + offset
    return draw, torch.get_num_threads(), os.getpid()


def test_map_in_workers_same_results_in_order():
    jobs = [3, 1, 4, 1, 5]
    here = list(map_in_workers(seeded_draw, jobs, 10.0))
    assert {pid for *_, pid in here} == {os.getpid()}
    there = list(map_in_workers(seeded_draw, jobs, 10.0, workers=2))
    assert [draw for draw, *_ in there] == [draw for draw, *_ in here]
    assert all(threads == 1 for _, threads, _ in there)
    assert os.getpid() not in {pid for *_, pid in there}
    assert all(draw >= 10.0 for draw, *_ in here)


def test_map_in_workers_state_not_pickled_where_forked():
    if 'fork' not in multiprocessing.get_all_start_methods():
        pytest.skip('no fork on this platform')
    closure = lambda: 2.0  # noqa: E731 (cannot be pickled)
    results = list(
        map_in_workers(scaled_by_state, [1, 2], closure, workers=2, threads=2)
    )
    assert results == [(2.0, 2), (4.0, 2)]


def scaled_by_state(state, job):
    return state() * job, torch.get_num_threads()


def test_map_in_workers_refuses_no_workers():
    with pytest.raises(ValueError, match="'workers' must be at least 1"):
        list(map_in_workers(seeded_draw, [1], 0.0, workers=0))
