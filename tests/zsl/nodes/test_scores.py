import pytest
import torch

from apnet_pyg.nn.conv.apnet_conv import APNetConv
from apnet_pyg.zsl.evaluate import apnet_score_fn
from apnet_pyg.zsl.nodes.inputs import (
    NodeTask,
    hop_features,
    propagate_features,
    scale_features,
)
from apnet_pyg.zsl.nodes.scores import (
    NodeScores,
    PrototypeRefiner,
    ScoreSmoother,
    combine_hop_scores,
    ensembles,
    evaluated_scores,
    read_scores,
    setting_scores,
    spherical_kmeans,
)
from apnet_pyg.zsl.nodes.training import train_node_model
from tests.helpers.zero_shot_nodes import TINY_NODES, dense_graph


def test_combine_hop_scores_matches_float64_reference():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(
        3, 5, 4, generator=gen, dtype=torch.double, requires_grad=True
    )
    offsets = torch.randn(
        3, 4, generator=gen, dtype=torch.double, requires_grad=True
    )
    out = combine_hop_scores(scores, offsets)
    ref = torch.zeros(5, 4, dtype=torch.double)
    for k in range(3):
        for i in range(5):
            for c in range(4):
                ref[i, c] += (scores[k, i, c] - offsets[k, c]).item() / 3
    assert torch.allclose(out, ref, atol=1e-12)
    assert torch.allclose(combine_hop_scores(scores), scores.mean(0))
    # Gradient: d out[i, c] / d scores[k, i, c] = 1 / 3, and -1 / 3 summed
    # over the nodes for the offsets.
    out.sum().backward()
    assert torch.allclose(scores.grad, torch.full_like(scores, 1 / 3))
    assert torch.allclose(offsets.grad, torch.full_like(offsets, -5 / 3))
    assert torch.autograd.gradcheck(combine_hop_scores, (scores, offsets))
    scales = torch.rand(3, 4, generator=gen, dtype=torch.double) + 0.5
    ref = sum((scores[k] - offsets[k]) / scales[k] for k in range(3)) / 3
    assert torch.allclose(
        combine_hop_scores(scores, offsets, scales), ref, atol=1e-12
    )
    scales.requires_grad_()
    assert torch.autograd.gradcheck(
        combine_hop_scores, (scores, offsets, scales)
    )
    with pytest.raises(ValueError, match="'scales' must be positive"):
        combine_hop_scores(scores, offsets, -scales)
    with pytest.raises(ValueError, match="'scores' must be"):
        combine_hop_scores(scores[0])
    with pytest.raises(ValueError, match="'offsets' must be"):
        combine_hop_scores(scores, offsets[:2])


def test_hop_task_and_calibrated_scores(tiny):
    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', TINY_NODES)
    n = nodes.data.y.numel()
    hops = hop_features(
        scale_features(nodes.data.x, 'row'),
        nodes.data.edge_index,
        'mean',
        TINY_NODES.hops,
    )
    # Image k N + i is node i after k steps, with node i's label; training
    # draws every hop of the seen classes' nodes.
    assert task.num_hops == TINY_NODES.hops + 1
    assert torch.equal(task.dataset.features, hops.flatten(0, 1))
    assert torch.equal(
        task.dataset.labels, nodes.data.y.repeat(TINY_NODES.hops + 1)
    )
    assert (
        task.dataset.trainval_loc.numel()
        == (TINY_NODES.hops + 1) * task.seen_nodes.numel()
    )
    assert torch.equal(
        task.dataset.trainval_loc % n,
        task.seen_nodes.repeat(TINY_NODES.hops + 1),
    )
    model, _ = train_node_model(task, seed=0, epochs=1)
    every = torch.arange(n)
    classes = split.unseen
    calibrated = NodeScores(model, task)(every, classes).double()
    # Centred: every class's calibrated score has mean 0 over the nodes.
    zero = torch.zeros(3, dtype=torch.double)
    assert torch.allclose(calibrated.mean(0), zero, atol=1e-5)
    # Against the model's plain logits at each hop, in float64.
    apnet = apnet_score_fn(model, task.dataset)
    ref = torch.zeros(n, 3, dtype=torch.double)
    for k in range(TINY_NODES.hops + 1):
        logits = apnet(every + k * n, classes).double()
        ref += (logits - logits.mean(0)) / (TINY_NODES.hops + 1)
    assert torch.allclose(calibrated, ref, atol=1e-4)
    plain = NodeTask(
        nodes, split, 'text', TINY_NODES.replace(calibration='none')
    )
    uncalibrated = NodeScores(model, plain)(every[:5], classes).double()
    mean_logits = sum(
        apnet(every[:5] + k * n, classes).double()
        for k in range(TINY_NODES.hops + 1)
    ) / (TINY_NODES.hops + 1)
    assert torch.allclose(uncalibrated, mean_logits, atol=1e-5)
    standard = NodeTask(
        nodes, split, 'text', TINY_NODES.replace(calibration='standardize')
    )
    standardized = NodeScores(model, standard)(every, classes).double()
    ref = torch.zeros(n, 3, dtype=torch.double)
    for k in range(TINY_NODES.hops + 1):
        logits = apnet(every + k * n, classes).double()
        ref += (
            (logits - logits.mean(0)) / logits.std(0) / (TINY_NODES.hops + 1)
        )
    assert torch.allclose(standardized, ref, atol=1e-3)


def _scores(num_nodes, *shape, seed=0):
    return torch.randn(
        num_nodes, *shape, generator=torch.Generator().manual_seed(seed)
    )


def test_mean_smoothing_is_apnetconv_at_temperature_zero(tiny):
    # K steps of the mean over a node and its neighbours: APNetConv's
    # propagation at temperature 0 (the node features' 'mean'), and the
    # float64 random walk (A + I) / degree, K times.
    _, nodes = tiny
    n = nodes.data.y.numel()
    smoother = ScoreSmoother(
        nodes.data.edge_index, scale_features(nodes.data.x, 'row')
    )
    scores = _scores(n, 3)
    out = smoother(scores, 'mean', 5)
    torch.testing.assert_close(
        out,
        propagate_features(scores, nodes.data.edge_index, 'mean', 5),
        rtol=1e-5,
        atol=1e-6,
    )
    adj = dense_graph(nodes.data.edge_index, n)
    walk = adj / adj.sum(1, keepdim=True)
    reference = torch.linalg.matrix_power(walk, 5) @ scores.double()
    torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-6)
    # 'none' reads the scores unchanged.
    assert smoother(scores, 'none', 5) is scores


def test_attention_smoothing_weights_by_the_node_features(tiny):
    # One step: the mean over a node and its neighbours weighted by
    # exp(gamma cos(x_i, x_j)) of the node features (APNetConv's
    # attention over them), applied to the scores; K steps: K times.
    _, nodes = tiny
    n = nodes.data.y.numel()
    x = scale_features(nodes.data.x, 'row')
    smoother = ScoreSmoother(nodes.data.edge_index, x)
    unit = torch.nn.functional.normalize(x.double(), dim=1)
    weight = dense_graph(nodes.data.edge_index, n) * torch.exp(
        2.0 * unit @ unit.t()
    )
    step = weight / weight.sum(1, keepdim=True)
    scores = _scores(n, 4, seed=1)
    for k in (1, 3):
        torch.testing.assert_close(
            smoother(scores, 'attention', k, temperature=2.0).double(),
            torch.linalg.matrix_power(step, k) @ scores.double(),
            rtol=1e-5,
            atol=1e-6,
        )
    # The attention is APNetConv's own over the features:
    conv = APNetConv(
        x.size(1),
        proj_channels=None,
        temperature=2.0,
        learn_temperature=False,
        num_steps=1,
    )
    _, (index, alpha) = conv(
        x, nodes.data.edge_index, return_attention_weights=True
    )
    matrix = smoother.matrix('attention', 2.0).to_dense()
    assert torch.allclose(matrix[index[1], index[0]], alpha)
    with pytest.raises(ValueError, match="'smoothing' must be one of"):
        smoother.matrix('none')
    with pytest.raises(ValueError, match="'scores' must have a row per node"):
        smoother(scores[:-1], 'mean', 2)


def test_smoothing_at_several_steps_continues_one_pass(tiny):
    _, nodes = tiny
    n = nodes.data.y.numel()
    smoother = ScoreSmoother(
        nodes.data.edge_index, scale_features(nodes.data.x, 'row')
    )
    # Any shape after the nodes: each column smoothed alike.
    scores = _scores(n, 2, 3, seed=2)
    several = smoother.at_steps(scores, 'mean', [4, 1, 9])
    assert sorted(several) == [1, 4, 9]
    for k, value in several.items():
        assert value.shape == scores.shape
        torch.testing.assert_close(
            value,
            smoother(scores.reshape(n, -1), 'mean', k).view(scores.shape),
        )


def test_ensembles_and_reading_scores(tiny):
    # Ensembles: consecutive disjoint groups; a reading averages each
    # group's scores, then smooths them (linear: the mean of the smoothed).
    assert ensembles(5, 2) == ((0, 1), (2, 3))
    assert ensembles(4, 1) == ((0,), (1,), (2,), (3,))
    assert ensembles(3, 3) == ((0, 1, 2),)
    with pytest.raises(ValueError, match='needs at least 3 trained models'):
        ensembles(2, 3)
    _, nodes = tiny
    n = nodes.data.y.numel()
    smoother = ScoreSmoother(
        nodes.data.edge_index, scale_features(nodes.data.x, 'row')
    )
    models = _scores(5, 6, n, 3, seed=3)  # models, epochs, nodes, classes
    read = read_scores(models, 2, smoother, 'mean', [2, 6])
    for k in (2, 6):
        assert read[k].shape == (2, 6, n, 3)
        for g, members in enumerate(((0, 1), (2, 3))):
            for epoch in (0, 5):
                smoothed = [
                    smoother(models[m, epoch], 'mean', k) for m in members
                ]
                torch.testing.assert_close(
                    read[k][g, epoch], sum(smoothed) / 2, atol=1e-5, rtol=0
                )
    setting = TINY_NODES.replace(
        smoothing='attention', smoothing_steps=3, ensemble=5
    )
    torch.testing.assert_close(
        setting_scores(models[:, 0], setting, smoother)[0],
        smoother(models[:, 0].mean(0), 'attention', 3),
    )


def _kmeans_reference(features, scores, steps):
    # PrototypeRefiner in float64 and plain loops: seeds from each
    # column's top ceil(n / 2C) nodes, then cosine k-means.
    z = features.double() - features.double().mean(0)
    z = [row / row.norm() for row in z]
    n, num_classes = scores.shape
    top = -(-n // (2 * num_classes))
    prototypes = []
    for c in range(num_classes):
        order = sorted(range(n), key=lambda i: -float(scores[i, c]))[:top]
        mean = sum(z[i] for i in order) / top
        prototypes.append(mean / mean.norm())
    assignment = None
    for _ in range(steps):
        nearest = [
            max(range(num_classes), key=lambda c: float(z[i] @ prototypes[c]))
            for i in range(n)
        ]
        if nearest == assignment:
            break
        assignment = nearest
        for c in range(num_classes):
            members = [z[i] for i in range(n) if nearest[i] == c]
            if members:
                total = sum(members)
                prototypes[c] = total / total.norm()
    return torch.tensor(
        [[float(z[i] @ p) for p in prototypes] for i in range(n)],
        dtype=torch.double,
    )


def _clusters(gen, per_class=12, num_classes=3, channels=6):
    # Well separated clusters around random centres; labels by cluster.
    centres = 4.0 * torch.randn(num_classes, channels, generator=gen)
    labels = torch.arange(num_classes).repeat_interleave(per_class)
    features = centres[labels] + torch.randn(
        labels.numel(), channels, generator=gen
    )
    return features, labels


def test_prototype_refiner_matches_float64_reference():
    gen = torch.Generator().manual_seed(0)
    features, _ = _clusters(gen)
    scores = torch.randn(features.size(0), 3, generator=gen)
    for steps in (1, 2, 20):
        refined = PrototypeRefiner(features, steps)(scores)
        reference = _kmeans_reference(features, scores, steps)
        assert refined.dtype == scores.dtype
        assert torch.allclose(refined.double(), reference, atol=1e-5)


def test_prototype_refiner_names_the_clusters():
    # Scores that rank each class's nodes first in its own column, under
    # offsets that make one class win every argmax (an uncalibrated
    # model): the refinement recovers every node's class, and no column
    # offset changes it.
    gen = torch.Generator().manual_seed(1)
    features, labels = _clusters(gen)
    hint = torch.nn.functional.one_hot(labels, 3).float()
    scores = hint + 0.3 * torch.randn(hint.shape, generator=gen)
    biased = scores + torch.tensor([10.0, 0.0, -3.0])
    assert bool((biased.argmax(1) == 0).all())
    refiner = PrototypeRefiner(features)
    refined = refiner(biased)
    assert torch.equal(refined.argmax(1), labels)
    assert torch.equal(refined, refiner(scores))
    # Cosines: at most one in size.
    assert float(refined.abs().max()) <= 1.0 + 1e-6


def test_prototype_refiner_keeps_a_prototype_without_nodes():
    # Two clusters, three candidate classes: the third class's seed joins
    # no node after the first step and keeps its place.
    gen = torch.Generator().manual_seed(2)
    features, labels = _clusters(gen, num_classes=2)
    scores = torch.nn.functional.one_hot(labels, 3).float()
    scores[:, 2] = torch.arange(labels.numel()).float() / 100
    refined = PrototypeRefiner(features)(scores)
    assert refined.shape == (labels.numel(), 3)
    assert torch.isfinite(refined).all()
    assert set(refined.argmax(1).tolist()) <= {0, 1, 2}


def test_spherical_kmeans_finds_separated_clusters_the_same_every_call():
    gen = torch.Generator().manual_seed(4)
    features, labels = _clusters(gen, num_classes=4)
    z = torch.nn.functional.normalize(features - features.mean(0), dim=1)
    centres = spherical_kmeans(z, 4, steps=20)
    assert torch.allclose(centres.norm(dim=1), torch.ones(4), atol=1e-5)
    found = (z @ centres.T).argmax(1)
    # Each cluster is one class (up to the order of the centres).
    for c in range(4):
        assert found[labels == c].unique().numel() == 1
    assert found.unique().numel() == 4
    assert torch.equal(centres, spherical_kmeans(z, 4, steps=20))
    with pytest.raises(ValueError, match="'num_clusters' must be between"):
        spherical_kmeans(z, z.size(0) + 1, steps=20)


def test_named_clusters_give_every_class_one_cluster():
    # Two columns that rank the same nodes first (the descriptions of
    # two classes nearly parallel): the seeded prototypes coincide, and
    # k-means gives class 0's cluster to class 1 and cluster 1 to class 0.
    # Named clusters give each class its own: class 1 ranks cluster 1
    # above cluster 2, whatever the offsets.
    gen = torch.Generator().manual_seed(5)
    features, labels = _clusters(gen)
    hint = torch.nn.functional.one_hot(labels, 3).float()
    first = 2 * hint[:, 0] + 0.01 * torch.randn(labels.numel(), generator=gen)
    third = hint[:, 2] + 0.01 * torch.randn(labels.numel(), generator=gen)
    scores = torch.stack([first, first + hint[:, 1], third], dim=1)
    refiner = PrototypeRefiner(features)
    assert not torch.equal(refiner(scores).argmax(1), labels)
    named = refiner.name_clusters(scores)
    assert named.shape == scores.shape and named.dtype == scores.dtype
    assert torch.equal(named.argmax(1), labels)
    offset = scores + torch.tensor([5.0, -2.0, 0.0])
    assert torch.equal(refiner.name_clusters(offset), named)
    assert float(named.abs().max()) <= 1.0 + 1e-6


def test_evaluated_scores_and_bad_input():
    gen = torch.Generator().manual_seed(3)
    features, _ = _clusters(gen)
    every = torch.randn(50, 3, generator=gen)
    index = torch.arange(5, 5 + features.size(0))
    assert torch.equal(evaluated_scores(every, index), every[index])
    refiner = PrototypeRefiner(features)
    assert torch.equal(
        evaluated_scores(every, index, 'prototypes', refiner),
        refiner(every[index]),
    )
    assert torch.equal(
        evaluated_scores(every, index, 'clusters', refiner),
        refiner.name_clusters(every[index]),
    )
    with pytest.raises(ValueError, match="needs a 'refiner'"):
        evaluated_scores(every, index, 'clusters')
    with pytest.raises(ValueError, match="'scores' must be"):
        refiner.name_clusters(every)
    with pytest.raises(ValueError, match="'refinement' must be one of"):
        evaluated_scores(every, index, 'kmeans', refiner)
    with pytest.raises(ValueError, match="needs a 'refiner'"):
        evaluated_scores(every, index, 'prototypes')
    with pytest.raises(ValueError, match="'scores' must be"):
        refiner(every)
    with pytest.raises(ValueError, match="'features' must be"):
        PrototypeRefiner(features[0])
    with pytest.raises(ValueError, match="'steps' must be a positive"):
        PrototypeRefiner(features, 0)
