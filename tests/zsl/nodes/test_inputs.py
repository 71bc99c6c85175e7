import pytest
import torch

from apnet_pyg.zsl.nodes.inputs import (
    NodeSetting,
    NodeTask,
    hop_features,
    prepare_descriptions,
    propagate_features,
    scale_features,
)
from tests.helpers.zero_shot_nodes import TINY_NODES, dense_graph


def test_scale_features():
    x = torch.tensor([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    assert torch.equal(
        scale_features(x, 'row'),
        torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]]),
    )
    assert torch.equal(scale_features(x, 'raw'), x)
    with pytest.raises(ValueError, match="'features' must be one of"):
        scale_features(x, 'l1')


def _reference_step(ref, adj, propagation, temperature):
    # One propagation step in float64: the (attention-)weighted mean over
    # the node and its neighbours.
    if propagation == 'mean':
        weight = adj
    else:
        unit = torch.nn.functional.normalize(ref, dim=1)
        weight = adj * torch.exp(temperature * unit @ unit.t())
    return (weight / weight.sum(1, keepdim=True)) @ ref


@pytest.mark.parametrize('propagation', ['none', 'mean', 'attention'])
def test_propagation_matches_float64_reference(tiny, propagation):
    _, nodes = tiny
    x = scale_features(nodes.data.x, 'row')
    out = propagate_features(
        x, nodes.data.edge_index, propagation, hops=2, temperature=5.0
    )
    adj = dense_graph(nodes.data.edge_index, x.size(0))
    ref = x.double()
    if propagation != 'none':
        for _ in range(2):
            ref = _reference_step(ref, adj, propagation, 5.0)
    assert torch.allclose(out.double(), ref, atol=1e-6)


@pytest.mark.parametrize('propagation', ['mean', 'attention'])
def test_hop_features_match_float64_reference(tiny, propagation):
    _, nodes = tiny
    x = scale_features(nodes.data.x, 'row')
    out = hop_features(
        x, nodes.data.edge_index, propagation, hops=3, temperature=5.0
    )
    assert out.shape == (4,) + tuple(x.shape)
    assert torch.equal(out[0], x)
    adj = dense_graph(nodes.data.edge_index, x.size(0))
    ref = x.double()
    for k in range(1, 4):
        ref = _reference_step(ref, adj, propagation, 5.0)
        assert torch.allclose(out[k].double(), ref, atol=1e-6), k
    with pytest.raises(
        ValueError,
        match="'propagation' must be one of "
        'mean, attention to score at several hops',
    ):
        hop_features(x, nodes.data.edge_index, 'none')


def test_prepare_descriptions():
    s = torch.randn(7, 12, generator=torch.Generator().manual_seed(0)) + 5
    for kind in ('l2', 'center', 'whiten'):
        out = prepare_descriptions(s, kind)
        assert torch.allclose(out.norm(dim=1), torch.ones(7), atol=1e-6)
    centred = s.double() - s.double().mean(0)
    unit = torch.nn.functional.normalize(centred, dim=1)
    assert torch.allclose(
        prepare_descriptions(s, 'center').double(), unit, atol=1e-6
    )
    # Whitened in their span: C - 1 coordinates, all pairs at cosine
    # -1 / (C - 1) (the vertices of a regular simplex).
    white = prepare_descriptions(s, 'whiten').double()
    assert white.shape == (7, 6)
    gram = white @ white.t()
    off = gram[~torch.eye(7, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, -1 / 6), atol=1e-6)
    with pytest.raises(ValueError, match="'descriptions' must be one of"):
        prepare_descriptions(s, 'pca')


def test_bad_setting():
    with pytest.raises(ValueError, match="'propagation' must be one of"):
        NodeSetting(propagation='gcn')
    with pytest.raises(ValueError, match="'hops' must be a positive"):
        NodeSetting(hops=0)
    with pytest.raises(ValueError, match="'lr' must be positive"):
        NodeSetting().replace(lr=0.0)
    with pytest.raises(
        ValueError, match="'scoring'='hops' needs a propagation"
    ):
        NodeSetting(propagation='none')
    with pytest.raises(ValueError, match="'calibration' must be one of"):
        NodeSetting(calibration='zscore')
    with pytest.raises(ValueError, match="'scoring' must be one of"):
        NodeSetting(scoring='all')
    with pytest.raises(ValueError, match="'candidates' must be one of"):
        NodeSetting(candidates='unseen')
    with pytest.raises(ValueError, match="'smoothing' must be one of"):
        NodeSetting(smoothing='gcn')
    with pytest.raises(ValueError, match="'refinement' must be one of"):
        NodeSetting(refinement='kmeans')
    for name in ('smoothing_steps', 'ensemble'):
        with pytest.raises(ValueError, match=f"'{name}' must be a positive"):
            NodeSetting(**{name: 0})
        with pytest.raises(ValueError, match=f"'{name}' must be a positive"):
            NodeSetting(**{name: True})
    with pytest.raises(ValueError, match="'smoothing_temperature' must be"):
        NodeSetting(smoothing_temperature=-1.0)


def test_readings_share_the_training():
    # Smoothing and ensembles change how scores are read, not training:
    # the training key ignores them, the key and the description do not.
    read = TINY_NODES.replace(
        smoothing='attention',
        smoothing_steps=64,
        smoothing_temperature=2.0,
        ensemble=2,
    )
    assert read.training_key() == TINY_NODES.training_key()
    assert read.key() != TINY_NODES.key()
    assert read.describe().endswith(
        ', scores smoothed: attention (gamma=2) x 64, ensemble of 2 seeds'
    )
    refined = read.replace(refinement='prototypes')
    assert refined.training_key() == TINY_NODES.training_key()
    assert refined.key() != read.key()
    assert refined.describe().endswith(
        'ensemble of 2 seeds, prototypes refined (k-means over the nodes '
        'scored)'
    )
    assert (
        TINY_NODES.replace(smoothing='mean')
        .describe()
        .endswith(', scores smoothed: mean x 16')
    )
    assert 'smoothed' not in TINY_NODES.describe()
    trained_otherwise = TINY_NODES.replace(graph='knn')
    assert trained_otherwise.training_key() != TINY_NODES.training_key()
    assert 'graph=knn (k=2, no self-loop, over the descriptions of every ' in (
        trained_otherwise.describe()
    )
    learned = trained_otherwise.replace(
        knn_loop=True, knn_space='encoded', learn_propagation_temperature=True
    )
    assert (
        'graph=knn (k=2, self-loops, over the encoded of every class), '
        'gamma1 learned from 10' in learned.describe()
    )


def test_task_holds_out_nodes(tiny):
    # Nodes held out (generalized zero-shot's seen test nodes) are never
    # among the nodes trained on, at any hop.
    _, nodes = tiny
    split = nodes.split('II')
    whole = NodeTask(nodes, split, 'text', TINY_NODES)
    held_out = whole.seen_nodes[::3]
    task = NodeTask(nodes, split, 'text', TINY_NODES, held_out=held_out)
    assert torch.equal(
        task.seen_nodes,
        whole.seen_nodes[~torch.isin(whole.seen_nodes, held_out)],
    )
    n = nodes.data.y.numel()
    trained = task.dataset.trainval_loc % n
    assert not bool(torch.isin(trained, held_out).any())
    assert trained.numel() == (TINY_NODES.hops + 1) * task.seen_nodes.numel()
    assert torch.equal(task.unseen_nodes, whole.unseen_nodes)


def test_propagated_features_are_the_last_hop(tiny):
    _, nodes = tiny
    split = nodes.split('II')
    n = nodes.data.y.numel()
    hops = NodeTask(nodes, split, 'text', TINY_NODES)
    assert torch.equal(
        hops.propagated_features, hops.features[TINY_NODES.hops * n :]
    )
    single = NodeTask(
        nodes, split, 'text', TINY_NODES.replace(scoring='single')
    )
    assert torch.equal(single.propagated_features, single.features)
    assert torch.allclose(
        single.propagated_features, hops.propagated_features, atol=1e-6
    )
