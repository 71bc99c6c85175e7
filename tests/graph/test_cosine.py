import math

import pytest
import torch
import torch.nn.functional as F

from apnet_pyg.graph import (
    COS_40_DEGREES,
    cosine_knn_graph,
    cosine_threshold_graph,
)


def similarity(x):
    h = F.normalize(x, dim=-1)
    return h @ h.t()


def edge_set(edge_index):
    return set(map(tuple, edge_index.t().tolist()))


def test_cos_40_degrees():
    assert COS_40_DEGREES == pytest.approx(
        math.cos(math.radians(40)), rel=1e-15
    )


@pytest.mark.parametrize('loop', [True, False])
def test_cosine_threshold_graph(loop, device):
    x = torch.randn(40, 3, generator=torch.Generator().manual_seed(0))
    x = x.to(device)
    edge_index = cosine_threshold_graph(x, loop=loop)
    assert edge_index.device == device
    sim = similarity(x)
    expected = sim >= COS_40_DEGREES
    expected.fill_diagonal_(loop)
    assert edge_set(edge_index) == edge_set(expected.nonzero().t())
    assert edge_index.size(1) == len(edge_set(edge_index))  # no repeats
    # Sorted by source, then target; undirected:
    key = edge_index[0] * 40 + edge_index[1]
    assert bool((key[1:] > key[:-1]).all())
    assert edge_set(edge_index) == edge_set(edge_index.flip(0))


def test_cosine_threshold_graph_chunks_and_batch(device):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(30, 4, generator=generator).to(device)
    full = cosine_threshold_graph(x, threshold=0.3, loop=True)
    for chunk_size in [1, 7, 100]:
        assert torch.equal(
            cosine_threshold_graph(x, 0.3, loop=True, chunk_size=chunk_size),
            full,
        )

    batch = torch.tensor([0] * 10 + [1] * 12 + [2] * 8, device=device)
    edge_index = cosine_threshold_graph(x, 0.3, batch)
    expected = (similarity(x) >= 0.3) & (batch[:, None] == batch[None, :])
    expected.fill_diagonal_(False)  # loop=False by default, as in PyG
    assert edge_set(edge_index) == edge_set(expected.nonzero().t())

    # An unsorted batch vector gives the same graph:
    # (node k of the permuted input is node perm[k] of the original).
    perm = torch.randperm(30, generator=generator).to(device)
    permuted = cosine_threshold_graph(x[perm], 0.3, batch=batch[perm])
    assert edge_set(perm[permuted]) == edge_set(edge_index)


def test_cosine_threshold_graph_non_positive_threshold():
    x = torch.randn(12, 3, generator=torch.Generator().manual_seed(2))
    for threshold in [0.0, -0.5, -1.0]:
        edge_index = cosine_threshold_graph(x, threshold, loop=False)
        expected = similarity(x) >= threshold
        expected.fill_diagonal_(False)
        assert edge_set(edge_index) == edge_set(expected.nonzero().t())


def test_cosine_threshold_graph_identical_rows_at_threshold_one():
    # Rounding puts the float32 cosine of identical rows below 1 (down to
    # 1 - 5 eps); the tolerance keeps their edges at threshold 1.0.
    rows = torch.randn(200, 1, 85, generator=torch.Generator().manual_seed(0))
    rounded_below_one = 0
    for row in rows:
        x = row.repeat(3, 1)
        h = torch.nn.functional.normalize(x, dim=-1)
        rounded_below_one += bool(((h @ h.t()) < 1).any())
        edge_index = cosine_threshold_graph(x, 1.0)
        assert edge_index.size(1) == 6  # Every ordered pair of the three.
    assert rounded_below_one > 0  # The case the tolerance is for occurs.
    # Distinct rows still stay apart at 1.0:
    x = torch.tensor([[1.0, 0.0], [1.0, 1e-2]])  # cosine 1 - 5e-5
    assert cosine_threshold_graph(x, 1.0).numel() == 0


def test_cosine_threshold_graph_zero_rows_and_empty():
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    edge_index = cosine_threshold_graph(x, loop=False)
    assert edge_set(edge_index) == {(1, 2), (2, 1)}
    assert cosine_threshold_graph(torch.zeros(0, 3), loop=True).size() == (
        2,
        0,
    )


def test_cosine_threshold_graph_bad_input():
    x = torch.randn(5, 3)
    with pytest.raises(ValueError, match='threshold'):
        cosine_threshold_graph(x, threshold=1.5)
    with pytest.raises(ValueError, match='NaN'):
        cosine_threshold_graph(torch.full((3, 2), math.nan))
    with pytest.raises(ValueError, match='2 dimensions'):
        cosine_threshold_graph(torch.randn(5))
    with pytest.raises(ValueError, match="'batch' must have shape"):
        cosine_threshold_graph(x, batch=torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match='integer'):
        cosine_threshold_graph(x, batch=torch.zeros(5))


@pytest.mark.parametrize('loop', [True, False])
def test_cosine_knn_graph(loop, device):
    x = torch.randn(25, 4, generator=torch.Generator().manual_seed(3))
    x = x.to(device)
    sim = similarity(x)
    if not loop:
        sim.fill_diagonal_(-math.inf)
    neighbours = sim.topk(5, dim=1).indices

    edge_index = cosine_knn_graph(x, 5, loop=loop)
    expected = {(int(j), i) for i in range(25) for j in neighbours[i]}
    assert edge_set(edge_index) == expected
    # Every node is the target of exactly k edges:
    assert torch.bincount(edge_index[1], minlength=25).tolist() == [5] * 25
    assert bool((edge_index[0] == edge_index[1]).any()) == loop
    key = edge_index[0] * 25 + edge_index[1]
    assert bool((key[1:] > key[:-1]).all())  # sorted, no repeats

    # The other flow: every node is the source of k edges.
    reverse = cosine_knn_graph(x, 5, loop=loop, flow='target_to_source')
    assert edge_set(reverse) == {(i, j) for j, i in expected}


@pytest.mark.parametrize('k', [1, 3, 30])
def test_cosine_knn_adjacency_is_the_graph_as_a_matrix(k, device):
    # The dense form (row = target) of the k-NN graph without self-loops;
    # k above N - 1 connects every other row.
    from torch_geometric.utils import to_dense_adj

    from apnet_pyg.graph.cosine import cosine_knn_adjacency

    x = torch.randn(12, 5, generator=torch.Generator().manual_seed(6))
    x = x.to(device)
    adjacency = cosine_knn_adjacency(x, k)
    assert adjacency.dtype == torch.bool and adjacency.shape == (12, 12)
    expected = to_dense_adj(cosine_knn_graph(x, k), max_num_nodes=12)[0]
    assert torch.equal(adjacency, expected.t().bool())
    assert adjacency.sum(dim=1).tolist() == [min(k, 11)] * 12
    with pytest.raises(ValueError, match="'k' must be a positive integer"):
        cosine_knn_adjacency(x, 0)


def test_cosine_knn_graph_signature_matches_knn_graph():
    # knn_graph(x, k, batch=None, loop=False, flow='source_to_target', ...)
    import inspect

    from torch_geometric.nn import knn_graph

    ours = inspect.signature(cosine_knn_graph).parameters
    theirs = inspect.signature(knn_graph).parameters
    assert list(ours)[:5] == list(theirs)[:5]
    for name in ['batch', 'loop', 'flow']:
        assert ours[name].default == theirs[name].default


def test_cosine_knn_graph_chunks_and_batch(device):
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(20, 4, generator=generator).to(device)
    full = cosine_knn_graph(x, 3)
    assert torch.equal(cosine_knn_graph(x, 3, chunk_size=3), full)

    batch = torch.tensor([0] * 12 + [1] * 6 + [2] * 2, device=device)
    edge_index = cosine_knn_graph(x, 3, batch)
    assert bool((batch[edge_index[0]] == batch[edge_index[1]]).all())
    # The two-node graph has only one candidate per node:
    in_degree = torch.bincount(edge_index[1], minlength=20)
    assert in_degree.tolist() == [3] * 18 + [1] * 2
    for graph in range(3):
        nodes = (batch == graph).nonzero().view(-1)
        alone = cosine_knn_graph(x[nodes], 3)
        mask = batch[edge_index[0]] == graph
        assert edge_set(edge_index[:, mask]) == edge_set(nodes[alone])


def test_cosine_knn_graph_bad_input():
    with pytest.raises(ValueError, match="'k' must be a positive integer"):
        cosine_knn_graph(torch.randn(4, 2), 0)
    with pytest.raises(ValueError, match="'k' must be a positive integer"):
        cosine_knn_graph(torch.randn(4, 2), 2.5)
    with pytest.raises(ValueError, match='NaN'):
        cosine_knn_graph(torch.full((3, 2), math.inf), 2)
    with pytest.raises(ValueError, match="'flow'"):
        cosine_knn_graph(torch.randn(4, 2), 2, flow='sideways')


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_cosine_threshold_graph_low_precision(dtype, device):
    # 44 degrees apart: no edge at cos 40 degrees. bfloat16's epsilon
    # (2^-7) would have moved the cut to about 45 degrees.
    angle = math.radians(44)
    x = torch.tensor([[1.0, 0.0], [math.cos(angle), math.sin(angle)]])
    assert cosine_threshold_graph(x.to(device, dtype)).numel() == 0
    close = torch.tensor([[1.0, 0.0], [math.cos(0.6), math.sin(0.6)]])
    assert edge_set(cosine_threshold_graph(close.to(device, dtype))) == {
        (0, 1),
        (1, 0),
    }


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
def test_builders_give_the_cpu_edges_on_cuda(dtype, cuda_device):
    # The same edges, in the same order, from features on either device
    # (ties of k-NN aside: continuous random features have none).
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(120, 16, generator=generator).to(dtype)
    batch = torch.randint(0, 3, (120,), generator=generator)
    for build in [
        lambda x, batch: cosine_threshold_graph(x, 0.2, batch),
        lambda x, batch: cosine_threshold_graph(x, loop=True, chunk_size=32),
        lambda x, batch: cosine_knn_graph(x, 6, batch),
        lambda x, batch: cosine_knn_graph(
            x, 6, loop=True, flow='target_to_source', chunk_size=32
        ),
    ]:
        expected = build(x, batch)
        assert expected.numel() > 0
        edge_index = build(x.to(cuda_device), batch.to(cuda_device))
        assert edge_index.device == cuda_device
        assert torch.equal(edge_index.cpu(), expected)


@pytest.mark.parametrize('dtype', [torch.float64, torch.bfloat16])
def test_cosine_threshold_adjacency_is_the_graph_as_a_matrix(dtype):
    from apnet_pyg.graph.cosine import cosine_threshold_adjacency

    x = torch.randn(
        40, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    x[7] = x[3]  # Identical rows: their cosine rounds to about 1.
    x = x.to(dtype)
    for threshold in (-1.0, 0.3, COS_40_DEGREES, 1.0):
        adjacency = cosine_threshold_adjacency(x, threshold)
        expected = torch.zeros(40, 40, dtype=torch.bool)
        edge_index = cosine_threshold_graph(x, threshold)
        expected[edge_index[0], edge_index[1]] = True
        assert torch.equal(adjacency, expected)
