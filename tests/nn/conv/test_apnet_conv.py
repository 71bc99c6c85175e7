import copy
import math
import warnings
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F
import torch_geometric
from torch.autograd import gradcheck
from torch_geometric import EdgeIndex
from torch_geometric.data import Batch, Data
from torch_geometric.nn import AGNNConv
from torch_geometric.utils import (
    to_dense_adj,
    to_torch_coo_tensor,
    to_torch_csc_tensor,
    to_torch_csr_tensor,
)

from apnet_pyg.nn import APNetConv, DenseAPNetConv
from apnet_pyg.nn.conv import apnet_conv
from tests.helpers.dropout import dropout_scale, record_dropout
from tests.helpers.interpreter import (
    needs_interpreter,
    run_under_interpreter,
    starts_interpreter,
)


def graph(
    num_nodes=8,
    num_edges=20,
    channels=6,
    seed=0,
    weighted=True,
    dtype=torch.float64,
    make_random_graph=None,
    device='cpu',
):
    # Drawn on CPU: the same graph on every device.
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, channels, generator=generator, dtype=dtype)
    edge_index = make_random_graph(num_nodes, num_edges, generator)
    edge_weight = None
    if weighted:
        edge_weight = (
            torch.rand(edge_index.size(1), generator=generator, dtype=dtype)
            .add_(0.1)
            .to(device)
        )
    return x.to(device), edge_index.to(device), edge_weight


#: The constructor's defaults (experiments/node-classification-search.md
#: chose them).
DEFAULT_TEMPERATURE = 3.0
DEFAULT_STEPS = 4
DEFAULT_TELEPORT = 0.2


def conv64(*args, seed=0, device='cpu', **kwargs):
    torch.manual_seed(seed)
    # One step, the output the last step's: more, and learned step
    # weights, where a test asks.
    kwargs.setdefault('num_steps', 1)
    kwargs.setdefault('learn_step_weights', False)
    kwargs.setdefault('teleport', None)
    return APNetConv(*args, **kwargs).double().to(device)


def bipartite_reference(
    x_src,
    x_dst,
    edge_index,
    weight_src,
    weight_dst,
    edge_weight=None,
    temperature=1.0,
    num_steps=1,
    add_self_loops=True,
):
    r"""The bipartite layer from its equation, with dense matrices:
    :math:`\alpha_{ij} \propto w_{ij} \exp(\gamma \cos(W_t x^t_i, W_s
    x^s_j))` over the edges :math:`j \to i` and, with
    :obj:`add_self_loops`, a self-loop :math:`i \to i` of weight 1 for
    every :math:`i < \min(N_s, N_t)` without one (GATConv's convention); a
    further step attends from the output (projected by :math:`W_s`, as it
    holds source features) to the same sources."""
    prior = x_src.new_zeros(x_dst.size(0), x_src.size(0))
    if edge_weight is None:
        edge_weight = x_src.new_ones(edge_index.size(1))
    prior.index_put_(
        (edge_index[1], edge_index[0]), edge_weight, accumulate=True
    )
    if add_self_loops:
        diagonal = prior.diagonal()
        prior = prior.diagonal_scatter(
            torch.where(diagonal == 0, 1.0, diagonal)
        )
    h_src = F.normalize(x_src @ weight_src.t(), dim=-1)
    h_dst = F.normalize(x_dst @ weight_dst.t(), dim=-1)
    for _ in range(num_steps):
        scores = torch.exp(temperature * (h_dst @ h_src.t())) * prior
        denominator = scores.sum(dim=-1, keepdim=True)
        alpha = scores / torch.where(
            denominator > 0, denominator, torch.ones_like(denominator)
        )
        out = alpha @ x_src
        h_dst = F.normalize(out @ weight_src.t(), dim=-1)
    return out


def test_apnet_conv_defaults(make_random_graph, apnet_reference):
    x, edge_index, _ = graph(
        channels=32, dtype=torch.float64, make_random_graph=make_random_graph
    )
    conv = APNetConv(32).double()
    # The drop-in defaults (chosen on validation across a homophilic and
    # three heterophilic graphs, experiments/node-classification-search.md):
    # AGNNConv's attention with the temperature learned from
    # DEFAULT_TEMPERATURE, over DEFAULT_STEPS steps whose outputs (and the
    # input) are combined with personalized PageRank's fixed weights.
    assert str(conv) == (
        'APNetConv(32, proj_channels=None, '
        f'temperature={DEFAULT_TEMPERATURE}, num_steps={DEFAULT_STEPS}, '
        f'teleport={DEFAULT_TELEPORT}, learn_step_weights=False)'
    )
    assert isinstance(conv.lin, torch.nn.Identity)
    assert conv.temperature.item() == DEFAULT_TEMPERATURE
    assert conv.temperature.requires_grad
    assert not conv.learn_step_weights
    assert not conv.step_weights.requires_grad
    assert [name for name, _ in conv.named_parameters()] == ['temperature']
    ppr = [
        DEFAULT_TELEPORT * (1 - DEFAULT_TELEPORT) ** t
        for t in range(DEFAULT_STEPS)
    ] + [(1 - DEFAULT_TELEPORT) ** DEFAULT_STEPS]
    assert conv.step_weights.tolist() == pytest.approx(ppr, abs=1e-7)
    assert conv.step_weights.sum().item() == pytest.approx(1.0)
    assert (
        conv.proj_init == 'glorot'
        and conv.add_self_loops
        and conv.kernel == 'auto'
        and not conv.cached
    )
    expected = apnet_reference(
        x,
        edge_index,
        None,
        temperature=DEFAULT_TEMPERATURE,
        num_steps=DEFAULT_STEPS,
        step_weights=torch.tensor(ppr, dtype=torch.float64),
    )
    assert torch.allclose(conv(x, edge_index), expected, atol=1e-12)
    with torch.no_grad():
        conv.step_weights.copy_(torch.randn(DEFAULT_STEPS + 1))
    expected = apnet_reference(
        x,
        edge_index,
        None,
        temperature=DEFAULT_TEMPERATURE,
        num_steps=DEFAULT_STEPS,
        step_weights=conv.step_weights,
    )
    assert torch.allclose(conv(x, edge_index), expected, atol=1e-12)
    conv.reset_parameters()
    assert conv.step_weights.tolist() == pytest.approx(ppr, abs=1e-7)
    dense = DenseAPNetConv(32).double()
    assert str(dense) == str(conv).replace('APNetConv', 'DenseAPNetConv')
    dense.load_state_dict(conv.state_dict())
    # The last step's output alone: no step weights to learn or save.
    last = APNetConv(32, learn_step_weights=False, teleport=None)
    assert last.step_weights is None
    assert 'step_weights' not in last.state_dict()

    # The paper's configuration, as the ZSL model passes it:
    paper = APNetConv(
        16,
        256,
        temperature=10.0,
        num_steps=1,
        learn_step_weights=False,
        teleport=None,
    )
    assert str(paper) == (
        'APNetConv(16, proj_channels=256, temperature=10.0, num_steps=1)'
    )
    assert paper.lin.weight.size() == (256, 16)


@pytest.mark.parametrize('num_steps', [1, 3])
def test_apnet_conv_teleport_start(num_steps, make_random_graph):
    x, edge_index, _ = graph(
        channels=8, dtype=torch.float64, make_random_graph=make_random_graph
    )

    def start(**kwargs):
        # Learned weights where they start; AGNNConv's beta = 1.
        kwargs.setdefault('learn_step_weights', True)
        conv = APNetConv(
            8, num_steps=num_steps, temperature=1.0, **kwargs
        ).double()
        return conv, conv(x, edge_index)

    # teleport=None starts at one step's output: AGNNConv's, for any T.
    conv, out = start(teleport=None)
    assert conv.step_weights.tolist() == [0.0, 1.0] + [0.0] * (num_steps - 1)
    assert str(conv).endswith(', teleport=None)')
    agnn = AGNNConv(requires_grad=True).double()
    assert torch.allclose(out, agnn(x, edge_index), atol=1e-12)
    # teleport=0 starts at the last step's output, as without weights.
    _, out = start(teleport=0.0)
    conv, last = start(learn_step_weights=False, teleport=None)
    assert torch.allclose(out, last, atol=1e-12)
    assert conv.step_weights is None and 'teleport' not in str(conv)
    # teleport=1 starts at the input: the layer is the identity.
    _, out = start(teleport=1.0)
    assert torch.allclose(out, x, atol=1e-12)
    # Fixed weights: where learned ones start, and there they stay; a
    # buffer the constructor defines, so outside the state_dict.
    _, learned = start(teleport=0.3)
    conv, fixed = start(learn_step_weights=False, teleport=0.3)
    assert torch.allclose(fixed, learned, atol=1e-12)
    assert not conv.step_weights.requires_grad
    assert [name for name, _ in conv.named_parameters()] == ['temperature']
    assert 'step_weights' not in conv.state_dict()
    assert conv.step_weights.tolist() == pytest.approx(
        [0.3 * 0.7**t for t in range(num_steps)] + [0.7**num_steps]
    )
    assert str(conv).endswith(', teleport=0.3, learn_step_weights=False)')
    with torch.no_grad():
        conv.step_weights.zero_()
    conv.reset_parameters()
    assert torch.allclose(conv(x, edge_index), learned, atol=1e-12)


def test_apnet_conv_identity_init():
    conv = APNetConv(16, 16, proj_init='identity')
    assert torch.equal(conv.lin.weight, torch.eye(16))
    conv = APNetConv(16, 8, proj_init='identity')
    assert torch.equal(conv.lin.weight, torch.eye(8, 16))


def test_apnet_conv(make_random_graph):
    x, edge_index, _ = graph(
        channels=16, dtype=torch.float32, make_random_graph=make_random_graph
    )
    conv = APNetConv(16, 32, temperature=10.0, num_steps=1)
    out = conv(x, edge_index)
    assert out.size() == (8, 16)
    assert out.dtype == torch.float32

    out, (edge_index_out, alpha) = conv(
        x, edge_index, return_attention_weights=True
    )
    assert edge_index_out.size(1) == edge_index.size(1) + 8  # self-loops
    assert torch.equal(edge_index_out[:, : edge_index.size(1)], edge_index)
    assert alpha.size() == (edge_index_out.size(1),)
    assert bool((alpha > 0).all())
    row_sum = torch.zeros(8).index_add_(0, edge_index_out[1], alpha)
    assert torch.allclose(row_sum, torch.ones(8), atol=1e-6)

    with torch.no_grad():
        conv.temperature.fill_(3.0)
    conv.reset_parameters()
    assert conv.temperature.item() == 10.0


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
@pytest.mark.parametrize('num_steps', [1, 3])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('step_weights', ['last', 'fixed', 'learned'])
def test_apnet_conv_equals_reference(
    kernel,
    num_steps,
    weighted,
    step_weights,
    apnet_reference,
    make_random_graph,
    device,
):
    x, edge_index, edge_weight = graph(
        weighted=weighted, make_random_graph=make_random_graph, device=device
    )
    # Two nodes with self-loops of their own (which keep their weight):
    edge_index = torch.cat(
        [edge_index, edge_index.new_tensor([[1, 5], [1, 5]])], 1
    )
    if weighted:
        edge_weight = torch.cat(
            [edge_weight, edge_weight.new_tensor([2.0, 0.5])]
        )
        edge_weight.requires_grad_()
    x.requires_grad_()

    conv = conv64(
        6,
        4,
        temperature=3.0,
        learn_temperature=True,
        num_steps=num_steps,
        learn_step_weights=step_weights == 'learned',
        teleport=0.3 if step_weights == 'fixed' else None,
        kernel=kernel,
        device=device,
    )
    if step_weights == 'learned':
        # Away from where they start (one step's output), every term
        # counts.
        with torch.no_grad():
            conv.step_weights.copy_(torch.randn(num_steps + 1))
    out = conv(x, edge_index, edge_weight)
    expected = apnet_reference(
        x,
        edge_index,
        conv.lin.weight,
        edge_weight,
        conv.temperature,
        num_steps,
        step_weights=conv.step_weights,
    )
    assert torch.allclose(out, expected, atol=1e-10)

    # Gradients with respect to every input and parameter:
    inputs = [x, conv.lin.weight, conv.temperature]
    inputs += [edge_weight] if weighted else []
    inputs += [conv.step_weights] if step_weights == 'learned' else []
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-8)


def dropout_scales(drawn, edge_index, num_nodes):
    r"""The :math:`N \times N` scale of every step's attention dropout,
    from the per-edge draws of message passing (the edges, then a
    self-loop per node)."""
    loops = torch.arange(num_nodes, device=edge_index.device)
    target = torch.cat([edge_index[1], loops])
    source = torch.cat([edge_index[0], loops])
    scales = []
    for before, after in drawn:
        scale = dropout_scale(before, after).view(-1)
        dense = scale.new_zeros(num_nodes, num_nodes)
        dense[target, source] = scale
        scales.append(dense)
    return scales


@pytest.mark.parametrize('kernel', ['auto', 'sparse', 'message_passing'])
@pytest.mark.parametrize('num_steps', [1, 3])
def test_apnet_conv_attention_dropout_equals_reference(
    kernel, num_steps, monkeypatch, apnet_reference, make_random_graph, device
):
    x, edge_index, edge_weight = graph(
        make_random_graph=make_random_graph, device=device
    )
    x.requires_grad_()
    conv = conv64(
        6,
        4,
        temperature=3.0,
        num_steps=num_steps,
        teleport=0.3,
        dropout=0.4,
        kernel=kernel,
        device=device,
    )
    drawn = record_dropout(monkeypatch)
    out = conv(x, edge_index, edge_weight)
    assert len(drawn) == num_steps  # a new draw each step
    scales = dropout_scales(drawn, edge_index, x.size(0))
    kept = torch.cat([scale[scale != 0] for scale in scales])
    assert torch.allclose(kept, torch.full_like(kept, 1 / 0.6))
    entries = num_steps * (edge_index.size(1) + x.size(0))
    assert 0 < kept.numel() < entries  # some dropped, some kept
    expected = apnet_reference(
        x,
        edge_index,
        conv.lin.weight,
        edge_weight,
        conv.temperature,
        num_steps,
        step_weights=conv.step_weights,
        attention_scales=scales,
    )
    assert torch.allclose(out, expected, atol=1e-10)
    inputs = [x, conv.lin.weight, conv.temperature]
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-8)


def test_apnet_conv_attention_dropout_in_training_only(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, num_steps=2, teleport=0.2, dropout=0.5)
    plain = conv64(6, 4, num_steps=2, teleport=0.2)
    plain.load_state_dict(conv.state_dict())
    torch.manual_seed(1)
    first = conv(x, edge_index, edge_weight)
    torch.manual_seed(1)
    assert torch.equal(conv(x, edge_index, edge_weight), first)  # seeded
    assert not torch.allclose(first, plain(x, edge_index, edge_weight))
    conv.eval()
    out, (_, alpha) = conv(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    expected, (_, expected_alpha) = plain(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    assert torch.allclose(out, expected, atol=1e-12)
    assert torch.allclose(alpha, expected_alpha, atol=1e-12)
    assert 'dropout=0.5)' in repr(conv) and 'dropout' not in repr(plain)


def test_apnet_conv_attention_dropout_bad_probability():
    with pytest.raises(ValueError, match=r"'dropout' must lie in \[0, 1\]"):
        APNetConv(8, dropout=-0.1)


def dropout_graphs(make_random_graph):
    r"""Graphs whose entries reach the sparse kernels in other orders than
    their edges': unsorted edges, a node with a self-loop of its own, an
    :class:`EdgeIndex` sorted by target, and a bipartite graph (its
    self-loops entries of the pattern)."""
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    looped = torch.cat([edge_index, torch.tensor([[2], [2]])], dim=1)
    looped_weight = torch.cat([edge_weight, edge_weight.new_ones(1)])
    by_target = EdgeIndex(edge_index, sparse_size=(8, 8)).sort_by('col')[0]
    x_src, x_dst, bipartite, bipartite_weight = bipartite_graph()
    return [
        (x, edge_index, edge_weight),
        (x, looped, looped_weight),
        (x, by_target, None),
        ((x_src, x_dst), bipartite, bipartite_weight),
    ]


@pytest.mark.parametrize('case', range(4))
def test_apnet_conv_attention_dropout_same_draws_on_both_kernels(
    case, make_random_graph
):
    # The sparse kernels draw attention dropout in message passing's order
    # of the edges: one seed, the same layer on either kernel.
    x, edge_index, edge_weight = dropout_graphs(make_random_graph)[case]
    results = []
    for kernel in ('sparse', 'message_passing'):
        conv = conv64(
            (6, 6) if isinstance(x, tuple) else 6,
            4,
            temperature=2.0,
            num_steps=2,
            teleport=0.2,
            dropout=0.5,
            kernel=kernel,
        )
        inputs = [x] if torch.is_tensor(x) else list(x)
        inputs = [t.detach().requires_grad_() for t in inputs]
        torch.manual_seed(3)
        out = conv(
            inputs[0] if len(inputs) == 1 else tuple(inputs),
            edge_index,
            edge_weight,
        )
        params = [p for p in conv.parameters() if p.requires_grad]
        grads = torch.autograd.grad(out.square().sum(), inputs + params)
        results.append((out, grads))
    (out, grads), (expected, expected_grads) = results
    assert torch.allclose(out, expected, atol=1e-12)
    assert len(grads) == len(expected_grads)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-10)
    plain = conv64(
        (6, 6) if isinstance(x, tuple) else 6,
        4,
        temperature=2.0,
        num_steps=2,
        teleport=0.2,
    )
    assert not torch.allclose(out, plain(x, edge_index, edge_weight))


def test_apnet_conv_sparse_kernels_equal_message_passing(
    make_random_graph, device
):
    x, edge_index, edge_weight = graph(
        make_random_graph=make_random_graph, device=device
    )
    edge_index = torch.cat([edge_index, edge_index.new_tensor([[2], [2]])], 1)
    edge_weight = torch.cat([edge_weight, edge_weight.new_ones(1)])
    sparse = conv64(6, 4, num_steps=2, device=device)
    message_passing = conv64(
        6, 4, num_steps=2, kernel='message_passing', device=device
    )
    message_passing.load_state_dict(sparse.state_dict())
    out1, (index1, alpha1) = sparse(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    out2, (index2, alpha2) = message_passing(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    assert torch.allclose(out1, out2, atol=1e-12)
    assert torch.equal(index1, index2)
    assert index1.size(1) == edge_index.size(1) + 7  # node 2 has its loop
    assert alpha1.size() == (index1.size(1), 2)  # one column per step
    assert torch.allclose(alpha1, alpha2, atol=1e-12)


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_gradcheck(kernel, make_random_graph):
    x, edge_index, edge_weight = graph(
        num_nodes=5,
        num_edges=9,
        channels=3,
        make_random_graph=make_random_graph,
    )
    conv = conv64(3, 2, temperature=2.0, num_steps=2, kernel=kernel)
    x.requires_grad_()
    edge_weight.requires_grad_()

    def function(x, weight, edge_weight):
        return torch.func.functional_call(
            conv, {'lin.weight': weight}, (x, edge_index, edge_weight)
        )

    weight = conv.lin.weight.detach().clone().requires_grad_()
    assert gradcheck(function, (x, weight, edge_weight))


def test_apnet_conv_equals_agnn_conv(make_random_graph, device):
    x, edge_index, _ = graph(
        make_random_graph=make_random_graph, device=device
    )
    agnn = AGNNConv(requires_grad=True).double().to(device)
    with torch.no_grad():
        agnn.beta.fill_(7.5)
    conv = conv64(
        6, None, temperature=7.5, learn_temperature=True, device=device
    )
    assert isinstance(conv.lin, torch.nn.Identity)

    x1 = x.clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    out1 = agnn(x1, edge_index)
    out2 = conv(x2, edge_index)
    assert torch.allclose(out1, out2, atol=1e-12)

    grad_out = torch.randn_like(out1)
    grad_x1, grad_beta = torch.autograd.grad(out1, [x1, agnn.beta], grad_out)
    grad_x2, grad_temperature = torch.autograd.grad(
        out2, [x2, conv.temperature], grad_out
    )
    assert torch.allclose(grad_x1, grad_x2, atol=1e-10)
    assert torch.allclose(grad_beta.view(()), grad_temperature, atol=1e-10)


@pytest.mark.parametrize('layout', ['coo', 'csr', 'csc'])
def test_apnet_conv_sparse_adjacency(layout, make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    expected, (index, alpha) = conv(
        x, edge_index, edge_weight, return_attention_weights=True
    )

    to_sparse = {
        'coo': to_torch_coo_tensor,
        'csr': to_torch_csr_tensor,
        'csc': to_torch_csc_tensor,
    }[layout]
    adj = to_sparse(edge_index, edge_weight, size=(8, 8))
    out, (adj_alpha, values) = conv(x, adj.t(), return_attention_weights=True)
    assert torch.allclose(out, expected, atol=1e-12)
    assert adj_alpha.layout == adj.t().layout
    assert torch.equal(values, adj_alpha.values())
    dense_alpha = torch.zeros(8, 8, dtype=alpha.dtype)
    dense_alpha[index[1], index[0]] = alpha
    assert torch.allclose(adj_alpha.to_dense(), dense_alpha, atol=1e-12)

    # Values that require grad (weights being learned) get their gradient,
    # that of edge_weight:
    weight = edge_weight.clone().requires_grad_()
    (grad_expected,) = torch.autograd.grad(
        conv(x, edge_index, weight).square().sum(), weight
    )
    adj = to_sparse(edge_index, weight, size=(8, 8))
    out = conv(x, adj.t())
    assert torch.allclose(out, expected, atol=1e-12)
    (grad,) = torch.autograd.grad(out.square().sum(), weight)
    assert torch.allclose(grad, grad_expected, atol=1e-12)

    # Without values the sparse adjacency means unit weights:
    adj = to_sparse(edge_index, size=(8, 8))
    assert torch.allclose(conv(x, adj.t()), conv(x, edge_index), atol=1e-12)

    with pytest.raises(ValueError, match='not both'):
        conv(x, to_sparse(edge_index, edge_weight, (8, 8)).t(), edge_weight)
    with pytest.raises(ValueError, match=r'shape \[8, 8\]'):
        conv(x, to_sparse(edge_index, size=(9, 9)))


def test_apnet_conv_leaves_an_uncoalesced_adjacency_alone(make_random_graph):
    # Unsorted, with a duplicate: the caller's tensor must not be marked
    # coalesced, or torch reads it wrong afterwards.
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    edge_index = torch.cat([edge_index, edge_index[:, :1]], dim=1).flip(1)
    edge_weight = torch.cat([edge_weight, edge_weight[:1]]).flip(0)
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), edge_weight, (8, 8))
    dense = adj_t.to_dense()
    conv = conv64(6, 4)
    out = conv(x, adj_t)
    assert not adj_t.is_coalesced()
    assert torch.equal(adj_t.to_dense(), dense)
    assert torch.equal(adj_t.to_sparse_csr().to_dense(), dense)
    assert torch.allclose(out, conv(x, edge_index, edge_weight), atol=1e-12)


def test_apnet_conv_edge_index_input(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    expected = conv(x, edge_index, edge_weight)
    for sort_order in [None, 'row', 'col']:
        index = EdgeIndex(edge_index, sparse_size=(8, 8))
        weight = edge_weight
        if sort_order is not None:
            index, perm = index.sort_by(sort_order)
            weight = edge_weight[perm]
        assert torch.allclose(conv(x, index, weight), expected, atol=1e-12)
    with pytest.raises(ValueError, match='sparse size'):
        conv(x, EdgeIndex(edge_index, sparse_size=(9, 9)))
    # A size EdgeIndex inferred (the largest index + 1) is smaller than x's
    # when the last nodes are isolated: accepted, as by GATConv.
    x_more = torch.cat([x, torch.randn(2, 6, dtype=x.dtype)])
    for sort_order in ['row', 'col']:
        index, perm = EdgeIndex(edge_index).sort_by(sort_order)
        assert (
            max(size for size in index.sparse_size() if size is not None) <= 8
        )
        assert torch.allclose(
            conv(x_more, index, edge_weight[perm]),
            conv(x_more, edge_index, edge_weight),
            atol=1e-12,
        )


def test_apnet_conv_reads_and_keeps_the_edge_index_cache(
    make_random_graph, monkeypatch
):
    # A sorted EdgeIndex of the layer's size gives the fused path its CSR
    # arrays from its own cache, which it keeps: a second layer (no
    # structure cache of its own) sorts nothing. Same output, attention
    # and gradient as a plain tensor, in both flows.
    import torch_geometric.utils as pyg_utils

    from apnet_pyg.nn import functional

    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    for flow, sort_order in [
        ('source_to_target', 'row'),
        ('source_to_target', 'col'),
        ('target_to_source', 'row'),
    ]:
        index, perm = EdgeIndex(edge_index, sparse_size=(8, 8)).sort_by(
            sort_order
        )
        weight = edge_weight[perm]
        plain = index.as_tensor().clone()
        conv = conv64(6, 4, flow=flow)
        x1 = x.clone().requires_grad_()
        out, (_, alpha) = conv(
            x1, index, weight, return_attention_weights=True
        )
        assert index._T_perm is not None  # filled in the caller's EdgeIndex
        x2 = x.clone().requires_grad_()
        expected, (_, expected_alpha) = conv64(6, 4, flow=flow)(
            x2, plain, weight, return_attention_weights=True
        )
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(alpha, expected_alpha)
        out.square().sum().backward()
        expected.square().sum().backward()
        torch.testing.assert_close(x1.grad, x2.grad)

        def no_sort(*args, **kwargs):
            raise AssertionError('sorted again')

        with monkeypatch.context() as patch:
            patch.setattr(pyg_utils, 'index_sort', no_sort)
            patch.setattr(functional.csr, '_argsort', no_sort)
            torch.testing.assert_close(
                conv64(6, 4, flow=flow)(x, index, weight), expected
            )


def test_apnet_conv_permutation_equivariance(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, num_steps=2)
    perm = torch.randperm(8)
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(8)
    out = conv(x, edge_index, edge_weight)
    out_perm = conv(x[perm], inverse[edge_index], edge_weight)
    assert torch.allclose(out_perm, out[perm], atol=1e-12)
    # The order of the edges does not matter either (sorted inputs take a
    # shortcut in the pattern construction; shuffled ones do not):
    for edge_perm in [
        torch.randperm(edge_index.size(1)),
        torch.argsort(edge_index[0] * 8 + edge_index[1]),
        torch.argsort(edge_index[1] * 8 + edge_index[0]),
    ]:
        out_edges = conv(x, edge_index[:, edge_perm], edge_weight[edge_perm])
        assert torch.allclose(out_edges, out, atol=1e-12)


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_isolated_nodes(kernel):
    x = torch.randn(5, 4, dtype=torch.float64)
    edge_index = torch.tensor([[0, 1], [1, 0]])  # nodes 2, 3, 4 isolated
    conv = conv64(4, 3, kernel=kernel)
    out = conv(x, edge_index)
    assert torch.equal(out[2:], x[2:])

    # Without self-loops an isolated node receives nothing:
    conv = conv64(4, 3, add_self_loops=False, kernel=kernel)
    out = conv(x, edge_index)
    assert torch.equal(out[2:], torch.zeros(3, 4, dtype=torch.float64))
    assert torch.allclose(out[:2], x[[1, 0]])
    out = conv(x, edge_index[:, :0])
    assert torch.equal(out, torch.zeros_like(x))


def test_apnet_conv_threshold_leaves_only_self_loops():
    # Mutually orthogonal features: a cosine threshold keeps no edge, and
    # propagation over self-loops alone is the identity.
    from apnet_pyg.graph import cosine_threshold_graph

    x = torch.eye(6, dtype=torch.float64) * torch.arange(1, 7)
    edge_index = cosine_threshold_graph(x, threshold=0.5, loop=True)
    assert torch.equal(edge_index, torch.arange(6).repeat(2, 1))
    conv = conv64(6, None)
    assert torch.equal(conv(x, edge_index), x)


def test_apnet_conv_zero_features_self_loop():
    # A zero row has cosine 0 with every row, itself included.
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    edge_index = torch.tensor([[1], [0]])
    for kernel in ['sparse', 'message_passing']:
        out = conv64(2, None, temperature=2.0, kernel=kernel)(x, edge_index)
        assert torch.allclose(out[0], 0.5 * x[1])


def test_apnet_conv_existing_self_loop_keeps_its_weight(apnet_reference):
    x = torch.randn(3, 4, dtype=torch.float64)
    edge_index = torch.tensor([[0, 1, 1], [1, 0, 1]])  # self-loop on 1
    edge_weight = torch.tensor([1.0, 2.0, 0.25], dtype=torch.float64)
    conv = conv64(4, 4)
    out, (index, alpha) = conv(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    assert index.tolist() == [[0, 1, 1, 0, 2], [1, 0, 1, 0, 2]]
    expected = apnet_reference(
        x, edge_index, conv.lin.weight, edge_weight, conv.temperature
    )
    assert torch.allclose(out, expected, atol=1e-12)


def test_apnet_conv_repeated_edges_add_their_weights():
    x = torch.randn(3, 4, dtype=torch.float64)
    conv = conv64(4, 4)
    repeated = torch.tensor([[0, 0, 2], [1, 1, 1]])
    single = torch.tensor([[0, 2], [1, 1]])
    out = conv(x, repeated)
    expected = conv(x, single, torch.tensor([2.0, 1.0], dtype=torch.float64))
    assert torch.allclose(out, expected, atol=1e-12)


def test_apnet_conv_temperature_zero_is_prior_propagation(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, temperature=0.0, add_self_loops=False)
    out = conv(x, edge_index, edge_weight)
    prior = to_dense_adj(edge_index, edge_attr=edge_weight, max_num_nodes=8)[
        0
    ].t()
    degree = prior.sum(dim=-1, keepdim=True)
    expected = (prior / degree.clamp_min(1e-300)) @ x
    assert torch.allclose(out, expected, atol=1e-12)


@pytest.mark.parametrize('temperature', [30.0, 100.0, 1000.0])
def test_apnet_conv_high_temperature_is_stable(temperature, make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    x = x.float().requires_grad_()
    conv = APNetConv(6, 4, temperature=temperature, proj_init='glorot')
    out = conv(x, edge_index, edge_weight.float())
    out.sum().backward()
    assert bool(torch.isfinite(out).all())
    assert bool(torch.isfinite(x.grad).all())
    assert bool(torch.isfinite(conv.lin.weight.grad).all())
    # ... and still equals the float64 computation:
    conv64_ = APNetConv(6, 4, temperature=temperature).double()
    conv64_.load_state_dict(conv.state_dict())
    expected = conv64_(x.detach().double(), edge_index, edge_weight)
    assert torch.allclose(out.double(), expected, atol=1e-4)


def test_apnet_conv_batch_of_graphs(make_random_graph):
    graphs = []
    for seed, num_nodes in enumerate([5, 8, 3]):
        x, edge_index, edge_weight = graph(
            num_nodes,
            2 * num_nodes,
            seed=seed,
            make_random_graph=make_random_graph,
        )
        graphs.append(
            Data(x=x, edge_index=edge_index, edge_weight=edge_weight)
        )
    batch = Batch.from_data_list(graphs)
    conv = conv64(6, 4, num_steps=2)
    out = conv(batch.x, batch.edge_index, batch.edge_weight)
    expected = torch.cat(
        [conv(g.x, g.edge_index, g.edge_weight) for g in graphs]
    )
    assert torch.allclose(out, expected, atol=1e-12)


def test_apnet_conv_equals_dense_on_batch(make_random_graph, device):
    from torch_geometric.utils import to_dense_batch

    graphs = []
    for seed, num_nodes in enumerate([6, 4, 7]):
        x, edge_index, edge_weight = graph(
            num_nodes,
            3 * num_nodes,
            seed=seed,
            make_random_graph=make_random_graph,
        )
        graphs.append(
            Data(x=x, edge_index=edge_index, edge_weight=edge_weight)
        )
    batch = Batch.from_data_list(graphs).to(device)
    x = batch.x.clone().requires_grad_()
    conv = conv64(6, 4, num_steps=2, learn_temperature=True, device=device)
    dense = (
        DenseAPNetConv(
            6,
            4,
            num_steps=2,
            learn_temperature=True,
            learn_step_weights=False,
            teleport=None,
        )
        .double()
        .to(device)
    )
    dense.load_state_dict(conv.state_dict())

    out = conv(x, batch.edge_index, batch.edge_weight)
    dense_x, mask = to_dense_batch(x, batch.batch)
    adj = to_dense_adj(
        batch.edge_index, batch.batch, batch.edge_weight
    ).transpose(1, 2)
    dense_out = dense(dense_x, adj, mask)[mask]
    assert torch.allclose(out, dense_out, atol=1e-12)

    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(
        out, [x, conv.lin.weight, conv.temperature], grad_out
    )
    dense_grads = torch.autograd.grad(
        dense_out, [x, dense.lin.weight, dense.temperature], grad_out
    )
    for grad, dense_grad in zip(grads, dense_grads):
        assert torch.allclose(grad, dense_grad, atol=1e-10)


def test_apnet_conv_target_to_source_flow(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    for kernel in ['sparse', 'message_passing']:
        reversed_conv = conv64(6, 4, flow='target_to_source', kernel=kernel)
        reversed_conv.load_state_dict(conv.state_dict())
        assert torch.allclose(
            reversed_conv(x, edge_index.flip(0), edge_weight),
            conv(x, edge_index, edge_weight),
            atol=1e-12,
        )
    adj = to_torch_csr_tensor(edge_index, size=(8, 8))
    with pytest.raises(ValueError, match='source_to_target'):
        reversed_conv(x, adj)


def test_apnet_conv_lazy_in_channels(make_random_graph):
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    for proj_init in ['glorot', 'identity']:
        conv = APNetConv(-1, 4, proj_init=proj_init).double()
        assert conv(x, edge_index).size() == (8, 6)
        assert conv.lin.weight.size() == (4, 6)
    assert torch.equal(conv.lin.weight, torch.eye(4, 6, dtype=torch.float64))
    # Once it has seen an input, its size is checked as a declared one's:
    with pytest.raises(ValueError, match="'x' must have 6 features"):
        conv(x[:, :5], edge_index)

    # One shared projection needs sides of one size, as to_hetero gives
    # a lazy layer node types of different sizes:
    x_src, x_dst, bipartite_index, _ = bipartite_graph(channels=(6, 3))
    with pytest.raises(ValueError, match=r'in_channels=\(-1, -1\)'):
        APNetConv(-1, 4).double()((x_src, x_dst), bipartite_index)
    # Step weights (learned or fixed) mix in x[1]: sides of one size, or
    # the last step's output alone.
    for learned in (True, False):
        with pytest.raises(ValueError, match='pass teleport=None'):
            APNetConv((-1, -1), 4, learn_step_weights=learned).double()(
                (x_src, x_dst), bipartite_index
            )
    conv = APNetConv(
        (-1, -1), 4, learn_step_weights=False, teleport=None
    ).double()
    assert conv((x_src, x_dst), bipartite_index).shape == (4, 6)
    with pytest.raises(ValueError, match=r"'x\[1\]' must have 3 features"):
        conv((x_src, x_src[:4]), bipartite_index)


def test_apnet_conv_reuses_the_pattern_of_the_same_edge_index(
    make_random_graph,
):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    out = conv(x, edge_index, edge_weight)
    structure = conv._cached_structure[3]
    assert torch.equal(conv(x, edge_index, edge_weight), out)
    assert conv._cached_structure[3] is structure  # reused

    # Edited in place, the same tensor gives the new graph's answer:
    edge_index[0, 0] = (edge_index[0, 0] + 1) % 8
    expected = conv64(6, 4)(x, edge_index.clone(), edge_weight)
    assert torch.allclose(
        conv(x, edge_index, edge_weight), expected, atol=1e-12
    )
    assert conv._cached_structure[3] is not structure
    # ... and so does another tensor, or another flow of the same one:
    other = make_random_graph(8, 20, torch.Generator().manual_seed(5))
    assert torch.allclose(
        conv(x, other), conv64(6, 4)(x, other.clone()), atol=1e-12
    )
    conv.flow = 'target_to_source'
    assert torch.allclose(
        conv(x, other), conv64(6, 4)(x, other.flip(0)), atol=1e-12
    )


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_cached_keeps_the_first_structure(
    kernel, make_random_graph, monkeypatch
):
    # cached=True (GCNConv's idiom, for a static graph): the structure of
    # the first call serves every later one, whatever tensor holds the
    # edges; reset by nothing but a new layer.
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, kernel=kernel, cached=True)
    out = conv(x, edge_index, edge_weight)

    def no_structure(*args, **kwargs):
        raise AssertionError('the structure was built again')

    monkeypatch.setattr(apnet_conv, 'edge_index_arrays', no_structure)
    monkeypatch.setattr(apnet_conv, '_lacks_self_loop', no_structure)
    assert torch.equal(conv(x, edge_index.clone(), edge_weight), out)
    # The promise is the caller's: another graph reads the cached one.
    other = make_random_graph(8, 20, torch.Generator().manual_seed(5))
    assert conv(x, other).shape == out.shape


@pytest.mark.parametrize('cached', [True, False])
def test_apnet_conv_dropout_switches_kernels_without_a_new_structure(
    cached, make_random_graph, monkeypatch
):
    # Training with attention dropout and evaluating both run on the
    # sparse kernels, from one structure, with cached=True or for the same
    # edge_index tensor.
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, num_steps=2, teleport=0.2, dropout=0.5, cached=cached)
    conv(x, edge_index, edge_weight)  # training: message passing
    conv.eval()
    expected = conv(x, edge_index, edge_weight)  # the sparse kernels

    def no_structure(*args, **kwargs):
        raise AssertionError('the structure was built again')

    monkeypatch.setattr(apnet_conv, 'edge_index_arrays', no_structure)
    monkeypatch.setattr(apnet_conv, '_lacks_self_loop', no_structure)
    monkeypatch.setattr(apnet_conv, '_target_arrays', no_structure)
    conv.train()
    conv(x, edge_index, edge_weight)
    conv.eval()
    assert torch.equal(conv(x, edge_index, edge_weight), expected)


def test_apnet_conv_cached_compiles_once_without_the_sort(
    make_random_graph, monkeypatch
):
    # Under torch.compile the structure is otherwise built inside every
    # compiled call (the sort as one custom operator); cached=True builds
    # it once and the compiled graph reads it.
    x, edge_index, edge_weight = graph(
        dtype=torch.float32, make_random_graph=make_random_graph
    )
    conv = APNetConv(6, 4, cached=True)
    expected = conv(x, edge_index, edge_weight)  # eager: fills the cache
    calls = []
    real = apnet_conv.edge_index_arrays

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(apnet_conv, 'edge_index_arrays', counted)
    compiled = torch.compile(conv, fullgraph=True, backend='aot_eager')
    for _ in range(2):
        torch.testing.assert_close(
            compiled(x, edge_index, edge_weight), expected
        )
    assert not calls
    torch._dynamo.reset()


def test_apnet_conv_int32_edge_index_on_every_kernel(make_random_graph):
    # PyG's scatter takes int64 indices; message passing (and so the
    # explainer) converts them.
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    expected = conv64(6, 4)(x, edge_index, edge_weight)
    for kernel in ('sparse', 'message_passing'):
        out = conv64(6, 4, kernel=kernel)(x, edge_index.int(), edge_weight)
        assert torch.allclose(out, expected, atol=1e-12)


# Bipartite graphs ############################################################


def bipartite_graph(
    num_src=7, num_dst=4, num_edges=15, channels=(6, 6), seed=0, device='cpu'
):
    # Drawn on CPU: the same graph on every device.
    generator = torch.Generator().manual_seed(seed)
    x_src = torch.randn(
        num_src, channels[0], generator=generator, dtype=torch.float64
    )
    x_dst = torch.randn(
        num_dst, channels[1], generator=generator, dtype=torch.float64
    )
    pairs = torch.randperm(num_src * num_dst, generator=generator)[:num_edges]
    edge_index = torch.stack([pairs // num_dst, pairs % num_dst])
    edge_weight = (
        torch.rand(num_edges, generator=generator, dtype=torch.float64) + 0.1
    )
    return tuple(t.to(device) for t in (x_src, x_dst, edge_index, edge_weight))


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_bipartite_step_weights_equal_reference(kernel, device):
    # On a bipartite graph the input term of the learned combination is
    # the targets' own features x[1]; step t's output is that of a layer
    # of t steps.
    x_src, x_dst, edge_index, edge_weight = bipartite_graph(device=device)
    x_src.requires_grad_()
    x_dst.requires_grad_()
    conv = conv64(
        (6, 6),
        3,
        temperature=2.0,
        kernel=kernel,
        num_steps=2,
        learn_step_weights=True,
        device=device,
    )
    with torch.no_grad():
        conv.step_weights.copy_(torch.tensor([0.5, -1.0, 2.0]))
    out = conv((x_src, x_dst), edge_index, edge_weight)
    weights = (conv.lin_src.weight, conv.lin_dst.weight)
    steps = [x_dst] + [
        bipartite_reference(
            x_src,
            x_dst,
            edge_index,
            *weights,
            edge_weight,
            conv.temperature,
            t,
        )
        for t in (1, 2)
    ]
    expected = sum(w * step for w, step in zip(conv.step_weights, steps))
    assert torch.allclose(out, expected, atol=1e-12)
    inputs = [x_src, x_dst, conv.step_weights, *weights]
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-10)


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
@pytest.mark.parametrize('shared', [True, False])
@pytest.mark.parametrize('num_steps', [1, 2])
def test_apnet_conv_bipartite_equals_reference(
    kernel, shared, num_steps, device
):
    channels = (6, 6) if shared else (6, 5)
    x_src, x_dst, edge_index, edge_weight = bipartite_graph(
        channels=channels, device=device
    )
    x_src.requires_grad_()
    x_dst.requires_grad_()
    conv = conv64(
        6 if shared else channels,
        3,
        temperature=2.0,
        learn_temperature=True,
        kernel=kernel,
        num_steps=num_steps,
        device=device,
    )
    if shared:  # One projection f for both sides.
        assert conv.lin_src is None and conv.lin_dst is None
        weight_src = weight_dst = conv.lin.weight
    else:
        assert conv.lin is None
        weight_src, weight_dst = conv.lin_src.weight, conv.lin_dst.weight
    assert weight_src.size(1) == channels[0]

    out = conv((x_src, x_dst), edge_index, edge_weight, size=(7, 4))
    assert out.size() == (4, 6)  # targets x source features
    expected = bipartite_reference(
        x_src,
        x_dst,
        edge_index,
        weight_src,
        weight_dst,
        edge_weight,
        conv.temperature,
        num_steps,
    )
    assert torch.allclose(out, expected, atol=1e-12)

    inputs = [x_src, x_dst, conv.temperature, *{weight_src, weight_dst}]
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    for grad, expected_grad in zip(grads, expected_grads):
        assert torch.allclose(grad, expected_grad, atol=1e-10)

    # The attention covers the given edges, then the self-loops added to
    # the targets below both node counts (here all 4) that have none.
    _, (index, alpha) = conv(
        (x_src, x_dst), edge_index, edge_weight, return_attention_weights=True
    )
    num_edges = edge_index.size(1)
    assert torch.equal(index[:, :num_edges], edge_index)
    has_loop = edge_index[0] == edge_index[1]
    lacking = torch.ones(4, dtype=torch.bool, device=device)
    lacking[edge_index[1, has_loop]] = False
    expected_loops = torch.arange(4, device=device)[lacking]
    assert torch.equal(index[:, num_edges:], expected_loops.repeat(2, 1))
    alpha = alpha if num_steps == 1 else alpha[:, -1]
    row_sum = alpha.new_zeros(4).index_add_(0, index[1], alpha)
    assert torch.allclose(row_sum, torch.ones_like(row_sum))


def test_apnet_conv_bipartite_same_nodes_equals_homogeneous(make_random_graph):
    # A pair of the same features is the homogeneous layer, self-loops
    # included (added on both sides).
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    for add_self_loops in (True, False):
        conv = conv64(6, 4, add_self_loops=add_self_loops)
        assert torch.allclose(
            conv((x, x.clone()), edge_index, edge_weight),
            conv(x, edge_index, edge_weight),
            atol=1e-12,
        )


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_mini_batch_equals_the_full_graph_sliced(
    kernel, make_random_graph
):
    # NeighborLoader's convention: the first batch_size nodes are the
    # targets, conv((x, x[:batch_size]), edge_index) on the edges into
    # them. With self-loops (the default) the result is the full-graph
    # call's rows of the targets, for one step (later steps would need the
    # sources' updated features too, which a mini-batch does not have).
    x, edge_index, edge_weight = graph(
        num_nodes=12, num_edges=40, make_random_graph=make_random_graph
    )
    batch_size = 5
    into_batch = edge_index[1] < batch_size
    conv = conv64(6, 4, num_steps=1, kernel=kernel)
    full = conv(x, edge_index, edge_weight)
    batch = conv(
        (x, x[:batch_size]),
        edge_index[:, into_batch],
        edge_weight[into_batch],
    )
    torch.testing.assert_close(batch, full[:batch_size], rtol=0, atol=1e-12)
    assert batch.size() == (batch_size, 6)


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_bipartite_with_more_targets_than_sources(kernel):
    # Self-loops for the first min(N_src, N_dst) targets only; a target
    # beyond them without an edge gets zero, as in GATConv.
    x_dst, x_src, edge_index, edge_weight = bipartite_graph(
        num_src=7, num_dst=4
    )
    edge_index = edge_index.flip(0)  # 4 sources, 7 targets
    conv = conv64(6, 3, kernel=kernel)
    out, (index, alpha) = conv(
        (x_src, x_dst), edge_index, edge_weight, return_attention_weights=True
    )
    expected = bipartite_reference(
        x_src,
        x_dst,
        edge_index,
        conv.lin.weight,
        conv.lin.weight,
        edge_weight,
        conv.temperature,
    )
    assert torch.allclose(out, expected, atol=1e-12)
    assert bool((index[:, edge_index.size(1) :] < 4).all())


def test_apnet_conv_bipartite_bad_input():
    x_src, x_dst, edge_index, _ = bipartite_graph()
    conv = conv64(6, 3)
    with pytest.raises(ValueError, match="'size'"):
        conv((x_src, x_dst), edge_index, size=(7, 5))
    with pytest.raises(ValueError, match='x_dst cannot be None'):
        conv((x_src, None), edge_index)
    with pytest.raises(ValueError, match='same number of features'):
        conv64(-1, None)((x_src, x_dst[:, :5]), edge_index)
    with pytest.raises(ValueError, match=r"'x\[1\]' must have 6 features"):
        conv((x_src, x_dst[:, :5]), edge_index)
    with pytest.raises(ValueError, match=r'x=\(x_src, x_dst\)'):
        conv64((6, 6), 3)(x_src, edge_index)
    with pytest.raises(RuntimeError, match=r'\[0, 6\] \(sources'):
        conv((x_src, x_dst), edge_index.flip(0))
    # PyG pairs x[k] with edge_index[k], which under the reversed flow
    # makes x[0] the targets; refused rather than read either way:
    for kernel in ('sparse', 'message_passing'):
        with pytest.raises(ValueError, match='flip edge_index'):
            conv64(6, 3, flow='target_to_source', kernel=kernel)(
                (x_src, x_dst), edge_index.flip(0)
            )
    # A bipartite sparse adjacency is [targets, sources]:
    adj_t = to_torch_csr_tensor(edge_index.flip(0), size=(4, 7))
    assert torch.allclose(
        conv((x_src, x_dst), adj_t),
        conv((x_src, x_dst), edge_index),
        atol=1e-12,
    )


def hetero_graph():
    from torch_geometric.data import HeteroData

    generator = torch.Generator().manual_seed(0)
    data = HeteroData()
    data['paper'].x = torch.randn(6, 8, generator=generator)
    data['author'].x = torch.randn(4, 8, generator=generator)
    data['author', 'writes', 'paper'].edge_index = torch.tensor(
        [[0, 1, 1, 2, 3, 3], [0, 0, 2, 3, 4, 5]]
    )
    data['paper', 'written_by', 'author'].edge_index = data[
        'author', 'writes', 'paper'
    ].edge_index.flip(0)
    data['paper', 'cites', 'paper'].edge_index = torch.tensor(
        [[0, 1, 2, 3, 4, 5, 1], [1, 2, 3, 4, 5, 0, 3]]
    )
    return data


def test_apnet_conv_to_hetero():
    from torch_geometric.nn import Linear, to_hetero

    data = hetero_graph()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = Linear(-1, 16)
            # As for GATConv, PyG refuses add_self_loops=True on modules
            # that serve bipartite edge types.
            self.conv = APNetConv(
                16, 8, add_self_loops=False, proj_init='glorot'
            )

        def forward(self, x, edge_index):
            return self.conv(self.lin(x).relu(), edge_index)

    model = to_hetero(Net(), data.metadata(), aggr='sum')
    out = model(data.x_dict, data.edge_index_dict)
    assert out['paper'].size() == (6, 16) and out['author'].size() == (4, 16)
    assert bool(torch.isfinite(out['paper']).all())

    # Each edge type has its own APNetConv; the papers sum the cites
    # (homogeneous) and writes (bipartite) messages.
    h = {key: model.lin[key](x).relu() for key, x in data.x_dict.items()}
    convs = model.conv
    cites = convs['paper__cites__paper'](
        h['paper'], data['paper', 'cites', 'paper'].edge_index
    )
    writes = convs['author__writes__paper'](
        (h['author'], h['paper']), data['author', 'writes', 'paper'].edge_index
    )
    assert torch.allclose(out['paper'], cites + writes, atol=1e-6)
    written_by = convs['paper__written_by__author'](
        (h['paper'], h['author']),
        data['paper', 'written_by', 'author'].edge_index,
    )
    assert torch.allclose(out['author'], written_by, atol=1e-6)


def test_apnet_conv_hetero_conv():
    from torch_geometric.nn import HeteroConv

    data = hetero_graph()
    hetero = HeteroConv(
        {
            ('paper', 'cites', 'paper'): APNetConv(8, 4),
            # One projection per side, or one shared (same feature sizes):
            ('author', 'writes', 'paper'): APNetConv(
                (8, 8), 4, add_self_loops=False
            ),
            ('paper', 'written_by', 'author'): APNetConv(
                8, 4, add_self_loops=False
            ),
        },
        aggr='sum',
    )
    out = hetero(data.x_dict, data.edge_index_dict)
    assert out['paper'].size() == (6, 8)  # the papers' features, propagated
    assert out['author'].size() == (4, 8)  # the papers' features, at authors
    expected = hetero.convs['paper', 'written_by', 'author'](
        (data['paper'].x, data['author'].x),
        data['paper', 'written_by', 'author'].edge_index,
    )
    assert torch.allclose(out['author'], expected)


def test_apnet_conv_neighbor_loader():
    from torch_geometric.loader import NeighborLoader
    from torch_geometric.sampler import NeighborSampler, SamplerOutput
    from torch_geometric.typing import WITH_PYG_LIB, WITH_TORCH_SPARSE

    class FullNeighborSampler(NeighborSampler):
        r"""Takes every in-neighbour, hop by hop, in plain PyTorch (the test
        double of pyg-lib's or torch-sparse's sampling routine, which are
        not installed here); the same output format."""

        def _sample(self, seed, seed_time=None, **kwargs):
            nodes = seed.tolist()
            local = {node: i for i, node in enumerate(nodes)}
            row, col, edge = [], [], []
            num_nodes, num_edges, frontier = [len(nodes)], [], list(nodes)
            for _ in self.num_neighbors.get_mapped_values():
                new, count = [], 0
                for target in frontier:
                    for k in range(
                        int(self.colptr[target]), int(self.colptr[target + 1])
                    ):
                        source = int(self.row[k])
                        if source not in local:
                            local[source] = len(nodes)
                            nodes.append(source)
                            new.append(source)
                        row.append(local[source])
                        col.append(local[target])
                        edge.append(k)  # The loader maps it by perm.
                        count += 1
                num_nodes.append(len(new))
                num_edges.append(count)
                frontier = new
            return SamplerOutput(
                torch.tensor(nodes),
                torch.tensor(row),
                torch.tensor(col),
                torch.tensor(edge),
                None,
                num_nodes,
                num_edges,
            )

    generator = torch.Generator().manual_seed(0)
    data = Data(
        x=torch.randn(60, 6, generator=generator),
        edge_index=torch.randint(0, 60, (2, 120), generator=generator),
    )
    data.edge_weight = torch.rand(120, generator=generator) + 0.1
    # The defaults take two steps: two layers see 4 hops.
    convs = torch.nn.ModuleList([APNetConv(6, 4), APNetConv(6)])
    hops = [-1] * sum(conv.num_steps for conv in convs)

    def model(x, edge_index, edge_weight):
        for conv in convs:
            x = conv(x, edge_index, edge_weight).tanh()
        return x

    expected = model(data.x, data.edge_index, data.edge_weight)
    sampler = None
    if not (WITH_PYG_LIB or WITH_TORCH_SPARSE):
        with warnings.catch_warnings():  # "... without pyg-lib: deprecated"
            warnings.simplefilter('ignore', UserWarning)
            sampler = FullNeighborSampler(data, hops)
    loader = NeighborLoader(
        data, num_neighbors=hops, batch_size=8, neighbor_sampler=sampler
    )
    seen = 0
    for batch in loader:
        assert batch.num_nodes > batch.batch_size  # a real subgraph
        out = model(batch.x, batch.edge_index, batch.edge_weight)
        seeds = batch.n_id[: batch.batch_size]
        assert torch.allclose(
            out[: batch.batch_size], expected[seeds], atol=1e-6
        )
        seen += batch.batch_size
    assert seen == 60


# MessagePassing arguments ####################################################


def test_apnet_conv_rejects_what_the_kernels_cannot_honour(
    make_random_graph,
):
    for kwargs in [
        {'aggr': 'mean'},
        {'aggr': 'max'},
        {'node_dim': 1},
        {'decomposed_layers': 2},
        {'aggr_kwargs': {}},
    ]:
        for kernel in ('auto', 'sparse', 'triton'):
            with pytest.raises(ValueError, match='cannot honour'):
                APNetConv(6, 4, kernel=kernel, **kwargs)
    # What it honours:
    APNetConv(6, 4, aggr='sum', node_dim=0, flow='target_to_source')

    # Message passing honours them; aggr='mean' divides by the in-degree
    # (self-loop included):
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    mean = conv64(6, 4, aggr='mean', kernel='message_passing')
    add = conv64(6, 4, kernel='message_passing')
    degree = torch.bincount(edge_index[1], minlength=8) + 1
    assert torch.allclose(
        mean(x, edge_index),
        add(x, edge_index) / degree.unsqueeze(-1),
        atol=1e-12,
    )


# Input checks ################################################################


def test_apnet_conv_bad_input(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    with pytest.raises(ValueError, match="'x' must have 2 dimensions"):
        conv(x[None], edge_index)
    with pytest.raises(ValueError, match='6 features'):
        conv(x[:, :5], edge_index)
    with pytest.raises(ValueError, match='floating-point'):
        conv(x.long(), edge_index)
    with pytest.raises(ValueError, match=r'shape \[2, num_edges\]'):
        conv(x, edge_index[0])
    with pytest.raises(ValueError, match='int64 or int32 indices'):
        conv(x, edge_index.double())
    with pytest.raises(ValueError, match='one weight per edge'):
        conv(x, edge_index, edge_weight[:-1])
    with pytest.raises(ValueError, match='floating-point'):
        conv(x, edge_index, torch.ones(edge_index.size(1), dtype=torch.long))
    with pytest.raises(ValueError, match="'size'"):
        conv(x, edge_index, size=(8, 9))

    with pytest.raises(ValueError, match='num_steps'):
        APNetConv(6, num_steps=0)
    with pytest.raises(ValueError, match='temperature'):
        APNetConv(6, temperature=math.nan)
    with pytest.raises(ValueError, match='proj_channels'):
        APNetConv(6, proj_channels=0)
    with pytest.raises(ValueError, match='proj_init'):
        APNetConv(6, proj_init='orthogonal')


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_index_out_of_range(kernel, make_random_graph):
    # Always checked, without a host synchronisation (an asynchronous
    # assertion); in debug mode with the offending values.
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, kernel=kernel)
    for bad in [torch.tensor([[0], [8]]), torch.tensor([[-1], [2]])]:
        bad_index = torch.cat([edge_index, bad], dim=1)
        with pytest.raises(RuntimeError, match=r'outside \[0, 7\]'):
            conv(x, bad_index)
        with torch_geometric.debug():
            with pytest.raises(
                ValueError, match=r'indices in \[-?\d, \d\], outside'
            ):
                conv(x, bad_index)


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_refuses_bad_values_in_every_mode(
    kernel, make_random_graph
):
    # NaN features and weights that are not finite and strictly positive
    # are refused the same way in debug mode and outside it: a zero weight
    # would otherwise drop its edge silently (log 0) outside debug mode.
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, kernel=kernel)
    bad_inputs = [
        ("'x' contains NaN or infinite", x.clone().fill_(math.nan), None),
        ("'edge_weight' contains NaN", x, edge_weight.clone().fill_(math.inf)),
        ('strictly positive', x, edge_weight * 0),
        ('strictly positive', x, -edge_weight),
    ]
    for message, x_bad, weight_bad in bad_inputs:
        for debug in (True, False):
            with torch_geometric.debug() if debug else nullcontext():
                with pytest.raises(ValueError, match=message):
                    conv(x_bad, edge_index, weight_bad)
    x_src, x_dst, bipartite_index, _ = bipartite_graph()
    with pytest.raises(ValueError, match=r"'x\[1\]' contains NaN"):
        conv((x_src, x_dst.clone().fill_(math.nan)), bipartite_index)


def test_apnet_conv_refuses_bad_values_compiled(make_random_graph):
    # Compiled, the check is an asynchronous assertion (no graph break; on
    # a GPU a device-side assertion, no host synchronisation).
    x, edge_index, edge_weight = graph(
        dtype=torch.float32, make_random_graph=make_random_graph
    )
    conv = APNetConv(6, 4)
    compiled = torch.compile(conv, fullgraph=True, backend='aot_eager')
    compiled(x, edge_index, edge_weight)
    with pytest.raises(RuntimeError, match='strictly positive'):
        compiled(x, edge_index, edge_weight * 0)
    torch._dynamo.reset()


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_apnet_conv_dtype(dtype, make_random_graph):
    x, edge_index, edge_weight = graph(
        dtype=dtype, make_random_graph=make_random_graph
    )
    conv = APNetConv(6, 4).to(dtype)
    out, (_, alpha) = conv(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    assert out.dtype == dtype and alpha.dtype == dtype


def test_apnet_conv_edge_weight_in_another_dtype(make_random_graph):
    # Weights of another floating dtype are used in the dtype of x.
    x, edge_index, edge_weight = graph(
        dtype=torch.float32, make_random_graph=make_random_graph
    )
    conv = APNetConv(6, 4)
    expected = conv(x, edge_index, edge_weight)
    assert torch.equal(conv(x, edge_index, edge_weight.double()), expected)

    # Converted before the log, as DenseAPNetConv does: bfloat16 weights
    # under float64 features give the float64 answer of those weights.
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    low = edge_weight.bfloat16()
    conv = conv64(6, 4)
    expected = conv(x, edge_index, low.double())
    assert torch.allclose(conv(x, edge_index, low), expected, atol=1e-12)
    dense = DenseAPNetConv(
        6, 4, num_steps=1, learn_step_weights=False, teleport=None
    )
    dense = dense.double()
    dense.load_state_dict(conv.state_dict())
    adj = torch.zeros(8, 8, dtype=torch.bfloat16)
    adj[edge_index[1], edge_index[0]] = low
    assert torch.allclose(dense(x, adj)[0], expected, atol=1e-12)


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_meta_tensors(kernel, make_random_graph):
    # Shapes without data (e.g. to size a model): the fused kernels run
    # their fake implementations.
    x, edge_index, edge_weight = graph(
        dtype=torch.float32, make_random_graph=make_random_graph
    )
    conv = APNetConv(6, 4, kernel=kernel).to('meta')
    x = x.to('meta').requires_grad_()
    out = conv(x, edge_index.to('meta'), edge_weight.to('meta'))
    assert out.device.type == 'meta' and out.shape == x.shape
    out.sum().backward()
    assert x.grad.shape == x.shape
    conv = APNetConv(
        6, 4, kernel=kernel, add_self_loops=False, num_steps=2
    ).to('meta')
    _, (index, alpha) = conv(
        x, edge_index.to('meta'), return_attention_weights=True
    )
    assert index.shape == edge_index.shape and alpha.shape == (20, 2)


# torch.compile ###############################################################


def assert_compiles(conv, inputs, backend, atol=1e-5, rtol=1e-5):
    r"""No graph break, and :obj:`torch.compile(conv, fullgraph=True)`
    gives the eager outputs and gradients (and their dtypes)."""
    import torch._dynamo

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(conv)(*inputs)
    assert explanation.graph_break_count == 0, explanation.break_reasons

    x = inputs[0].clone().requires_grad_()
    compiled = torch.compile(conv, fullgraph=True, backend=backend)
    parameters = [p for p in conv.parameters() if p.requires_grad]
    results = []
    for module in [compiled, conv]:
        out = module(x, *inputs[1:])
        results.append(
            (out, *torch.autograd.grad(out.square().sum(), [x, *parameters]))
        )
    for compiled_result, eager_result in zip(*results):
        assert compiled_result.dtype == eager_result.dtype
        assert torch.allclose(
            compiled_result, eager_result, atol=atol, rtol=rtol
        )
    torch._dynamo.reset()


# Inductor (the default backend) for the default path; AOTAutograd without
# code generation for the other, which takes a few seconds instead of 20.
@pytest.mark.parametrize(
    'kernel,backend',
    [('sparse', 'inductor'), ('message_passing', 'aot_eager')],
)
def test_apnet_conv_compile(kernel, backend, make_random_graph, device):
    x, edge_index, edge_weight = graph(
        dtype=torch.float32, make_random_graph=make_random_graph, device=device
    )
    edge_index = torch.cat(
        [edge_index, edge_index.new_tensor([[3], [3]])], dim=1
    )
    edge_weight = torch.cat([edge_weight, edge_weight.new_ones(1)])
    conv = APNetConv(
        6, 4, num_steps=2, learn_temperature=True, kernel=kernel
    ).to(device)
    assert_compiles(conv, (x, edge_index, edge_weight), backend)


def test_apnet_conv_attention_dropout_compiles(make_random_graph):
    import torch._dynamo

    x, edge_index, edge_weight = graph(
        dtype=torch.float32, make_random_graph=make_random_graph
    )
    conv = APNetConv(6, 4, num_steps=2, dropout=0.3)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(conv)(x, edge_index, edge_weight)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(conv, fullgraph=True, backend='aot_eager')
    outputs = []
    for module in (compiled, conv):  # the same draws from the same seed
        torch.manual_seed(1)
        outputs.append(module(x, edge_index, edge_weight))
    assert torch.allclose(outputs[0], outputs[1], atol=1e-6)
    torch._dynamo.reset()


def test_apnet_conv_compile_bipartite_and_attention(make_random_graph):
    import torch._dynamo

    x_src, x_dst, edge_index, edge_weight = bipartite_graph()
    conv = APNetConv((6, 6), 3).double()
    explanation = torch._dynamo.explain(conv)(
        (x_src, x_dst), edge_index, edge_weight
    )
    assert explanation.graph_break_count == 0, explanation.break_reasons

    # The attention (with the added self-loops, a data-dependent count)
    # compiles too:
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    compiled = torch.compile(conv, fullgraph=True, backend='aot_eager')
    out, (index, alpha) = compiled(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    expected, (expected_index, expected_alpha) = conv(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    assert torch.allclose(out, expected)
    assert torch.equal(index, expected_index)
    assert torch.allclose(alpha, expected_alpha)
    torch._dynamo.reset()


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_compile_dynamic_shapes(kernel, make_random_graph):
    # One graph for every size, as mini-batches of varying size need.
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    conv = APNetConv(6, 4, num_steps=2, kernel=kernel)
    compiled = torch.compile(
        conv, fullgraph=True, dynamic=True, backend='aot_eager'
    )
    for seed, (num_nodes, num_edges) in enumerate([(8, 20), (11, 35)]):
        x, edge_index, edge_weight = graph(
            num_nodes,
            num_edges,
            seed=seed,
            dtype=torch.float32,
            make_random_graph=make_random_graph,
        )
        x.requires_grad_()
        out = compiled(x, edge_index, edge_weight)
        (grad,) = torch.autograd.grad(out.square().sum(), x)
        expected = conv(x, edge_index, edge_weight)
        (expected_grad,) = torch.autograd.grad(expected.square().sum(), x)
        assert torch.allclose(out, expected, atol=1e-5)
        assert torch.allclose(grad, expected_grad, atol=1e-5)
    assert torch._dynamo.utils.counters['stats']['unique_graphs'] == 1
    torch._dynamo.reset()


@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_inference_mode(kernel, make_random_graph):
    # Inference tensors have no version counter; the layer runs uncached.
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, kernel=kernel)
    expected = conv(x, edge_index)
    with torch.inference_mode():
        x_inf, edge_index_inf = x.clone(), edge_index.clone()
        assert torch.allclose(
            conv(x_inf, edge_index_inf), expected, atol=1e-12
        )
        assert torch.allclose(
            conv(x_inf, edge_index_inf), expected, atol=1e-12
        )
        # A normal edge_index seen under inference mode (a validation
        # step) ...
        conv(x, edge_index)
    # ... leaves nothing cached that a later backward pass could not use:
    weight = torch.rand(edge_index.size(1), dtype=x.dtype) + 0.5
    weight.requires_grad_()
    conv(x, edge_index, weight).sum().backward()
    assert weight.grad is not None
    learned = conv64(6, 4, kernel=kernel, learn_temperature=True)
    with torch.inference_mode():
        learned(x, edge_index)
    learned(x, edge_index).sum().backward()
    assert learned.temperature.grad is not None


def test_apnet_conv_return_attention_weights_false(make_random_graph):
    # As GATConv: False returns the output alone.
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    out = conv(x, edge_index, return_attention_weights=False)
    assert isinstance(out, torch.Tensor)
    assert torch.equal(out, conv(x, edge_index))


def test_apnet_conv_bool_sparse_adjacency_is_a_pattern(make_random_graph):
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    adj_t = to_torch_coo_tensor(
        edge_index.flip(0),
        torch.ones(edge_index.size(1), dtype=torch.bool),
        size=(8, 8),
    )
    assert torch.allclose(conv(x, adj_t), conv(x, edge_index), atol=1e-12)


def test_apnet_conv_int32_edge_index_of_a_large_graph():
    # Sort keys of a 50,000-node graph overflow int32: fused and message
    # passing agree with int64 indices.
    num_nodes = 50_000
    x = torch.randn(
        num_nodes,
        4,
        dtype=torch.float64,
        generator=torch.Generator().manual_seed(0),
    )
    edge_index = torch.tensor([[0, 1, 49_999, 2], [49_999, 49_998, 0, 49_999]])
    conv = conv64(4, 4, num_steps=1)
    expected = conv(x, edge_index)
    for kernel in ('sparse', 'message_passing'):
        conv.kernel = kernel
        assert torch.allclose(conv(x, edge_index.int()), expected, atol=1e-12)
        assert torch.allclose(
            conv(x, EdgeIndex(edge_index.int())), expected, atol=1e-12
        )


def test_apnet_conv_explainer_uses_message_passing(make_random_graph):
    # PyG's explainer masks messages: the layer runs message passing while
    # it explains, whatever its kernel, and gives the same edge mask as
    # kernel='message_passing'.
    from torch_geometric.explain import Explainer, GNNExplainer

    x, edge_index, _ = graph(
        channels=6, dtype=torch.float32, make_random_graph=make_random_graph
    )

    class Model(torch.nn.Module):
        def __init__(self, kernel):
            super().__init__()
            torch.manual_seed(0)
            self.conv = APNetConv(6, 4, num_steps=1, kernel=kernel)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index)

    def edge_mask(kernel, edges):
        torch.manual_seed(1)
        explainer = Explainer(
            Model(kernel),
            GNNExplainer(epochs=3),
            explanation_type='model',
            edge_mask_type='object',
            node_mask_type=None,
            model_config=dict(
                mode='regression', task_level='node', return_type='raw'
            ),
        )
        return explainer(x, edges, index=0).edge_mask

    assert torch.allclose(
        edge_mask('auto', edge_index),
        edge_mask('message_passing', edge_index),
        atol=1e-6,
    )
    # With self-loops of its own (the layer re-adds them for the explainer,
    # which masks the other edges, then one loop per node):
    with_loops = torch.cat([edge_index, torch.tensor([[2, 5], [2, 5]])], 1)
    mask = edge_mask('auto', with_loops)
    assert mask.size(0) == with_loops.size(1)
    assert torch.allclose(
        mask, edge_mask('message_passing', with_loops), atol=1e-6
    )
    # Under an all-ones mask the explained model is the model:
    from torch_geometric.explain.algorithm.utils import clear_masks, set_masks

    model = Model('auto')
    expected = model(x, with_loops)
    set_masks(
        model, torch.ones(with_loops.size(1)), with_loops, apply_sigmoid=False
    )
    assert torch.allclose(model(x, with_loops), expected, atol=1e-5)
    with pytest.raises(ValueError, match='re-adds self-loops with weight 1'):
        model.conv(x, with_loops, torch.full((with_loops.size(1),), 2.0))
    # Two loops of one node count twice in the softmax; the explainer's one
    # would not: refused rather than explaining another function.
    twice = torch.cat([with_loops, torch.tensor([[2], [2]])], 1)
    with pytest.raises(ValueError, match='a node with several'):
        model.conv(x, twice)
    clear_masks(model)


# Half precision and autocast #################################################
#
# In float16 and bfloat16 the attention and the sums are computed in float32:
# output and gradients are the float64 reference of the same (rounded)
# inputs within two units in the last place of their largest value.
LOW_PRECISION = [torch.float16, torch.bfloat16]
SETTINGS = {
    'projected': dict(proj_channels=16, temperature=0.5, num_steps=2),
    'paper': dict(proj_channels=64, temperature=10.0, num_steps=1),
}


def assert_close_in(actual, expected, dtype):
    assert actual.dtype == dtype
    # A scalar (the temperature's gradient) is a sum over every edge, which
    # autograd reduces in the parameter's dtype on the message-passing
    # path: its rounding grows with the edges summed (torch 2.11 rounds
    # this test's float16 sum 1.3 x 2 eps off).
    ulps = 8 if expected.dim() == 0 else 2
    atol = ulps * torch.finfo(dtype).eps * expected.abs().max().item()
    torch.testing.assert_close(
        actual.double(), expected.double(), rtol=0, atol=atol
    )


def low_precision_copies(tensors, dtype):
    r"""Each tensor in :obj:`dtype`, and a float64 copy of those values,
    both requiring gradients."""
    low = [t.detach().to(dtype).requires_grad_() for t in tensors]
    return low, [t.detach().double().requires_grad_() for t in low]


@pytest.mark.parametrize('dtype', LOW_PRECISION)
@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
@pytest.mark.parametrize('setting', ['projected', 'paper'])
def test_apnet_conv_half_precision_equals_reference(
    setting, kernel, dtype, apnet_reference, make_random_graph, device
):
    x, edge_index, edge_weight = graph(
        30,
        120,
        channels=16,
        make_random_graph=make_random_graph,
        device=device,
    )
    edge_index = torch.cat(
        [edge_index, edge_index.new_tensor([[1, 5], [1, 5]])], 1
    )
    edge_weight = torch.cat([edge_weight, edge_weight.new_tensor([2.0, 0.5])])
    torch.manual_seed(0)
    conv = APNetConv(
        16,
        learn_temperature=True,
        learn_step_weights=False,
        teleport=None,
        kernel=kernel,
        **SETTINGS[setting],
    ).to(device, dtype)
    (x, edge_weight), (x64, edge_weight64) = low_precision_copies(
        [x, edge_weight], dtype
    )
    out, (_, alpha) = conv(
        x, edge_index, edge_weight, return_attention_weights=True
    )
    assert alpha.dtype == dtype
    parameters = [conv.lin.weight, conv.temperature]
    parameters64 = [p.detach().double().requires_grad_() for p in parameters]
    expected = apnet_reference(
        x64,
        edge_index,
        *parameters64[:1],
        edge_weight64,
        parameters64[1],
        conv.num_steps,
    )
    assert_close_in(out, expected, dtype)

    grad_out = torch.randn(
        out.shape, dtype=dtype, generator=torch.Generator().manual_seed(1)
    )
    grad_out = grad_out.to(device)
    grads = torch.autograd.grad(out, [x, edge_weight, *parameters], grad_out)
    expected_grads = torch.autograd.grad(
        expected, [x64, edge_weight64, *parameters64], grad_out.double()
    )
    for grad, expected_grad in zip(grads, expected_grads):
        assert_close_in(grad, expected_grad, dtype)


@pytest.mark.parametrize('dtype', LOW_PRECISION)
@pytest.mark.parametrize('kernel', ['sparse', 'message_passing'])
def test_apnet_conv_bipartite_half_precision(kernel, dtype, device):
    x_src, x_dst, edge_index, edge_weight = bipartite_graph(
        channels=(6, 5), device=device
    )
    conv = conv64(
        (6, 5), 3, temperature=2.0, kernel=kernel, num_steps=2, device=device
    ).to(dtype)
    (x_src, x_dst), (x_src64, x_dst64) = low_precision_copies(
        [x_src, x_dst], dtype
    )
    out = conv((x_src, x_dst), edge_index, edge_weight.to(dtype))
    expected = bipartite_reference(
        x_src64,
        x_dst64,
        edge_index,
        conv.lin_src.weight.double(),
        conv.lin_dst.weight.double(),
        edge_weight.to(dtype).double(),
        2.0,
        num_steps=2,
    )
    assert_close_in(out, expected, dtype)
    grads = torch.autograd.grad(out.sum(), [x_src, x_dst])
    expected_grads = torch.autograd.grad(expected.sum(), [x_src64, x_dst64])
    for grad, expected_grad in zip(grads, expected_grads):
        assert_close_in(grad, expected_grad, dtype)


@pytest.mark.parametrize('dtype', LOW_PRECISION)
def test_apnet_conv_autocast(dtype, make_random_graph, device):
    # Under autocast only the projection f runs in half precision; the
    # attention is computed in float32 from its output, and the output has
    # the dtype of x (float32) on both paths, which agree.
    x, edge_index, edge_weight = graph(
        30,
        120,
        channels=16,
        dtype=torch.float32,
        make_random_graph=make_random_graph,
        device=device,
    )
    torch.manual_seed(0)
    # With a projection (autocast runs it in the lower precision) and two
    # steps.
    options = dict(
        proj_channels=16,
        temperature=0.5,
        num_steps=2,
        learn_step_weights=False,
        teleport=None,
    )
    sparse = APNetConv(16, **options).to(device)
    message_passing = APNetConv(16, **options, kernel='message_passing').to(
        device
    )
    message_passing.load_state_dict(sparse.state_dict())
    x.requires_grad_()
    results = []
    for conv in [sparse, message_passing, sparse]:
        inputs = [x, conv.lin.weight, conv.temperature]
        with torch.autocast(
            device.type, dtype=dtype, enabled=len(results) < 2
        ):
            out, (_, alpha) = conv(
                x, edge_index, edge_weight, return_attention_weights=True
            )
            assert conv.lin(x).dtype == (
                dtype if len(results) < 2 else torch.float32
            )
            results.append(
                [out, alpha, *torch.autograd.grad(out.square().sum(), inputs)]
            )
    for result in results:
        assert all(t.dtype == torch.float32 for t in result)
    (sparse_out, *_), _, (expected, *_) = results
    for sparse_result, result in zip(results[0], results[1]):
        # Relative to the norm: the projection's gradient sums over every
        # edge, and CUDA's atomic sums round its small entries differently
        # (seen on an H200: 3e-5 on one entry of 0.03).
        error = (sparse_result - result).norm() / result.norm()
        assert error < 1e-5, error
    # The float32 layer, up to the projection's rounding:
    atol = 2 * torch.finfo(dtype).eps * expected.abs().max().item()
    torch.testing.assert_close(sparse_out, expected, rtol=0, atol=atol)


def test_apnet_conv_compile_half_precision(make_random_graph, device):
    # The fused path in half precision, and under autocast, compiles
    # without a graph break and gives the eager results.
    x, edge_index, edge_weight = graph(
        dtype=torch.float32, make_random_graph=make_random_graph, device=device
    )
    conv = APNetConv(6, 4, num_steps=2, learn_temperature=True).to(device)
    half = copy.deepcopy(conv).to(torch.bfloat16)
    assert_compiles(
        half,
        (x.bfloat16(), edge_index, edge_weight.bfloat16()),
        'aot_eager',
        atol=1e-2,
        rtol=1e-2,
    )
    autocast_dtype = torch.bfloat16 if device.type == 'cpu' else torch.float16
    with torch.autocast(device.type, dtype=autocast_dtype):
        # (The projection's weight gradient is a half-precision product,
        # which AOTAutograd rounds differently from eager autocast.)
        # Half precision: an error relative to the value (8 bits of
        # bfloat16's mantissa), gradients of magnitude 10 included.
        assert_compiles(
            conv,
            (x, edge_index, edge_weight),
            'aot_eager',
            atol=1e-2,
            rtol=1e-2,
        )


def test_apnet_conv_cuda_graph(make_random_graph, cuda_device):
    # A forward pass on a fixed graph replays from a CUDA graph: the layer
    # keeps the graph's pattern from the first (eager) call, and its
    # kernels need no host synchronisation.
    x, edge_index, edge_weight = graph(
        200,
        1000,
        channels=16,
        dtype=torch.float32,
        make_random_graph=make_random_graph,
        device=cuda_device,
    )
    conv = APNetConv(16, num_steps=2).to(cuda_device)
    static_x = x.clone()
    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):  # Warm-up, as CUDA graphs need.
                conv(static_x, edge_index, edge_weight)
        torch.cuda.current_stream().wait_stream(stream)
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            static_out = conv(static_x, edge_index, edge_weight)
        for seed in range(2):
            new_x = torch.randn(
                x.shape, generator=torch.Generator().manual_seed(seed)
            ).to(cuda_device)
            static_x.copy_(new_x)
            cuda_graph.replay()
            torch.testing.assert_close(
                static_out, conv(new_x, edge_index, edge_weight)
            )


def test_apnet_conv_cached_under_reduce_overhead(
    make_random_graph, cuda_device, monkeypatch
):
    # A static graph in training (forward and backward): cached=True keeps
    # the structure of the eager first call, and torch.compile's CUDA
    # graphs (mode='reduce-overhead') replay the steps without sorting the
    # edges again; the same outputs and gradients as eager calls.
    x, edge_index, edge_weight = graph(
        200,
        1000,
        channels=16,
        dtype=torch.float32,
        make_random_graph=make_random_graph,
        device=cuda_device,
    )
    torch.manual_seed(0)
    conv = APNetConv(16, learn_temperature=True, cached=True).to(cuda_device)
    eager = APNetConv(16, learn_temperature=True).to(cuda_device)
    eager.load_state_dict(conv.state_dict())
    conv(x, edge_index, edge_weight)  # eager: fills the cache
    calls = []
    real = apnet_conv.edge_index_arrays

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(apnet_conv, 'edge_index_arrays', counted)
    compiled = torch.compile(conv, mode='reduce-overhead', fullgraph=True)
    for seed in range(4):
        new_x = torch.randn(
            x.shape, generator=torch.Generator().manual_seed(seed)
        ).to(cuda_device)
        out = compiled(new_x, edge_index, edge_weight)
        (grad,) = torch.autograd.grad(out.square().sum(), conv.temperature)
        expected = eager(new_x, edge_index, edge_weight)
        (expected_grad,) = torch.autograd.grad(
            expected.square().sum(), eager.temperature
        )
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-4)
    assert not calls
    torch._dynamo.reset()


# The kernel choice (kernel='auto' | 'sparse' | 'triton' | 'message_passing')


@needs_interpreter
@pytest.mark.parametrize(
    'settings',
    [
        {},  # The drop-in defaults: projection 16, two steps.
        {'proj_channels': 256, 'temperature': 10.0, 'num_steps': 1},  # Paper.
        {'proj_channels': None, 'num_steps': 1},  # Identity f (AGNNConv).
        {'learn_temperature': True, 'add_self_loops': False},
    ],
)
def test_triton_kernel_equals_sparse_kernels(settings, make_random_graph):
    # On CPU tensors through Triton's interpreter (in its subprocess);
    # natively on CUDA in the CUDA tier (kernel='auto' picks Triton there).
    x, edge_index, edge_weight = graph(
        num_nodes=12, num_edges=40, make_random_graph=make_random_graph
    )
    x.requires_grad_()
    sparse = conv64(6, kernel='sparse', **settings)
    triton = conv64(6, kernel='triton', **settings)
    triton.load_state_dict(sparse.state_dict())
    assert_same_outputs_and_gradients(
        triton, sparse, x, edge_index, edge_weight
    )


def assert_same_outputs_and_gradients(triton, sparse, x, *graph):
    r"""The two layers' outputs on :obj:`x` and :obj:`graph`, and the
    gradients of their squares' sum with respect to :obj:`x` and the
    parameters, are the same (the Triton layer is called first)."""
    outs, grads = [], []
    for conv in (triton, sparse):
        out = conv(x, *graph)
        outs.append(out)
        grads.append(
            torch.autograd.grad(out.square().sum(), [x, *conv.parameters()])
        )
    assert torch.allclose(outs[0], outs[1], rtol=1e-12, atol=1e-12)
    for grad_triton, grad_sparse in zip(*grads):
        assert torch.allclose(grad_triton, grad_sparse, rtol=1e-10, atol=1e-12)


@needs_interpreter
def test_triton_kernel_equals_sparse_kernels_bipartite():
    generator = torch.Generator().manual_seed(0)
    x_src = torch.randn(7, 6, dtype=torch.float64, generator=generator)
    x_dst = torch.randn(5, 6, dtype=torch.float64, generator=generator)
    edge_index = torch.stack(
        [
            torch.randint(0, 7, (16,), generator=generator),
            torch.randint(0, 5, (16,), generator=generator),
        ]
    )
    sparse = conv64((6, 6), kernel='sparse', add_self_loops=False)
    triton = conv64((6, 6), kernel='triton', add_self_loops=False)
    triton.load_state_dict(sparse.state_dict())
    assert torch.allclose(
        triton((x_src, x_dst), edge_index),
        sparse((x_src, x_dst), edge_index),
        rtol=1e-12,
        atol=1e-12,
    )


@needs_interpreter
@pytest.mark.parametrize('num_steps', [1, 2])
def test_triton_kernel_equals_sparse_kernels_with_dropout(
    num_steps, make_random_graph, monkeypatch
):
    # The Triton kernel draws attention dropout itself, by entry, from a
    # seed drawn from torch's generator: given the factors it draws, the
    # sparse kernels give the same output and gradients; in evaluation,
    # no dropout.
    from apnet_pyg.nn import triton_propagation

    x, edge_index, edge_weight = graph(
        num_nodes=12, num_edges=40, make_random_graph=make_random_graph
    )
    x.requires_grad_()
    settings = dict(num_steps=num_steps, teleport=0.2, dropout=0.5)
    triton = conv64(6, kernel='triton', **settings)
    sparse = conv64(6, kernel='sparse', **settings)
    sparse.load_state_dict(triton.state_dict())
    seeds = iter(torch.tensor([[3], [8]]))
    monkeypatch.setattr(
        triton_propagation.propagate,
        'draw_dropout_seed',
        lambda device: next(seeds).to(device),
    )
    expected_seeds = iter(torch.tensor([[3], [8]]))

    def kernel_draws(structure, loop_kept, dtype, device):
        nnz = structure.arrays.nnz
        scales = triton_propagation.dropout_scales(
            next(expected_seeds), 0.5, nnz + loop_kept.numel(), dtype
        )
        return scales[:nnz], scales[nnz:]

    monkeypatch.setattr(sparse, '_dropout_scales', kernel_draws)
    assert_same_outputs_and_gradients(
        triton, sparse, x, edge_index, edge_weight
    )
    monkeypatch.undo()
    triton.eval()
    sparse.eval()
    assert torch.allclose(
        triton(x, edge_index, edge_weight),
        sparse(x, edge_index, edge_weight),
        atol=1e-12,
    )


@starts_interpreter
def test_triton_kernel_cases_under_the_interpreter(tmp_path):
    run_under_interpreter(
        __file__, 'test_triton_kernel_equals', tmp_path, minimum=7
    )


def test_auto_kernel_is_sparse_on_cpu(make_random_graph, monkeypatch):
    def no_triton(*args, **kwargs):
        raise AssertionError('the Triton kernel ran on CPU tensors')

    monkeypatch.setattr(apnet_conv, 'triton_attention_propagate', no_triton)
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    reference = conv64(6, kernel='sparse')
    auto = conv64(6)
    assert auto.kernel == 'auto'
    assert torch.equal(
        auto(x, edge_index, edge_weight), reference(x, edge_index, edge_weight)
    )


class _CudaLike:
    # What kernel='auto' reads of x: its device and width.
    def __init__(self, channels):
        self.device = torch.device('cuda')
        self.channels = channels

    def size(self, dim):
        return self.channels


@pytest.mark.parametrize(
    'available,attention,channels,expected',
    [
        (True, False, 64, True),
        (True, True, 64, False),  # The kernel never stores the attention.
        (False, False, 64, False),  # No Triton: the sparse kernels.
        (True, False, 8192, False),  # Wider than a kernel tile.
    ],
)
def test_auto_kernel_choice_on_cuda(
    available, attention, channels, expected, monkeypatch
):
    monkeypatch.setattr(apnet_conv, 'is_triton_available', lambda: available)
    conv = APNetConv(-1, proj_channels=None)
    kernel = conv._kernel_for(_CudaLike(channels), attention)
    assert kernel == ('triton' if expected else 'sparse')


def test_the_kernel_choice_compiles_without_a_graph_break(monkeypatch):
    # On CUDA, 'auto' asks whether Triton is installed inside forward;
    # TorchDynamo 2.11 on an H200 skipped its importlib lookup, a graph
    # break in every compiled CUDA forward: the answer is a constant to
    # TorchDynamo, which does not trace the lookup (here, one that breaks).
    def lookup():
        torch._dynamo.graph_break()
        return True

    monkeypatch.setattr(apnet_conv, 'is_triton_available', lookup)

    def uses_triton(x):
        y = x * 2
        return y + 1 if apnet_conv._triton_installed() else y - 1

    explanation = torch._dynamo.explain(uses_triton)(torch.zeros(2))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()


def test_kernel_argument_is_checked(make_random_graph):
    with pytest.raises(
        ValueError,
        match=r"'kernel' must be one of auto, "
        r"sparse, triton, message_passing \(got 'cuda'\)",
    ):
        APNetConv(6, kernel='cuda')
    with pytest.raises(ValueError, match='fused=False'):
        APNetConv(6, fused=False)  # 0.x: the one kernel= argument.
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    with pytest.raises(
        ValueError,
        match=r"kernel='triton'.*does not return "
        r"the attention.*kernel='sparse'",
    ):
        conv64(6, kernel='triton')(
            x, edge_index, return_attention_weights=True
        )


def test_apnet_conv_on_a_re_sorted_edge_index():
    # PyG 2.8's sort_by of a sorted EdgeIndex hands the result the other
    # dimension's cached pointers; on a directed square graph the layer
    # would read the wrong rows.
    edge_index = torch.tensor([[0, 1, 2, 2, 4, 5, 5], [1, 2, 1, 0, 3, 0, 4]])
    x = torch.randn(
        6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
    )
    conv = conv64(4, 8, num_steps=2)
    expected = conv(x, edge_index)
    by_row = EdgeIndex(edge_index, sparse_size=(6, 6)).sort_by('row')[0]
    assert torch.allclose(conv(x, by_row), expected)  # Fills its caches.
    by_col = by_row.sort_by('col')[0]
    assert torch.allclose(conv(x, by_col), expected)
