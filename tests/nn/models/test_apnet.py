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


# Equality with a dense reference, forward and gradient (float64) ##########
def normalized(x):
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def reference_class_vectors(state, attributes):
    r"""CentroidEncoder's equation as written: x0_y = sum_i ReLU(Theta_i
    (s_y - c_i) + b_i)."""
    k, attribute_dim = state['encoder.centroids'].shape
    weight = state['encoder.weight'].view(k, -1, attribute_dim)  # Theta_i
    offsets = attributes.unsqueeze(1) - state['encoder.centroids']  # [C,k,A]
    hidden = torch.einsum('cka,koa->cko', offsets, weight) + \
        state['encoder.bias'].view(k, -1)
    return hidden.relu().sum(dim=1)


def reference_cosines(state, x):
    h = normalized(x @ state['conv.lin.weight'].t())  # f = conv.lin
    return h @ h.t()


def reference_logits(model, images, attributes, classes=None):
    r"""APNet from its equations, with dense matrices and the model's
    parameters and buffers (its state), but none of its modules."""
    state = model.state_dict(keep_vars=True)  # The parameters themselves.
    x = reference_class_vectors(state, attributes)
    if model.graph != 'none':
        # The prior w_yz over the task's classes, row = target: the learned
        # graph thresholds the cosines (no gradient, no self-loops); WordNet
        # takes the task's classes' block of the prior.
        if model.graph == 'learned':
            with torch.no_grad():
                prior = (reference_cosines(state, x) >= model.threshold) & \
                    ~torch.eye(x.size(0), dtype=torch.bool)
            prior = prior.to(x.dtype)
        else:
            prior = state['class_prior'][classes][:, classes]
        # Self-loops of weight 1 where a class has none; others keep theirs.
        prior = prior + torch.diag((prior.diagonal() == 0).to(x.dtype))
        for _ in range(model.conv.num_steps):
            # alpha_yz = w_yz exp(g1 cos(f x_y, f x_z)) / sum over z.
            scores = prior * torch.exp(state['conv.temperature'] *
                                       reference_cosines(state, x))
            x = scores / scores.sum(dim=-1, keepdim=True) @ x
    # h = sigma(w^T ReLU(W1 x_y + W2 v + b1) + b), logits = g2 h.
    per_class = x @ state['head.lin_class.weight'].t()  # [C, H]
    per_image = images @ state['head.lin_image.weight'].t() + \
        state['head.lin_image.bias']  # [B, H]
    hidden = (per_image.unsqueeze(1) + per_class.unsqueeze(0)).relu()
    scores = hidden @ state['head.lin_out.weight'].view(-1) + \
        state['head.lin_out.bias']
    if model.head.score == 'sigmoid':
        scores = scores.sigmoid()
    return model.logit_scale * scores


def model64(graph, **kwargs):
    return small_model(graph, **kwargs).double()


@pytest.mark.parametrize('graph,score,num_steps', [
    ('learned', 'sigmoid', 1),
    ('learned', 'linear', 2),
    ('wordnet', 'sigmoid', 2),
    ('wordnet', 'linear', 1),
    ('none', 'sigmoid', 1),
    ('none', 'linear', 1),
])
def test_apnet_equals_dense_reference(graph, score, num_steps):
    generator = torch.Generator().manual_seed(0)
    attributes = torch.rand(5, 6, generator=generator, dtype=torch.float64)
    images = torch.rand(3, 10, generator=generator, dtype=torch.float64)
    kwargs = dict(score=score, num_steps=num_steps)
    classes = None
    if graph == 'learned':
        # A threshold halfway between two cosines of the initial class
        # vectors, such that the least connected class is isolated and the
        # graph still has an edge.
        state = model64(graph, **kwargs).state_dict()
        cosines = reference_cosines(
            state, reference_class_vectors(state, attributes))
        off_diagonal = cosines.masked_fill(torch.eye(5, dtype=torch.bool),
                                           -2.0)
        lowest = off_diagonal.max(dim=1).values.min()
        above = off_diagonal[off_diagonal > lowest].min()
        assert above - lowest > 1e-6  # (far from rounding)
        kwargs['threshold'] = float(lowest + above) / 2
    elif graph == 'wordnet':
        # A prior over 7 dataset classes with weights 1/d: the task's first
        # class is isolated, its second has a self-loop of its own.
        hops = torch.randint(1, 4, (7, 7), generator=generator)
        prior = torch.where(torch.rand(7, 7, generator=generator) < 0.5,
                            1.0 / hops, 0.0)
        classes = torch.randperm(7, generator=generator)[:5]
        prior.fill_diagonal_(0.0)
        prior[classes[0], :] = prior[:, classes[0]] = 0.0
        prior[classes[1], classes[1]] = 1.0 / hops[classes[1], classes[1]]
        kwargs['class_prior'] = prior
    model = model64(graph, **kwargs)
    if graph == 'learned':  # The model's graph: an edge, an isolated class.
        edge_index, _ = model.class_graph(model.encoder(attributes))
        assert 0 < edge_index.unique().numel() < 5
    attributes.requires_grad_()
    images.requires_grad_()

    logits = model(images, attributes, classes)
    expected = reference_logits(model, images, attributes, classes)
    torch.testing.assert_close(logits, expected)
    # Gradients of the same loss w.r.t. every parameter and both inputs (the
    # reference uses them all, or autograd.grad raises):
    inputs = [*model.parameters(), attributes, images]
    grad_logits = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    grads = torch.autograd.grad(logits, inputs, grad_logits,
                                materialize_grads=True)
    expected_grads = torch.autograd.grad(expected, inputs, grad_logits)
    for grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected_grad)
        assert bool((expected_grad != 0).any())
