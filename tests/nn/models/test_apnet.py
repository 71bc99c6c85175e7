import pytest
import torch
from torch._dynamo.testing import CompileCounter
from torch_geometric.utils import to_dense_adj

from apnet_pyg.graph import cosine_threshold_graph
from apnet_pyg.nn import APNet, APNetConv, CentroidEncoder, RelationHead
from apnet_pyg.nn.models.apnet import (
    DENSE_CLASS_GRAPH_MAX_CLASSES,
    use_dense_class_graph,
)
from tests.helpers.host_sync import no_host_sync

# A prior over 6 dataset classes (row = target, column = source).
PRIOR = torch.tensor(
    [
        [0.0, 1.0, 0.5, 0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0, 0.0, 0.0, 0.25],
        [0.5, 0.0, 0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.25, 0.0, 0.0, 0.0, 0.0],
    ]
)


# The attribute rows of 7 dataset classes, for the k-NN graph.
CLASS_ATTRIBUTES = torch.rand(7, 6, generator=torch.Generator().manual_seed(5))


def small_model(graph='learned', **kwargs):
    torch.manual_seed(0)
    if graph == 'wordnet':
        kwargs.setdefault('class_prior', PRIOR)
    if graph == 'knn':
        kwargs.setdefault('class_attributes', CLASS_ATTRIBUTES)
    model = APNet(
        6,
        image_channels=10,
        class_channels=12,
        hidden_channels=8,
        num_centroids=2,
        graph=graph,
        proj_channels=4,
        **kwargs,
    )
    model.encoder.fit_centroids(
        torch.rand(7, 6), torch.Generator().manual_seed(0)
    )
    return model


@pytest.mark.parametrize('graph', ['learned', 'wordnet', 'knn', 'none'])
def test_apnet(graph):
    model = small_model(graph)
    assert str(model) == (
        f'APNet(attribute_dim=6, graph={graph}, '
        f'num_centroids=2, score=sigmoid)'
    )
    attributes, images = torch.rand(5, 6), torch.rand(3, 10)
    classes = torch.tensor([2, 0, 1, 5, 3])  # dataset indices
    if graph == 'knn':  # The task's rows of the model's class table.
        attributes = CLASS_ATTRIBUTES[classes]
    logits = model(images, attributes, classes)
    assert logits.size() == (3, 5)

    # The logits are gamma_2 times the head's scores of the propagated
    # class vectors:
    x0 = model.encoder(attributes)
    if graph == 'none':
        expected_vectors = x0
    elif graph == 'knn':
        # Each class's 2 nearest among the task's by their descriptions,
        # edges from the neighbours; no self-loop (DBiGCN's graph).
        edge_index, edge_weight = model.class_graph(x0, classes)
        cosines = normalized(attributes) @ normalized(attributes).t()
        cosines.fill_diagonal_(-2.0)
        nearest = cosines.topk(2, dim=1).indices
        assert edge_weight is None
        assert sorted(map(tuple, edge_index.t().tolist())) == sorted(
            (int(j), i) for i in range(5) for j in nearest[i]
        )
        assert not model.conv.add_self_loops
        expected_vectors = model.conv(x0, edge_index)
    elif graph == 'learned':
        edge_index = cosine_threshold_graph(model.conv.lin(x0), loop=False)
        expected_vectors = model.conv(x0, edge_index)
    else:
        # The prior's subgraph over the task's classes, relabelled in the
        # given order: 2 -> 0, 0 -> 1, 1 -> 2, 5 -> 3, 3 -> 4.
        edges = {
            (1, 0): 0.5,
            (0, 1): 0.5,
            (2, 1): 1.0,
            (1, 2): 1.0,
            (4, 0): 1.0,
            (0, 4): 1.0,
            (2, 3): 0.25,
            (3, 2): 0.25,
        }
        edge_index, edge_weight = model.class_graph(x0, classes)
        assert (
            dict(
                zip(map(tuple, edge_index.t().tolist()), edge_weight.tolist())
            )
            == edges
        )
        expected_vectors = model.conv(x0, edge_index, edge_weight)
    assert torch.allclose(
        model.class_vectors(attributes, classes), expected_vectors
    )
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
    assert torch.allclose(
        restored.class_vectors(attributes, classes),
        model.class_vectors(attributes, classes),
    )


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
        APNet(6, graph='gcn')
    with pytest.raises(ValueError, match="'knn_k' must be a positive"):
        APNet(6, graph='knn', knn_k=0)
    with pytest.raises(ValueError, match="'knn_space' must be one of"):
        APNet(6, graph='knn', knn_space='projected')
    with pytest.raises(ValueError, match="'knn_classes' must be one of"):
        APNet(6, graph='knn', knn_classes='seen')
    with pytest.raises(ValueError, match="'knn_loop' must be True or False"):
        APNet(6, graph='knn', knn_loop='no')
    with pytest.raises(ValueError, match=r'must be a \[C, 6\] matrix'):
        APNet(6, graph='knn', class_attributes=torch.rand(7, 5))
    with pytest.raises(ValueError, match="'class_attributes' must be finite"):
        APNet(
            6, graph='knn', class_attributes=torch.full((7, 6), float('nan'))
        )
    # Built without the table (to be loaded into), it says so when used:
    empty = APNet(6, 10, 12, 8, 2, graph='knn', proj_channels=4)
    with pytest.raises(ValueError, match="needs 'class_attributes'"):
        empty(torch.rand(3, 10), torch.rand(5, 6), torch.arange(5))
    with pytest.raises(ValueError, match="graph='knn' needs 'classes'"):
        small_model('knn')(torch.rand(3, 10), torch.rand(5, 6))
    with pytest.raises(ValueError, match="needs 'class_prior'"):
        APNet(6, graph='wordnet')
    with pytest.raises(ValueError, match='square'):
        APNet(6, graph='wordnet', class_prior=torch.zeros(3, 4))
    model = small_model('wordnet')
    with pytest.raises(ValueError, match="needs 'classes'"):
        model(torch.rand(3, 10), torch.rand(5, 6))
    with pytest.raises(ValueError, match='one index per class vector'):
        model(torch.rand(3, 10), torch.rand(5, 6), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match='builds no class graph'):
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
    hidden = torch.einsum('cka,koa->cko', offsets, weight) + state[
        'encoder.bias'
    ].view(k, -1)
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
        # takes the task's classes' block of the prior; k-NN marks each
        # class's k nearest by the cosines of its space (no gradient).
        if model.graph == 'learned':
            with torch.no_grad():
                prior = (
                    reference_cosines(state, x) >= model.threshold
                ) & ~torch.eye(x.size(0), dtype=torch.bool)
            prior = prior.to(x.dtype)
        elif model.graph == 'knn':
            space = (
                x
                if model.knn_space == 'encoded'
                else state['class_attributes'][classes].to(x.dtype)
            )
            with torch.no_grad():
                unit = normalized(space)
                cosines = unit @ unit.t()
                cosines.fill_diagonal_(-2.0)
                nearest = cosines.topk(model.knn_k, dim=1).indices
            prior = torch.zeros_like(cosines).scatter_(1, nearest, 1.0)
        else:
            prior = state['class_prior'][classes][:, classes]
        # Self-loops of weight 1 where a class has none; others keep theirs
        # (none for the k-NN graph without knn_loop).
        if model.graph != 'knn' or model.knn_loop:
            prior = prior + torch.diag((prior.diagonal() == 0).to(x.dtype))
        for _ in range(model.conv.num_steps):
            # alpha_yz = w_yz exp(g1 cos(f x_y, f x_z)) / sum over z.
            scores = prior * torch.exp(
                state['conv.temperature'] * reference_cosines(state, x)
            )
            x = scores / scores.sum(dim=-1, keepdim=True) @ x
    # h = sigma(w^T ReLU(W1 x_y + W2 v + b1) + b), logits = g2 h.
    per_class = x @ state['head.lin_class.weight'].t()  # [C, H]
    per_image = (
        images @ state['head.lin_image.weight'].t()
        + state['head.lin_image.bias']
    )  # [B, H]
    hidden = (per_image.unsqueeze(1) + per_class.unsqueeze(0)).relu()
    scores = (
        hidden @ state['head.lin_out.weight'].view(-1)
        + state['head.lin_out.bias']
    )
    if model.head.score == 'sigmoid':
        scores = scores.sigmoid()
    return model.logit_scale * scores


def model64(graph, **kwargs):
    return small_model(graph, **kwargs).double()


@pytest.mark.parametrize('dense', [False, True])
@pytest.mark.parametrize(
    'graph,score,num_steps',
    [
        ('learned', 'sigmoid', 1),
        ('learned', 'linear', 2),
        ('wordnet', 'sigmoid', 2),
        ('wordnet', 'linear', 1),
        ('knn', 'sigmoid', 1),
        ('knn', 'linear', 2),
        ('none', 'sigmoid', 1),
        ('none', 'linear', 1),
    ],
)
def test_apnet_equals_dense_reference(graph, score, num_steps, dense):
    # Both forms of the class graph: the sparse one (edge list, APNetConv)
    # and the dense one (adjacency, DenseAPNetConv).
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
            state, reference_class_vectors(state, attributes)
        )
        off_diagonal = cosines.masked_fill(
            torch.eye(5, dtype=torch.bool), -2.0
        )
        lowest = off_diagonal.max(dim=1).values.min()
        above = off_diagonal[off_diagonal > lowest].min()
        assert above - lowest > 1e-6  # (far from rounding)
        kwargs['threshold'] = float(lowest + above) / 2
    elif graph == 'wordnet':
        # A prior over 7 dataset classes with weights 1/d: the task's first
        # class is isolated, its second has a self-loop of its own.
        hops = torch.randint(1, 4, (7, 7), generator=generator)
        prior = torch.where(
            torch.rand(7, 7, generator=generator) < 0.5, 1.0 / hops, 0.0
        )
        classes = torch.randperm(7, generator=generator)[:5]
        prior.fill_diagonal_(0.0)
        prior[classes[0], :] = prior[:, classes[0]] = 0.0
        prior[classes[1], classes[1]] = 1.0 / hops[classes[1], classes[1]]
        kwargs['class_prior'] = prior
    elif graph == 'knn':
        # Each step with the other choices: self-loops, the encoded space.
        classes = torch.randperm(7, generator=generator)[:5]
        attributes = CLASS_ATTRIBUTES[classes].double().clone()
        kwargs.update(knn_loop=num_steps == 2, knn_space='descriptions')
        if score == 'linear':
            kwargs['knn_space'] = 'encoded'
    model = model64(graph, **kwargs)
    if graph == 'learned':  # The model's graph: an edge, an isolated class.
        edge_index, _ = model.class_graph(model.encoder(attributes))
        assert 0 < edge_index.unique().numel() < 5
    attributes.requires_grad_()
    images.requires_grad_()

    logits = model(images, attributes, classes, dense=dense)
    expected = reference_logits(model, images, attributes, classes)
    torch.testing.assert_close(logits, expected)
    # Gradients of the same loss w.r.t. every parameter and both inputs (the
    # reference uses them all, or autograd.grad raises):
    inputs = [*model.parameters(), attributes, images]
    grad_logits = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    grads = torch.autograd.grad(
        logits, inputs, grad_logits, materialize_grads=True
    )
    expected_grads = torch.autograd.grad(expected, inputs, grad_logits)
    for grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected_grad)
        assert bool((expected_grad != 0).any())


# The dense form of the class graph ########################################
@pytest.mark.parametrize(
    'graph,threshold,num_steps',
    [
        ('learned', -1.0, 1),  # every pair connected
        ('learned', 0.3, 2),
        ('learned', 0.99, 1),  # no edge: self-loops only
        ('wordnet', None, 1),
        ('wordnet', None, 2),
        ('knn', None, 1),
        ('knn', None, 2),
    ],
)
def test_dense_form_equals_sparse_form(graph, threshold, num_steps):
    kwargs = {'num_steps': num_steps}
    if threshold is not None:
        kwargs['threshold'] = threshold
    if graph == 'knn':  # One step over the encoded space, with self-loops.
        kwargs.update(knn_space='encoded', knn_loop=num_steps == 1)
    model = model64(graph, **kwargs)
    generator = torch.Generator().manual_seed(1)
    attributes = torch.rand(
        6, 6, generator=generator, dtype=torch.float64, requires_grad=True
    )
    images = torch.rand(4, 10, generator=generator, dtype=torch.float64)
    classes = torch.tensor([3, 0, 5, 1, 2, 4])
    x0 = model.encoder(attributes)
    # The same graph: the adjacency is the edge list's, row = target.
    edge_index, edge_weight = model.class_graph(x0, classes)
    adjacency = model.dense_class_graph(x0, classes)
    expected = to_dense_adj(
        edge_index, edge_attr=edge_weight, max_num_nodes=6
    )[0].t()
    assert torch.equal(adjacency.to(expected.dtype), expected)
    if graph == 'learned':
        assert adjacency.dtype == torch.bool
        assert edge_index.size(1) == {-1.0: 30, 0.99: 0}.get(
            threshold, edge_index.size(1)
        )
        assert threshold != 0.3 or 0 < edge_index.size(1) < 30

    grad_logits = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    inputs = [*model.parameters(), attributes]
    results = []
    for dense in (False, True):
        logits = model(images, attributes, classes, dense=dense)
        results.append(
            (
                logits,
                torch.autograd.grad(
                    logits, inputs, grad_logits, materialize_grads=True
                ),
            )
        )
    (sparse, sparse_grads), (dense, dense_grads) = results
    torch.testing.assert_close(dense, sparse, rtol=1e-12, atol=1e-12)
    for grad, expected_grad in zip(dense_grads, sparse_grads):
        torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-12)


def test_dense_class_graph_size_rule():
    cpu, meta = torch.device('cpu'), torch.device('meta')
    # On the CPU the sparse form, as before, unless asked for:
    assert not use_dense_class_graph(30, cpu)
    assert use_dense_class_graph(30, cpu, sync_free=True)
    # Elsewhere the dense one, up to the size limit:
    assert use_dense_class_graph(30, meta)
    assert use_dense_class_graph(DENSE_CLASS_GRAPH_MAX_CLASSES, 'meta')
    assert not use_dense_class_graph(
        DENSE_CLASS_GRAPH_MAX_CLASSES + 1, meta, sync_free=True
    )
    # The model follows the rule when not told (the sparse form on CPU):
    model = small_model()
    calls = []
    original = model.class_graph

    def counting(*args):
        calls.append(1)
        return original(*args)

    model.class_graph = counting
    model(torch.rand(3, 10), torch.rand(5, 6))
    assert calls == [1]
    model(torch.rand(3, 10), torch.rand(5, 6), dense=True)
    assert calls == [1]


def test_dense_layer_shares_the_sparse_layers_parameters():
    model = small_model()
    # Not a submodule: the state_dict is as before.
    assert sorted(model.state_dict()) == [
        'conv.lin.weight',
        'conv.temperature',
        'encoder.bias',
        'encoder.centroids',
        'encoder.weight',
        'head.lin_class.weight',
        'head.lin_image.bias',
        'head.lin_image.weight',
        'head.lin_out.bias',
        'head.lin_out.weight',
    ]
    assert len(list(model.parameters())) == 8
    dense = model._dense_conv
    assert dense.lin is model.conv.lin
    assert dense.temperature is model.conv.temperature
    # Still shared after a conversion, which replaces the buffer:
    model.double()
    assert dense.temperature is model.conv.temperature
    assert dense.temperature.dtype == torch.float64
    logits = model(
        torch.rand(3, 10, dtype=torch.float64),
        torch.rand(5, 6, dtype=torch.float64),
        dense=True,
    )
    assert logits.dtype == torch.float64
    # and after a load that assigns new tensors:
    state = {key: value.clone() for key, value in model.state_dict().items()}
    state['conv.temperature'].fill_(3.0)
    model.load_state_dict(state, assign=True)
    assert dense.temperature is model.conv.temperature
    assert float(dense.temperature) == 3.0
    # Building it draws nothing from the global RNG, which initialises the
    # model's parts as before the dense layer existed:
    torch.manual_seed(0)
    APNet(6, 10, 12, 8, 2, proj_channels=4)
    after_model = torch.rand(3)
    torch.manual_seed(0)
    CentroidEncoder(6, 12, 2)
    APNetConv(12, 4, temperature=10.0, num_steps=1)
    RelationHead(12, 10, 8)
    assert torch.equal(after_model, torch.rand(3))


@pytest.mark.parametrize('graph', ['learned', 'wordnet', 'knn', 'none'])
def test_dense_forward_reads_nothing_on_the_host(graph):
    model = small_model(graph)
    images, attributes = torch.rand(3, 10), torch.rand(5, 6)
    classes = torch.tensor([2, 0, 1, 5, 3])
    with no_host_sync():
        logits = model(
            images, attributes, classes, dense=True, check_values=False
        )
        logits.sum().backward()
    # The value checks are what read the host, and what check_values=False
    # leaves to the caller:
    nan = torch.full((5, 6), float('nan'))
    with pytest.raises(ValueError, match="'attributes' contains NaN"):
        model(images, nan, classes, dense=True)
    assert (
        model(images, nan, classes, dense=True, check_values=False)
        .isnan()
        .all()
    )
    # It compiles whole, forward and backward:
    counter = CompileCounter()

    def loss(images, attributes, classes):
        return model(
            images, attributes, classes, dense=True, check_values=False
        ).sum()

    compiled = torch.compile(loss, backend=counter, fullgraph=True)
    compiled(images, attributes, classes).backward()
    assert counter.frame_count == 1


def test_apnet_multiplicative_head():
    # interaction reaches the head; the logits are gamma_2 times its
    # bilinear scores of the class vectors.
    model = small_model('none', interaction='multiplicative', score='linear')
    assert model.head.interaction == 'multiplicative'
    attributes, images = torch.rand(5, 6), torch.rand(3, 10)
    logits = model(images, attributes, torch.arange(5))
    head = model.head
    per_class = head.lin_class(
        model.class_vectors(attributes, torch.arange(5))
    )
    expected = (
        head.lin_image(images).relu() * head.lin_out.weight
    ) @ per_class.t() + head.lin_out.bias
    torch.testing.assert_close(logits, 30.0 * expected)
    with pytest.raises(ValueError, match="'interaction' must be one of"):
        small_model('none', interaction='sum')


# The k-NN class graph over every class ####################################
@pytest.mark.parametrize('dense', [False, True])
def test_knn_graph_over_every_class(dense):
    # knn_classes='all': the class vectors propagated over all 7 classes,
    # then the task's rows read, whatever else the task holds; so a
    # task's class is composed from its neighbours among every class.
    model = small_model('knn', knn_classes='all').double()
    every = torch.arange(7)
    full = model.class_vectors(CLASS_ATTRIBUTES.double(), every, dense=dense)
    x0 = model.encoder(CLASS_ATTRIBUTES.double())
    edge_index, _ = model.class_graph(x0, every)
    torch.testing.assert_close(full, model.conv(x0, edge_index))
    for task in (torch.tensor([4, 6]), torch.tensor([0, 3, 5])):
        rows = model.class_vectors(
            CLASS_ATTRIBUTES[task].double(), task, dense=dense
        )
        torch.testing.assert_close(rows, full[task])
    # Every class has 2 neighbours and no self-loop: its vector is a
    # convex mixture of its neighbours' encoded vectors, not its own.
    neighbours = {
        i: edge_index[0, edge_index[1] == i].tolist() for i in range(7)
    }
    assert all(len(n) == 2 and i not in n for i, n in neighbours.items())
    state = model.state_dict()
    cosines = reference_cosines(state, x0)
    for i in range(7):
        weight = torch.softmax(10.0 * cosines[i, neighbours[i]], dim=0)
        torch.testing.assert_close(full[i], weight @ x0[neighbours[i]])


def test_knn_graph_learned_temperature_and_saved_table():
    model = small_model('knn', learn_propagation_temperature=True)
    assert isinstance(model.conv.temperature, torch.nn.Parameter)
    assert model._dense_conv.temperature is model.conv.temperature
    classes = torch.tensor([1, 4, 6])
    for dense in (False, True):
        model.zero_grad()
        model(
            torch.rand(2, 10), CLASS_ATTRIBUTES[classes], classes, dense=dense
        )[:, 0].sum().backward()
        assert float(model.conv.temperature.grad.abs()) > 0
    # The class table is saved with the model: a model built without it
    # (an empty placeholder, as the run directory's loader builds one)
    # takes it from the state it loads.
    state = model.state_dict()
    assert torch.equal(state['class_attributes'], CLASS_ATTRIBUTES)
    loaded = APNet(
        6,
        image_channels=10,
        class_channels=12,
        hidden_channels=8,
        num_centroids=2,
        graph='knn',
        proj_channels=4,
        learn_propagation_temperature=True,
    )
    assert loaded.class_attributes.shape == (0, 6)
    loaded.load_state_dict(state)
    torch.testing.assert_close(
        loaded.class_vectors(CLASS_ATTRIBUTES[classes], classes),
        model.class_vectors(CLASS_ATTRIBUTES[classes], classes),
    )
