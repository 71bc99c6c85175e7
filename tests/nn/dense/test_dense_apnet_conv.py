import math

import pytest
import torch
from torch.autograd import gradcheck

from apnet_pyg.nn import DenseAPNetConv


def dense_graph(batch_size=3, num_nodes=5, channels=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, num_nodes, channels, generator=generator,
                    dtype=torch.float64)
    adj = torch.rand(batch_size, num_nodes, num_nodes,
                     generator=generator) < 0.4
    weight = torch.rand(batch_size, num_nodes, num_nodes, generator=generator,
                        dtype=torch.float64) + 0.1
    return x, adj, weight


def test_dense_apnet_conv():
    x, adj, _ = dense_graph()
    conv = DenseAPNetConv(6, 4).double()
    assert str(conv) == ('DenseAPNetConv(6, proj_channels=4, '
                         'temperature=10.0, num_steps=1)')
    out, alpha = conv(x, adj, return_attention_weights=True)
    assert out.size() == (3, 5, 6)
    assert alpha.size() == (3, 5, 5)
    assert torch.allclose(alpha.sum(dim=-1), torch.ones(3, 5,
                                                        dtype=alpha.dtype))
    # Attention lives on the edges and the (added) self-loops only:
    edges = adj | torch.eye(5, dtype=torch.bool)
    assert bool((alpha[~edges] == 0).all())
    assert bool((alpha[edges] > 0).all())

    # A 2-D input is a batch of one; an adjacency broadcasts over the batch:
    assert conv(x[0], adj[0]).size() == (1, 5, 6)
    assert torch.allclose(conv(x, adj[0]),
                          torch.cat([conv(x[b], adj[0]) for b in range(3)]))

    out, alpha = DenseAPNetConv(6, 4, num_steps=3).double()(
        x, adj, return_attention_weights=True)
    assert alpha.size() == (3, 5, 5, 3)


@pytest.mark.parametrize('num_steps', [1, 2])
def test_dense_apnet_conv_equals_reference(num_steps, apnet_reference):
    x, adj, weight = dense_graph()
    x.requires_grad_()
    weight.requires_grad_()
    conv = DenseAPNetConv(6, 4, temperature=4.0, learn_temperature=True,
                          num_steps=num_steps).double()
    out = conv(x, adj.double(), weight)
    for b in range(3):
        target, source = adj[b].nonzero().t()
        edge_index = torch.stack([source, target])
        expected = apnet_reference(x[b], edge_index, conv.lin.weight,
                                   weight[b][target, source],
                                   conv.temperature, num_steps)
        assert torch.allclose(out[b], expected, atol=1e-12)
        grad_out = torch.randn_like(expected)
        inputs = [x, weight, conv.lin.weight, conv.temperature]
        grads = torch.autograd.grad(out[b], inputs, grad_out,
                                    retain_graph=True)
        expected_grads = torch.autograd.grad(expected, inputs, grad_out,
                                             allow_unused=True,
                                             retain_graph=True)
        for grad, expected_grad in zip(grads, expected_grads):
            assert torch.allclose(grad, expected_grad, atol=1e-10)


def test_dense_apnet_conv_gradcheck():
    x, adj, weight = dense_graph(batch_size=2, num_nodes=4, channels=3)
    conv = DenseAPNetConv(3, 2, temperature=2.0, num_steps=2).double()
    x.requires_grad_()
    weight.requires_grad_()
    assert gradcheck(lambda x, w: conv(x, adj, w), (x, weight))


def test_dense_apnet_conv_mask():
    x, adj, weight = dense_graph()
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]],
                        dtype=torch.bool)
    conv = DenseAPNetConv(6, 4).double()
    out = conv(x, adj, weight, mask)
    assert bool((out[~mask] == 0).all())
    # Padding never leaks into the valid nodes:
    x_noisy = x.clone()
    x_noisy[~mask] = 1e3
    assert torch.allclose(conv(x_noisy, adj, weight, mask), out)
    # ... and each graph equals the unpadded graph on its own:
    assert torch.allclose(out[1, :3], conv(x[1, :3], adj[1, :3, :3],
                                           weight[1, :3, :3])[0])
    # A single valid node with its self-loop is returned unchanged:
    assert torch.allclose(out[2, 0], x[2, 0])


def test_dense_apnet_conv_no_self_loops():
    x, adj, _ = dense_graph()
    adj[:, 2, :] = False  # node 2 aggregates from nobody
    conv = DenseAPNetConv(6, 4, add_self_loops=False).double()
    out = conv(x, adj)
    assert bool(torch.isfinite(out).all())
    assert bool((out[:, 2] == 0).all())


def test_dense_apnet_conv_bad_input():
    x, adj, weight = dense_graph()
    conv = DenseAPNetConv(6, 4).double()
    with pytest.raises(ValueError, match="'adj' must have shape"):
        conv(x, adj[:, :4])
    with pytest.raises(ValueError, match="6 features"):
        conv(x[..., :5], adj)
    x_bad = x.clone()
    x_bad[0, 0, 0] = math.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        conv(x_bad, adj)
    with pytest.raises(ValueError, match="'edge_weight' must have shape"):
        conv(x, adj, weight[:, :4])
    with pytest.raises(ValueError, match="strictly positive"):
        conv(x, adj, torch.where(adj, -weight, weight))
    # Non-positive weights off the edges are ignored:
    assert torch.allclose(conv(x, adj, torch.where(adj, weight, 0 * weight)),
                          conv(x, adj, weight))
    with pytest.raises(ValueError, match="'mask' must have shape"):
        conv(x, adj, mask=torch.ones(3, 4, dtype=torch.bool))
