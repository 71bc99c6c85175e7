import pytest
import torch

import apnet_pyg.zsl.train as nodes_train
from apnet_pyg.zsl.baselines.eszsl import eszsl_scores, fit_eszsl
from apnet_pyg.zsl.evaluate import GZSLScores
from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy
from apnet_pyg.zsl.nodes.closed_form import DGPN_INPUTS, closed_form_parts
from apnet_pyg.zsl.nodes.gzsl import (
    apnet_gzsl,
    closed_form_gzsl,
    gzsl_test_nodes,
    gzsl_test_split,
    pooled_gzsl_scores,
    validation_nodes,
)
from apnet_pyg.zsl.nodes.inputs import scale_features
from apnet_pyg.zsl.nodes.scores import ScoreSmoother
from tests.helpers.zero_shot_nodes import TINY_NODES, relabel_unseen


def test_test_nodes_are_a_fixed_share_of_every_class(tiny):
    _, nodes = tiny
    y = nodes.data.y
    test_nodes = gzsl_test_nodes(nodes)
    assert torch.equal(test_nodes, gzsl_test_nodes(nodes))  # fixed seed
    assert torch.equal(test_nodes, test_nodes.sort().values)
    # 20% of each class's 12 nodes, rounded: 2.
    assert torch.bincount(y[test_nodes]).tolist() == [2] * 7
    split = nodes.split('I')
    seen_test, unseen_test = gzsl_test_split(nodes, split, test_nodes)
    assert set(y[seen_test].tolist()) == {0, 1, 2}
    assert bool(torch.isin(seen_test, test_nodes).all())
    # Every node of an unseen class is an unseen test node.
    assert torch.equal(
        unseen_test, torch.isin(y, split.unseen).nonzero()[:, 0]
    )


def test_validation_task_reads_no_test_node(tiny):
    _, nodes = tiny
    y = nodes.data.y
    split = nodes.split('II')
    test_nodes = gzsl_test_nodes(nodes)
    held_out, seen_val, unseen_val = validation_nodes(nodes, split, test_nodes)
    for index in (seen_val, unseen_val):
        assert not bool(torch.isin(index, test_nodes).any())
    # 20% of the 10 seen nodes a class keeps: 2; the validation classes'
    # nodes less their test share.
    assert (
        torch.bincount(y[seen_val], minlength=7).tolist() == [2, 2] + [0] * 5
    )
    assert torch.bincount(y[unseen_val], minlength=7)[2:4].tolist() == [10, 10]
    assert set(y[unseen_val].tolist()) == {2, 3}
    assert torch.equal(held_out, torch.cat([test_nodes, seen_val]).unique())
    with pytest.raises(ValueError, match='no validation class'):
        validation_nodes(nodes, nodes.split('I'), test_nodes)


def test_pooled_scores_are_the_mean_of_the_models(tiny):
    # Pooled copies of one node set: per-class accuracies (hence the
    # calibration's criterion) are the mean over the models'.
    _, nodes = tiny
    y = nodes.data.y
    split = nodes.split('II')
    seen_nodes = torch.isin(y, split.seen).nonzero()[:, 0][::2]
    unseen_nodes = torch.isin(y, split.unseen).nonzero()[:, 0]
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(3, y.numel(), 5, generator=generator)
    pooled = pooled_gzsl_scores(
        scores, y, seen_nodes, unseen_nodes, split.seen, split.unseen
    )
    alone = [
        GZSLScores(
            lambda index, classes, s=s: s[index],
            y,
            seen_nodes,
            unseen_nodes,
            split.seen,
            split.unseen,
        )
        for s in scores
    ]
    for constant in (0.0, 0.7):
        figures = pooled.accuracies(constant)
        for key in ('seen', 'unseen'):
            assert figures[key] == pytest.approx(
                sum(a.accuracies(constant)[key] for a in alone) / 3
            )


def test_closed_form_gzsl_is_the_direct_computation(tiny):
    _, nodes = tiny
    y = nodes.data.y
    split = nodes.split('II')
    test_nodes = gzsl_test_nodes(nodes)

    def fit(x, labels, s, classes):
        return fit_eszsl(x, labels, s, classes, 1.0, 1.0)

    out = closed_form_gzsl(
        nodes, 'text', DGPN_INPUTS, [split], fit, eszsl_scores, split
    )
    x, _, s, task = closed_form_parts(
        nodes, split, 'text', DGPN_INPUTS, test_nodes
    )
    assert not bool(torch.isin(task.seen_nodes, test_nodes).any())
    weights = fit(x[task.seen_nodes], y[task.seen_nodes], s, split.seen)
    classes = torch.cat([split.seen, split.unseen])
    seen_test, unseen_test = gzsl_test_split(nodes, split, test_nodes)
    prediction = classes[eszsl_scores(weights, x, s, classes).argmax(1)]
    seen = 100 * per_class_accuracy(
        prediction[seen_test], y[seen_test], split.seen
    )
    unseen = 100 * per_class_accuracy(
        prediction[unseen_test], y[unseen_test], split.unseen
    )
    figures = out['splits']['II']
    assert figures['seen'] == pytest.approx(seen)
    assert figures['unseen'] == pytest.approx(unseen)
    assert figures['h'] == pytest.approx(harmonic_mean(seen, unseen))
    assert out['calibration'] is not None and 'cal_h' in figures
    raw = closed_form_gzsl(
        nodes, 'text', DGPN_INPUTS, [split], fit, eszsl_scores, None
    )
    assert raw['calibration'] is None and 'cal_h' not in raw['splits']['II']


def test_apnet_gzsl_trains_on_no_test_node(tiny, monkeypatch):
    # The models never see a test node; the calibration constant reads no
    # unseen label (the unseen classes' labels permuted: the same).
    _, nodes = tiny
    split = nodes.split('II')
    test_nodes = gzsl_test_nodes(nodes)
    n = nodes.data.y.numel()
    trained = []
    train_model = nodes_train.train_model

    def recording(model, data, images, *args, **kwargs):
        trained.append(images % n)
        return train_model(model, data, images, *args, **kwargs)

    monkeypatch.setattr(nodes_train, 'train_model', recording)
    setting = TINY_NODES.replace(
        smoothing='mean', smoothing_steps=2, ensemble=2
    )
    smoother = ScoreSmoother(
        nodes.data.edge_index, scale_features(nodes.data.x, 'row')
    )
    outs = [
        apnet_gzsl(
            data,
            'text',
            setting,
            1,
            [split],
            [0, 1, 2, 3],
            [0, 1],
            split,
            smoother,
        )
        for data in (nodes, relabel_unseen(nodes))
    ]
    assert len(trained) == 2 * (2 + 4)
    for images in trained:
        assert not bool(torch.isin(images, test_nodes).any())
    assert outs[0]['calibration'] == outs[1]['calibration']
    figures = outs[0]['splits']['II']
    assert figures['seeds'] == 2  # two ensembles of two models
    for key in ('seen', 'unseen', 'h', 'cal_seen', 'cal_unseen', 'cal_h'):
        assert 0.0 <= figures[key] <= 100.0
