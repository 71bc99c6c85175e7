import pytest
import torch

from apnet_pyg.graph import cosine_threshold_graph
from apnet_pyg.nn import APNet


def small_model(graph='learned', **kwargs):
    torch.manual_seed(0)
    model = APNet(6, image_channels=10, class_channels=12, hidden_channels=8,
                  num_centroids=2, graph=graph, proj_channels=4, **kwargs)
    model.encoder.fit_centroids(torch.rand(7, 6),
                                torch.Generator().manual_seed(0))
    return model


@pytest.mark.parametrize('graph', ['learned', 'wordnet', 'none'])
def test_apnet(graph):
    model = small_model(graph)
    assert str(model) == (f'APNet(attribute_dim=6, graph={graph}, '
                          f'num_centroids=2)')
    attributes, images = torch.rand(5, 6), torch.rand(3, 10)
    prior = None
    if graph == 'wordnet':
        prior = (torch.tensor([[0, 1, 2], [1, 0, 3]]),
                 torch.tensor([1.0, 1.0, 0.5]))
    logits = model(images, attributes, prior)
    assert logits.size() == (3, 5)

    # The logits are gamma_2 times the head's scores of the propagated
    # class vectors:
    x0 = model.encoder(attributes)
    if graph == 'none':
        expected_vectors = x0
    elif graph == 'learned':
        edge_index = cosine_threshold_graph(model.conv.lin(x0), loop=False)
        expected_vectors = model.conv(x0, edge_index)
    else:
        expected_vectors = model.conv(x0, *prior)
    assert torch.allclose(model.class_vectors(attributes, prior),
                          expected_vectors)
    expected = 30.0 * model.head(expected_vectors, images)
    assert torch.allclose(logits, expected)

    loss = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2]))
    loss.backward()
    assert model.encoder.weight.grad is not None
    assert model.head.lin_image.weight.grad is not None


def test_apnet_propagation_mixes_similar_classes():
    # With a threshold of -1 every pair is connected: propagation changes
    # the class vectors; with the 'none' graph they stay the encoder's.
    model = small_model(threshold=-1.0)
    attributes = torch.rand(4, 6)
    x0 = model.encoder(attributes)
    assert not torch.allclose(model.class_vectors(attributes), x0)
    edge_index, _ = model.class_graph(x0)
    assert edge_index.size(1) == 12


def test_apnet_bad_input():
    with pytest.raises(ValueError, match="Unknown graph"):
        APNet(6, graph='knn')
    model = small_model('wordnet')
    with pytest.raises(ValueError, match="needs the prior graph"):
        model(torch.rand(3, 10), torch.rand(5, 6))
