import pytest
import torch
import torch_geometric.transforms as T
from torch_geometric.data import Batch, Data
from torch_geometric.utils import to_undirected

from apnet_pyg.graph import (
    CosineKNNGraph,
    CosineThresholdGraph,
    cosine_knn_graph,
    cosine_threshold_graph,
)


@pytest.fixture(autouse=True)
def seeded():
    # The same random features on every run, so that a failure repeats.
    torch.manual_seed(0)


def test_cosine_threshold_graph_transform():
    x = torch.randn(10, 3)
    transform = CosineThresholdGraph(threshold=0.5)
    assert str(transform) == 'CosineThresholdGraph(threshold=0.5000)'
    # The old graph's edge features and weights go with its edges:
    data = transform(
        Data(
            x=x,
            edge_index=torch.tensor([[0, 1], [1, 0]]),
            edge_attr=torch.randn(2, 2),
            edge_weight=torch.rand(2),
        )
    )
    assert torch.equal(data.edge_index, cosine_threshold_graph(x, 0.5))
    assert data.edge_attr is None and data.edge_weight is None

    batch = Batch.from_data_list([Data(x=x[:4]), Data(x=x[4:])])
    data = CosineThresholdGraph(0.5, loop=True)(batch)
    assert torch.equal(
        data.edge_index, cosine_threshold_graph(x, 0.5, batch.batch, loop=True)
    )


def test_cosine_knn_graph_transform():
    pos = torch.randn(10, 3)
    transform = CosineKNNGraph(k=3, attr='pos')
    assert str(transform) == 'CosineKNNGraph(k=3)'
    data = transform(
        Data(
            pos=pos,
            edge_index=torch.tensor([[0], [1]]),
            edge_attr=torch.randn(1, 2),
            edge_weight=torch.rand(1),
        )
    )
    assert torch.equal(data.edge_index, cosine_knn_graph(pos, 3))
    assert data.edge_attr is None and data.edge_weight is None

    # As PyG's KNNGraph: force_undirected, flow, loop.
    data = CosineKNNGraph(3, force_undirected=True, attr='pos')(Data(pos=pos))
    assert torch.equal(
        data.edge_index, to_undirected(cosine_knn_graph(pos, 3), num_nodes=10)
    )
    data = CosineKNNGraph(3, loop=True, flow='target_to_source', attr='pos')(
        Data(pos=pos)
    )
    assert torch.equal(
        data.edge_index,
        cosine_knn_graph(pos, 3, loop=True, flow='target_to_source'),
    )

    with pytest.raises(ValueError, match="no node attribute 'pos'"):
        transform(Data(x=pos))


def test_transforms_match_pyg_signatures_and_registration():
    import inspect

    ours = inspect.signature(CosineKNNGraph).parameters
    theirs = inspect.signature(T.KNNGraph).parameters
    assert list(ours)[:4] == list(theirs)[:4]
    for name in ['k', 'loop', 'force_undirected', 'flow']:
        assert ours[name].default == theirs[name].default

    # Registered functional transforms, as KNNGraph is 'knn_graph':
    from torch.utils.data.datapipes.iter import IterableWrapper

    x = torch.randn(10, 3)
    pipe = IterableWrapper([Data(x=x)]).cosine_knn_graph(k=3)
    assert torch.equal(next(iter(pipe)).edge_index, cosine_knn_graph(x, 3))
    pipe = IterableWrapper([Data(x=x)]).cosine_threshold_graph(0.2)
    assert torch.equal(
        next(iter(pipe)).edge_index, cosine_threshold_graph(x, 0.2)
    )
