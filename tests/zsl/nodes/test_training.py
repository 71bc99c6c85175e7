import multiprocessing

import pytest
import torch

import apnet_pyg.scripting as scripting
import apnet_pyg.zsl.train as nodes_train
from apnet_pyg.zsl.nodes.inputs import NodeTask
from apnet_pyg.zsl.nodes.scores import NodeScores
from apnet_pyg.zsl.nodes.training import (
    available_cores,
    record_runs,
    record_scores,
    train_node_model,
)
from tests.helpers.zero_shot_nodes import TINY_NODES


def test_task_and_deterministic_training(tiny):
    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', TINY_NODES)
    y = nodes.data.y
    assert set(y[task.seen_nodes].tolist()) == {0, 1}
    assert set(y[task.val_nodes].tolist()) == {2, 3}
    assert set(y[task.unseen_nodes].tolist()) == {4, 5, 6}
    first, _ = train_node_model(task, seed=3, epochs=2)
    second, _ = train_node_model(task, seed=3, epochs=2)
    for (name, a), (_, b) in zip(
        first.state_dict().items(), second.state_dict().items()
    ):
        assert torch.equal(a, b), name


def test_training_against_every_class(tiny, monkeypatch):
    # candidates='all': the seen nodes are scored against every other
    # class too, validation and unseen alike; never a node of theirs.
    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', TINY_NODES.replace(candidates='all'))
    calls = []
    train_model = nodes_train.train_model

    def recording(model, data, images, classes, config, **kwargs):
        calls.append((images, classes, kwargs['negative_classes']))
        return train_model(model, data, images, classes, config, **kwargs)

    monkeypatch.setattr(nodes_train, 'train_model', recording)
    train_node_model(task, seed=0, epochs=1)
    ((images, classes, negatives),) = calls
    assert torch.equal(classes, split.seen)
    assert torch.equal(negatives, torch.cat([split.val, split.unseen]))
    assert set(nodes.data.y[images % nodes.data.y.numel()].tolist()) == set(
        split.seen.tolist()
    )
    assert 'candidates=all' in task.setting.describe()


def test_record_scores_after_chosen_epochs(tiny, monkeypatch):
    # One run, recorded after epochs 1 and 3: the calibrated scores of
    # every node a model trained that long on its own gives; the held-out
    # nodes never trained on.
    _, nodes = tiny
    split = nodes.split('II')
    held_out = torch.tensor([0, 5, 13])
    task = NodeTask(nodes, split, 'text', TINY_NODES, held_out=held_out)
    classes = {'val': split.val, 'unseen': split.unseen}
    images = []
    train_model = nodes_train.train_model

    def recording(model, data, trained, *args, **kwargs):
        images.append(trained)
        return train_model(model, data, trained, *args, **kwargs)

    monkeypatch.setattr(nodes_train, 'train_model', recording)
    recorded = record_scores(task, 2, classes, [3, 1])
    (trained,) = images
    assert not bool(torch.isin(trained, held_out).any())
    n = nodes.data.y.numel()
    assert recorded['val'].shape == (2, n, 2)
    assert recorded['unseen'].shape == (2, n, 3)
    for position, epochs in enumerate((1, 3)):
        model, _ = train_node_model(task, 2, epochs)
        scores = NodeScores(model, task)
        for name, chosen in classes.items():
            torch.testing.assert_close(
                recorded[name][position], scores.every_node(chosen)
            )
    with pytest.raises(ValueError, match="'at' must hold positive epoch"):
        record_scores(task, 0, classes, [0, 1])


@pytest.mark.parametrize('method', ['fork', 'spawn'])
def test_record_runs_in_workers_equal_one_process(tiny, monkeypatch, method):
    # Each run is seeded on its own: side by side in worker processes
    # (forked, or spawned as where the platform cannot fork) they give the
    # very scores of the runs one after another, in the seeds' order.
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f'this platform has no {method!r} start method')
    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', TINY_NODES)
    classes = {'val': split.val, 'unseen': split.unseen}
    alone = record_runs(task, [2, 0, 1], classes, [1, 2])
    assert len(alone) == 3
    torch.testing.assert_close(
        alone[0]['val'], record_scores(task, 2, classes, [1, 2])['val']
    )
    monkeypatch.setattr(
        scripting.multiprocessing,
        'get_all_start_methods',
        lambda: [method],
    )
    threads = torch.get_num_threads()
    side_by_side = record_runs(task, [2, 0, 1], classes, [1, 2], workers=2)
    assert torch.get_num_threads() == threads  # this process's, unchanged
    assert len(side_by_side) == 3
    for a, b in zip(alone, side_by_side):
        assert a.keys() == b.keys()
        for name in a:
            assert torch.equal(a[name], b[name]), name
    with pytest.raises(ValueError, match="'workers' must be at least 1"):
        record_runs(task, [0], classes, [1], workers=0)


def test_available_cores():
    assert 1 <= available_cores() <= (multiprocessing.cpu_count() or 1)
