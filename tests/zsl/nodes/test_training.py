import pytest
import torch

import apnet_pyg.zsl.train as nodes_train
from apnet_pyg.zsl.nodes.inputs import NodeTask
from apnet_pyg.zsl.nodes.scores import NodeScores
from apnet_pyg.zsl.nodes.training import record_scores, train_node_model
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
