import math

import pytest
import torch
from torch.autograd import gradcheck

from torch_geometric.data import Batch, Data
from torch_geometric.nn import AGNNConv
from torch_geometric.utils import (
    to_dense_adj,
    to_torch_coo_tensor,
    to_torch_csc_tensor,
    to_torch_csr_tensor,
)

from apnet_pyg.nn import APNetConv, DenseAPNetConv


def graph(num_nodes=8, num_edges=20, channels=6, seed=0, weighted=True,
          dtype=torch.float64, make_random_graph=None):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, channels, generator=generator, dtype=dtype)
    edge_index = make_random_graph(num_nodes, num_edges, generator)
    edge_weight = None
    if weighted:
        edge_weight = torch.rand(edge_index.size(1), generator=generator,
                                 dtype=dtype) + 0.1
    return x, edge_index, edge_weight


def conv64(*args, seed=0, **kwargs):
    torch.manual_seed(seed)
    return APNetConv(*args, **kwargs).double()


def test_apnet_conv(make_random_graph):
    x, edge_index, _ = graph(channels=16, dtype=torch.float32,
                             make_random_graph=make_random_graph)
    conv = APNetConv(16, 32)
    assert str(conv) == ('APNetConv(16, proj_channels=32, temperature=10.0, '
                         'num_steps=1)')
    assert conv.lin.weight.size() == (32, 16)
    assert conv.temperature.item() == 10.0
    assert not conv.temperature.requires_grad

    out = conv(x, edge_index)
    assert out.size() == (8, 16)
    assert out.dtype == torch.float32

    out, (edge_index_out, alpha) = conv(x, edge_index,
                                        return_attention_weights=True)
    assert edge_index_out.size(1) == edge_index.size(1) + 8  # self-loops
    assert alpha.size() == (edge_index_out.size(1), )
    assert bool((alpha > 0).all())
    row_sum = torch.zeros(8).index_add_(0, edge_index_out[1], alpha)
    assert torch.allclose(row_sum, torch.ones(8), atol=1e-6)

    conv.reset_parameters()
    assert conv.temperature.item() == 10.0


@pytest.mark.parametrize('num_steps', [1, 3])
@pytest.mark.parametrize('weighted', [False, True])
def test_apnet_conv_equals_reference(num_steps, weighted, apnet_reference,
                                     make_random_graph):
    x, edge_index, edge_weight = graph(weighted=weighted,
                                       make_random_graph=make_random_graph)
    x.requires_grad_()
    if weighted:
        edge_weight.requires_grad_()

    for fused in [True, False]:
        conv = conv64(6, 4, temperature=3.0, learn_temperature=True,
                      num_steps=num_steps, fused=fused)
        out = conv(x, edge_index, edge_weight)
        expected = apnet_reference(x, edge_index, conv.lin.weight,
                                   edge_weight, conv.temperature, num_steps)
        assert torch.allclose(out, expected, atol=1e-10)

        # Gradients with respect to every input and parameter:
        inputs = [x, conv.lin.weight, conv.temperature]
        inputs += [edge_weight] if weighted else []
        grad_out = torch.randn_like(out)
        grads = torch.autograd.grad(out, inputs, grad_out)
        expected_grads = torch.autograd.grad(expected, inputs, grad_out)
        for grad, expected_grad in zip(grads, expected_grads):
            assert torch.allclose(grad, expected_grad, atol=1e-8)


def test_apnet_conv_fused_equals_message_passing(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    fused = conv64(6, 4, num_steps=2)
    message_passing = conv64(6, 4, num_steps=2, fused=False)
    message_passing.load_state_dict(fused.state_dict())
    out1, (index1, alpha1) = fused(x, edge_index, edge_weight, True)
    out2, (index2, alpha2) = message_passing(x, edge_index, edge_weight, True)
    assert torch.allclose(out1, out2, atol=1e-12)
    assert torch.equal(index1, index2)
    assert alpha1.size() == (index1.size(1), 2)  # one column per step
    assert torch.allclose(alpha1, alpha2, atol=1e-12)


@pytest.mark.parametrize('fused', [True, False])
def test_apnet_conv_gradcheck(fused, make_random_graph):
    x, edge_index, edge_weight = graph(num_nodes=5, num_edges=9, channels=3,
                                       make_random_graph=make_random_graph)
    conv = conv64(3, 2, temperature=2.0, num_steps=2, fused=fused)
    x.requires_grad_()
    edge_weight.requires_grad_()

    def function(x, weight, edge_weight):
        return torch.func.functional_call(conv, {'lin.weight': weight},
                                          (x, edge_index, edge_weight))

    weight = conv.lin.weight.detach().clone().requires_grad_()
    assert gradcheck(function, (x, weight, edge_weight))


def test_apnet_conv_equals_agnn_conv(make_random_graph):
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    agnn = AGNNConv(requires_grad=True).double()
    with torch.no_grad():
        agnn.beta.fill_(7.5)
    conv = conv64(6, None, temperature=7.5, learn_temperature=True)
    assert isinstance(conv.lin, torch.nn.Identity)

    x1 = x.clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    out1 = agnn(x1, edge_index)
    out2 = conv(x2, edge_index)
    assert torch.allclose(out1, out2, atol=1e-12)

    grad_out = torch.randn_like(out1)
    grad_x1, grad_beta = torch.autograd.grad(out1, [x1, agnn.beta], grad_out)
    grad_x2, grad_temperature = torch.autograd.grad(
        out2, [x2, conv.temperature], grad_out)
    assert torch.allclose(grad_x1, grad_x2, atol=1e-10)
    assert torch.allclose(grad_beta.view(()), grad_temperature, atol=1e-10)


@pytest.mark.parametrize('layout', ['coo', 'csr', 'csc'])
def test_apnet_conv_sparse_adjacency(layout, make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    expected, (index, alpha) = conv(x, edge_index, edge_weight, True)

    to_sparse = {
        'coo': to_torch_coo_tensor,
        'csr': to_torch_csr_tensor,
        'csc': to_torch_csc_tensor
    }[layout]
    adj = to_sparse(edge_index, edge_weight, size=(8, 8))
    out, adj_alpha = conv(x, adj.t(), return_attention_weights=True)
    assert torch.allclose(out, expected, atol=1e-12)
    assert adj_alpha.layout == adj.t().layout
    dense_alpha = torch.zeros(8, 8, dtype=alpha.dtype)
    dense_alpha[index[1], index[0]] = alpha
    assert torch.allclose(adj_alpha.to_dense(), dense_alpha, atol=1e-12)

    # Without values the sparse adjacency means unit weights:
    adj = to_sparse(edge_index, size=(8, 8))
    assert torch.allclose(conv(x, adj.t()), conv(x, edge_index), atol=1e-12)

    with pytest.raises(ValueError, match="not both"):
        conv(x, to_sparse(edge_index, edge_weight, (8, 8)).t(), edge_weight)
    with pytest.raises(ValueError, match="shape"):
        conv(x, to_sparse(edge_index, size=(9, 9)))


def test_apnet_conv_permutation_equivariance(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4, num_steps=2)
    perm = torch.randperm(8)
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(8)
    out = conv(x, edge_index, edge_weight)
    out_perm = conv(x[perm], inverse[edge_index], edge_weight)
    assert torch.allclose(out_perm, out[perm], atol=1e-12)
    # The order of the edges does not matter either:
    edge_perm = torch.randperm(edge_index.size(1))
    out_edges = conv(x, edge_index[:, edge_perm], edge_weight[edge_perm])
    assert torch.allclose(out_edges, out, atol=1e-12)


@pytest.mark.parametrize('fused', [True, False])
def test_apnet_conv_isolated_nodes(fused):
    x = torch.randn(5, 4, dtype=torch.float64)
    edge_index = torch.tensor([[0, 1], [1, 0]])  # nodes 2, 3, 4 isolated
    conv = conv64(4, 3, fused=fused)
    out = conv(x, edge_index)
    assert torch.equal(out[2:], x[2:])

    # Without self-loops an isolated node receives nothing:
    conv = conv64(4, 3, add_self_loops=False, fused=fused)
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


def test_apnet_conv_existing_self_loop_keeps_its_weight(apnet_reference):
    x = torch.randn(3, 4, dtype=torch.float64)
    edge_index = torch.tensor([[0, 1, 1], [1, 0, 1]])  # self-loop on 1
    edge_weight = torch.tensor([1.0, 2.0, 0.25], dtype=torch.float64)
    conv = conv64(4, 4)
    out, (index, alpha) = conv(x, edge_index, edge_weight, True)
    assert index.size(1) == 5  # loops on 0 and 2 added, 1 kept
    expected = apnet_reference(x, edge_index, conv.lin.weight, edge_weight)
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
    prior = to_dense_adj(edge_index, edge_attr=edge_weight,
                         max_num_nodes=8)[0].t()
    degree = prior.sum(dim=-1, keepdim=True)
    expected = (prior / degree.clamp_min(1e-300)) @ x
    assert torch.allclose(out, expected, atol=1e-12)


@pytest.mark.parametrize('temperature', [30.0, 100.0, 1000.0])
def test_apnet_conv_high_temperature_is_stable(temperature,
                                               make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    x = x.float().requires_grad_()
    conv = APNetConv(6, 4, temperature=temperature)
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
        x, edge_index, edge_weight = graph(num_nodes, 2 * num_nodes,
                                           seed=seed,
                                           make_random_graph=make_random_graph)
        graphs.append(Data(x=x, edge_index=edge_index,
                           edge_weight=edge_weight))
    batch = Batch.from_data_list(graphs)
    conv = conv64(6, 4, num_steps=2)
    out = conv(batch.x, batch.edge_index, batch.edge_weight)
    expected = torch.cat(
        [conv(g.x, g.edge_index, g.edge_weight) for g in graphs])
    assert torch.allclose(out, expected, atol=1e-12)


def test_apnet_conv_equals_dense_on_batch(make_random_graph):
    from torch_geometric.utils import to_dense_batch
    graphs = []
    for seed, num_nodes in enumerate([6, 4, 7]):
        x, edge_index, edge_weight = graph(num_nodes, 3 * num_nodes,
                                           seed=seed,
                                           make_random_graph=make_random_graph)
        graphs.append(Data(x=x, edge_index=edge_index,
                           edge_weight=edge_weight))
    batch = Batch.from_data_list(graphs)
    x = batch.x.clone().requires_grad_()
    conv = conv64(6, 4, num_steps=2, learn_temperature=True)
    dense = DenseAPNetConv(6, 4, num_steps=2,
                           learn_temperature=True).double()
    dense.load_state_dict(conv.state_dict())

    out = conv(x, batch.edge_index, batch.edge_weight)
    dense_x, mask = to_dense_batch(x, batch.batch)
    adj = to_dense_adj(batch.edge_index, batch.batch).transpose(1, 2)
    weight = to_dense_adj(batch.edge_index, batch.batch,
                          batch.edge_weight).transpose(1, 2)
    dense_out = dense(dense_x, adj, weight, mask)[mask]
    assert torch.allclose(out, dense_out, atol=1e-12)

    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(
        out, [x, conv.lin.weight, conv.temperature], grad_out)
    dense_grads = torch.autograd.grad(
        dense_out, [x, dense.lin.weight, dense.temperature], grad_out)
    for grad, dense_grad in zip(grads, dense_grads):
        assert torch.allclose(grad, dense_grad, atol=1e-10)


def test_apnet_conv_target_to_source_flow(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    reversed_conv = conv64(6, 4, flow='target_to_source')
    reversed_conv.load_state_dict(conv.state_dict())
    assert torch.allclose(reversed_conv(x, edge_index.flip(0), edge_weight),
                          conv(x, edge_index, edge_weight), atol=1e-12)
    adj = to_torch_csr_tensor(edge_index, size=(8, 8))
    with pytest.raises(ValueError, match='source_to_target'):
        reversed_conv(x, adj)


def test_apnet_conv_lazy_in_channels(make_random_graph):
    x, edge_index, _ = graph(make_random_graph=make_random_graph)
    conv = APNetConv(-1, 4).double()
    assert conv(x, edge_index).size() == (8, 6)
    assert conv.lin.weight.size() == (4, 6)


def test_apnet_conv_bad_input(make_random_graph):
    x, edge_index, edge_weight = graph(make_random_graph=make_random_graph)
    conv = conv64(6, 4)
    with pytest.raises(ValueError, match="'x' must have 2 dimensions"):
        conv(x[None], edge_index)
    with pytest.raises(ValueError, match="6 features"):
        conv(x[:, :5], edge_index)
    with pytest.raises(ValueError, match="floating-point"):
        conv(x.long(), edge_index)
    for bad in [math.nan, math.inf, -math.inf]:
        x_bad = x.clone()
        x_bad[3, 2] = bad
        with pytest.raises(ValueError, match="NaN or infinite"):
            conv(x_bad, edge_index)
    with pytest.raises(ValueError, match=r"shape \[2, num_edges\]"):
        conv(x, edge_index[0])
    with pytest.raises(ValueError, match="integer"):
        conv(x, edge_index.double())
    with pytest.raises(ValueError, match="outside"):
        conv(x, torch.cat([edge_index, torch.tensor([[0], [8]])], dim=1))
    with pytest.raises(ValueError, match="outside"):
        conv(x, torch.cat([edge_index, torch.tensor([[-1], [2]])], dim=1))
    with pytest.raises(ValueError, match="strictly positive"):
        conv(x, edge_index, edge_weight * 0)
    with pytest.raises(ValueError, match="strictly positive"):
        conv(x, edge_index, -edge_weight)
    with pytest.raises(ValueError, match="NaN or infinite"):
        conv(x, edge_index, edge_weight.clone().fill_(math.nan))
    with pytest.raises(ValueError, match="one weight per edge"):
        conv(x, edge_index, edge_weight[:-1])

    with pytest.raises(ValueError, match="num_steps"):
        APNetConv(6, num_steps=0)
    with pytest.raises(ValueError, match="temperature"):
        APNetConv(6, temperature=math.nan)
    with pytest.raises(ValueError, match="proj_channels"):
        APNetConv(6, proj_channels=0)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_apnet_conv_dtype(dtype, make_random_graph):
    x, edge_index, edge_weight = graph(dtype=dtype,
                                       make_random_graph=make_random_graph)
    conv = APNetConv(6, 4).to(dtype)
    out, (_, alpha) = conv(x, edge_index, edge_weight, True)
    assert out.dtype == dtype and alpha.dtype == dtype


def test_apnet_conv_compile(make_random_graph):
    x, edge_index, edge_weight = graph(dtype=torch.float32,
                                       make_random_graph=make_random_graph)
    conv = APNetConv(6, 4, num_steps=2)
    expected = conv(x, edge_index, edge_weight)
    compiled = torch.compile(conv)
    out = compiled(x, edge_index, edge_weight)
    assert torch.allclose(out, expected, atol=1e-6)

    x = x.clone().requires_grad_()
    compiled(x, edge_index, edge_weight).sum().backward()
    grad = x.grad.clone()
    x.grad = None
    conv(x, edge_index, edge_weight).sum().backward()
    assert torch.allclose(grad, x.grad, atol=1e-5)
