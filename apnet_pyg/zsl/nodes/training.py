r"""The training runs of zero-shot node classification
(:mod:`apnet_pyg.zsl.nodes.protocol`): a fresh APNet trained on a task's
seen nodes (:func:`train_node_model`), and the calibrated scores of every
node against class sets recorded after chosen epochs
(:func:`record_scores`), for many seeds at once in worker processes
(:func:`record_runs`). One run serves every reading of its scores (the
smoothings, the ensembles, the class sets), so settings that differ only
in how scores are read share their runs.
"""

import os
from typing import Dict, List, Sequence, Tuple

import torch
from torch import Tensor

from apnet_pyg.scripting import map_in_workers
from apnet_pyg.zsl.nodes.inputs import NodeTask
from apnet_pyg.zsl.nodes.scores import NodeScores


def train_node_model(
    task: NodeTask,
    seed: int,
    epochs: int,
    on_epoch_end=None,
    device: str = 'cpu',
):
    r"""Trains a fresh APNet (seeded by :obj:`seed`) on the seen classes'
    nodes of :obj:`task` for :obj:`epochs` epochs with
    :func:`~apnet_pyg.zsl.train.train_model` (:obj:`k_shot` capped at the
    smallest seen class's node count); returns the model and its
    history."""
    from apnet_pyg.zsl.factory import build_model
    from apnet_pyg.zsl.train import train_model

    # An episode draws k_shot distinct nodes per class: at most the
    # smallest seen class's size.
    smallest = int(
        torch.bincount(task.nodes.data.y[task.seen_nodes])[
            task.split.seen
        ].min()
    )
    config = task.setting.config.replace(
        seed=seed,
        epochs=epochs,
        k_shot=min(task.setting.config.k_shot, smallest),
    )
    data = task.dataset
    negatives = None
    if task.setting.candidates == 'all':
        every = torch.arange(task.nodes.num_classes)
        negatives = every[~torch.isin(every, task.split.seen)]
    model = build_model(config, data, task.split.seen)
    history = train_model(
        model,
        data,
        task.seen_nodes,
        task.split.seen,
        config,
        device=device,
        progress=False,
        on_epoch_end=on_epoch_end,
        negative_classes=negatives,
    )
    return model, history


def record_scores(
    task: NodeTask,
    seed: int,
    class_sets: Dict[str, Tensor],
    at: Sequence[int],
    device: str = 'cpu',
) -> Dict[str, Tensor]:
    r"""Trains a fresh APNet on :obj:`task` (:func:`train_node_model`,
    seeded by :obj:`seed`) for the largest epoch count of :obj:`at` and,
    after each epoch of :obj:`at`, records the calibrated scores of every
    node of the graph against each class set of :obj:`class_sets`
    (:meth:`~apnet_pyg.zsl.nodes.scores.NodeScores.every_node`).

    Returns:
        dict: By class set name, the scores
        :obj:`[len(at), num_nodes, num_classes]`, in the order of
        :obj:`sorted(set(at))`.
    """
    epochs = sorted(set(int(e) for e in at))
    if not epochs or epochs[0] < 1:
        raise ValueError(
            f"'at' must hold positive epoch counts (got {list(at)})"
        )
    recorded: Dict[str, List[Tensor]] = {name: [] for name in class_sets}

    def record(epoch: int, model) -> Dict[str, float]:
        if epoch in epochs:
            scores = NodeScores(model, task)
            for name, classes in class_sets.items():
                recorded[name].append(scores.every_node(classes))
        return {}

    train_node_model(task, seed, epochs[-1], record, device)
    return {name: torch.stack(values) for name, values in recorded.items()}


def available_cores() -> int:
    r"""The cores this process may run on (its CPU affinity where the
    platform reports one): the default number of workers of
    :func:`record_runs` in :obj:`apnet-zsl nodes`."""
    if hasattr(os, 'sched_getaffinity'):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _recorded_run(task: NodeTask, job: Tuple) -> Dict[str, Tensor]:
    # The scores travel back from a worker as arrays (no shared-memory
    # handles to keep alive).
    seed, class_sets, at = job
    recorded = record_scores(task, seed, class_sets, at)
    return {name: values.numpy() for name, values in recorded.items()}


def record_runs(
    task: NodeTask,
    seeds: Sequence[int],
    class_sets: Dict[str, Tensor],
    at: Sequence[int],
    workers: int = 1,
) -> List[Dict[str, Tensor]]:
    r""":func:`record_scores` of :obj:`task` for every seed of
    :obj:`seeds`, in their order: in this process, or with
    :obj:`workers > 1` in that many worker processes (forked where the
    platform can, spawned elsewhere) of one torch thread each, each given
    :obj:`task` once. Every run is seeded on its own, so the results are
    those of the runs one after another in this process at one torch
    thread, for any :obj:`workers` (tested); only the wall clock
    changes."""
    seeds = [int(seed) for seed in seeds]
    at = [int(epoch) for epoch in at]
    jobs = [(seed, dict(class_sets), at) for seed in seeds]
    return [
        {name: torch.from_numpy(values) for name, values in run.items()}
        for run in map_in_workers(_recorded_run, jobs, task, workers)
    ]
