import pytest
import torch

from apnet_pyg.graph import cosine_threshold_graph
from apnet_pyg.nn import APNet

# A prior over 6 dataset classes (row = target, column = source).
PRIOR = torch.tensor([[0.0, 1.0, 0.5, 0.0, 0.0, 0.0],
                      [1.0, 0.0, 0.0, 0.0, 0.0, 0.25],
                      [0.5, 0.0, 0.0, 1.0, 0.0, 0.0],
                      [0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
                      [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                      [0.0, 0.25, 0.0, 0.0, 0.0, 0.0]])


def small_model(graph='learned', **kwargs):
    torch.manual_seed(0)
    if graph == 'wordnet':
        kwargs.setdefault('class_prior', PRIOR)
    model = APNet(6, image_channels=10, class_channels=12, hidden_channels=8,
                  num_centroids=2, graph=graph, proj_channels=4, **kwargs)
    model.encoder.fit_centroids(torch.rand(7, 6),
                                torch.Generator().manual_seed(0))
    return model


@pytest.mark.parametrize('graph', ['learned', 'wordnet', 'none'])
def test_apnet(graph):
    model = small_model(graph)
    assert str(model) == (f'APNet(attribute_dim=6, graph={graph}, '
                          f'num_centroids=2, score=sigmoid)')
    attributes, images = torch.rand(5, 6), torch.rand(3, 10)
    classes = torch.tensor([2, 0, 1, 5, 3])  # dataset indices
    logits = model(images, attributes, classes)
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
        # The prior's subgraph over the task's classes, relabelled in the
        # given order: 2 -> 0, 0 -> 1, 1 -> 2, 5 -> 3, 3 -> 4.
        edges = {(1, 0): 0.5, (0, 1): 0.5, (2, 1): 1.0, (1, 2): 1.0,
                 (4, 0): 1.0, (0, 4): 1.0, (2, 3): 0.25, (3, 2): 0.25}
        edge_index, edge_weight = model.class_graph(x0, classes)
        assert dict(zip(map(tuple, edge_index.t().tolist()),
                        edge_weight.tolist())) == edges
        expected_vectors = model.conv(x0, edge_index, edge_weight)
    assert torch.allclose(model.class_vectors(attributes, classes),
                          expected_vectors)
    expected = 30.0 * model.scores(expected_vectors, images)
    assert torch.allclose(logits, expected)
    assert bool(((logits > 0) & (logits < 30)).all())  # bounded score

    loss = torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2]))
    loss.backward()
    assert model.encoder.weight.grad is not None
    assert model.head.lin_image.weight.grad is not None


def test_apnet_owns_its_prior():
    model = small_model('wordnet')
    assert torch.equal(model.state_dict()['class_prior'], PRIOR)
    restored = small_model('wordnet', class_prior=torch.zeros(6, 6))
    restored.load_state_dict(model.state_dict())
    attributes, classes = torch.rand(4, 6), torch.tensor([0, 1, 2, 3])
    assert torch.allclose(restored.class_vectors(attributes, classes),
                          model.class_vectors(attributes, classes))


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
    with pytest.raises(ValueError, match="'graph' must be one of"):
        APNet(6, graph='knn')
    with pytest.raises(ValueError, match="needs 'class_prior'"):
        APNet(6, graph='wordnet')
    with pytest.raises(ValueError, match="square"):
        APNet(6, graph='wordnet', class_prior=torch.zeros(3, 4))
    model = small_model('wordnet')
    with pytest.raises(ValueError, match="needs 'classes'"):
        model(torch.rand(3, 10), torch.rand(5, 6))
    with pytest.raises(ValueError, match="one index per class vector"):
        model(torch.rand(3, 10), torch.rand(5, 6), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="builds no class graph"):
        small_model('none').class_graph(torch.rand(3, 12))
