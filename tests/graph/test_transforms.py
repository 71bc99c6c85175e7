import pytest
import torch

from torch_geometric.data import Batch, Data

from apnet_pyg.graph import (
    CosineKNNGraph,
    CosineThresholdGraph,
    cosine_knn_graph,
    cosine_threshold_graph,
)


def test_cosine_threshold_graph_transform():
    x = torch.randn(10, 3)
    transform = CosineThresholdGraph(threshold=0.5)
    assert str(transform) == 'CosineThresholdGraph(threshold=0.5000)'
    data = transform(Data(x=x, edge_attr=torch.randn(4, 2)))
    assert torch.equal(data.edge_index, cosine_threshold_graph(x, 0.5))
    assert data.edge_attr is None

    batch = Batch.from_data_list([Data(x=x[:4]), Data(x=x[4:])])
    data = transform(batch)
    assert torch.equal(data.edge_index,
                       cosine_threshold_graph(x, 0.5, batch=batch.batch))


def test_cosine_knn_graph_transform():
    pos = torch.randn(10, 3)
    transform = CosineKNNGraph(k=3, loop=False, attr='pos')
    assert str(transform) == 'CosineKNNGraph(k=3)'
    data = transform(Data(pos=pos))
    assert torch.equal(data.edge_index, cosine_knn_graph(pos, 3, loop=False))

    with pytest.raises(ValueError, match="no node attribute 'pos'"):
        transform(Data(x=pos))
