import math

import pytest
import torch
import torch_geometric
from torch.autograd import gradcheck
from torch_geometric.nn import DenseGATConv

from apnet_pyg.nn import DenseAPNetConv
from tests.helpers.dropout import dropout_scale, record_dropout


def dense_graph(batch_size=3, num_nodes=5, channels=6, seed=0, device='cpu'):
    r"""Features, a boolean adjacency and a weighted one (the weights on
    the same edges), drawn on CPU: the same on every device."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(
        batch_size,
        num_nodes,
        channels,
        generator=generator,
        dtype=torch.float64,
    )
    adj = (
        torch.rand(batch_size, num_nodes, num_nodes, generator=generator) < 0.4
    )
    weight = (
        torch.rand(
            batch_size,
            num_nodes,
            num_nodes,
            generator=generator,
            dtype=torch.float64,
        )
        + 0.1
    )
    return (
        x.to(device),
        adj.to(device),
        torch.where(adj, weight, 0.0).to(device),
    )


def conv64(*args, device='cpu', **kwargs):
    torch.manual_seed(0)
    # A temperature other than 1 and one step, the output the last step's,
    # where the tests ask for none.
    kwargs.setdefault('temperature', 0.5)
    kwargs.setdefault('num_steps', 1)
    kwargs.setdefault('learn_step_weights', False)
    kwargs.setdefault('teleport', None)
    return DenseAPNetConv(*args, **kwargs).double().to(device)


def test_dense_apnet_conv():
    x, adj, _ = dense_graph()
    conv = conv64(6, 4)
    assert str(conv) == (
        'DenseAPNetConv(6, proj_channels=4, temperature=0.5, num_steps=1)'
    )
    out, alpha = conv(x, adj, return_attention_weights=True)
    assert out.size() == (3, 5, 6)
    assert alpha.size() == (3, 5, 5)
    assert torch.allclose(
        alpha.sum(dim=-1), torch.ones(3, 5, dtype=alpha.dtype)
    )
    # Attention lives on the edges and the (added) self-loops only:
    edges = adj | torch.eye(5, dtype=torch.bool)
    assert bool((alpha[~edges] == 0).all())
    assert bool((alpha[edges] > 0).all())

    # A 2-D input is a batch of one; an adjacency broadcasts over the batch:
    assert conv(x[0], adj[0]).size() == (1, 5, 6)
    assert torch.allclose(
        conv(x, adj[0]), torch.cat([conv(x[b], adj[0]) for b in range(3)])
    )

    out, alpha = conv64(6, 4, num_steps=3)(
        x, adj, return_attention_weights=True
    )
    assert alpha.size() == (3, 5, 5, 3)


def test_dense_apnet_conv_signature_matches_dense_gat_conv():
    # forward(x, adj, mask=None, add_loop=True), as DenseGATConv and
    # DenseGCNConv; same output for a unit-weight adjacency and mask.
    import inspect

    ours = list(inspect.signature(DenseAPNetConv.forward).parameters)
    theirs = list(inspect.signature(DenseGATConv.forward).parameters)
    assert ours[: len(theirs)] == theirs


@pytest.mark.parametrize('num_steps', [1, 2])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('step_weights', ['last', 'fixed', 'learned'])
def test_dense_apnet_conv_equals_reference(
    num_steps, weighted, step_weights, apnet_reference, device
):
    x, adj, weight = dense_graph(device=device)
    weight[:, 1, 1] = 0.5  # An existing self-loop keeps its weight.
    adj = weight if weighted else weight != 0
    x.requires_grad_()
    weight.requires_grad_()
    conv = conv64(
        6,
        4,
        temperature=4.0,
        learn_temperature=True,
        num_steps=num_steps,
        learn_step_weights=step_weights == 'learned',
        teleport=0.3 if step_weights == 'fixed' else None,
        device=device,
    )
    if step_weights == 'learned':  # Away from one step's output.
        with torch.no_grad():
            conv.step_weights.copy_(torch.randn(num_steps + 1))
    out = conv(x, adj)
    for b in range(3):
        target, source = adj[b].nonzero().t()
        edge_index = torch.stack([source, target])
        edge_weight = adj[b][target, source] if weighted else None
        expected = apnet_reference(
            x[b],
            edge_index,
            conv.lin.weight,
            edge_weight,
            conv.temperature,
            num_steps,
            step_weights=conv.step_weights,
        )
        assert torch.allclose(out[b], expected, atol=1e-12)
        grad_out = torch.randn_like(expected)
        inputs = [x, weight, conv.lin.weight, conv.temperature]
        inputs += [conv.step_weights] if step_weights == 'learned' else []
        grads = torch.autograd.grad(
            out[b], inputs, grad_out, retain_graph=True, allow_unused=True
        )
        expected_grads = torch.autograd.grad(
            expected, inputs, grad_out, allow_unused=True, retain_graph=True
        )
        for grad, expected_grad in zip(grads, expected_grads):
            if expected_grad is None:  # The boolean adjacency: no weights.
                assert grad is None or bool((grad == 0).all())
            else:
                assert torch.allclose(grad, expected_grad, atol=1e-10)


@pytest.mark.parametrize('num_steps', [1, 3])
def test_dense_apnet_conv_attention_dropout_equals_reference(
    num_steps, monkeypatch, apnet_reference, device
):
    x, _, adj = dense_graph(device=device)
    x.requires_grad_()
    conv = conv64(
        6, 4, temperature=4.0, num_steps=num_steps, teleport=0.3, dropout=0.4
    ).to(device)
    draws = record_dropout(monkeypatch)
    out = conv(x, adj)
    assert len(draws) == num_steps  # a new draw each step
    drawn = [dropout_scale(*draw) for draw in draws]
    kept = torch.cat([scale[scale != 0] for scale in drawn])
    assert torch.allclose(kept, torch.full_like(kept, 1 / 0.6))
    for b in range(3):
        target, source = adj[b].nonzero().t()
        expected = apnet_reference(
            x[b],
            torch.stack([source, target]),
            conv.lin.weight,
            adj[b][target, source],
            conv.temperature,
            num_steps,
            step_weights=conv.step_weights,
            attention_scales=[scale[b] for scale in drawn],
        )
        assert torch.allclose(out[b], expected, atol=1e-12)
        inputs = [x, conv.lin.weight, conv.temperature]
        grad_out = torch.randn_like(expected)
        grads = torch.autograd.grad(
            out[b], inputs, grad_out, retain_graph=True
        )
        expected_grads = torch.autograd.grad(expected, inputs, grad_out)
        for grad, expected_grad in zip(grads, expected_grads):
            assert torch.allclose(grad, expected_grad, atol=1e-10)
    # Not in evaluation, where it is the layer without dropout.
    plain = conv64(6, 4, temperature=4.0, num_steps=num_steps, teleport=0.3)
    plain.load_state_dict(conv.state_dict())
    conv.eval()
    assert torch.allclose(conv(x, adj), plain.to(device)(x, adj), atol=1e-12)
    assert 'dropout=0.4)' in repr(conv)


def test_dense_apnet_conv_gradcheck():
    x, _, weight = dense_graph(batch_size=2, num_nodes=4, channels=3)
    conv = conv64(3, 2, temperature=2.0, num_steps=2)
    x.requires_grad_()
    edges = weight != 0

    def function(x, weight):  # Only the edges' weights vary.
        return conv(x, torch.where(edges, weight, 0.0))

    assert gradcheck(function, (x, weight.requires_grad_()))


def test_dense_apnet_conv_mask_means_valid_nodes():
    # An integer mask's non-zero entries are the valid nodes, for the edges
    # and the output alike: a valid node's output is never scaled by a mask
    # value (0/1 is checked in debug mode). A floating-point mask (0.5:
    # valid or not?) is refused, in one line, without reading its values.
    x, adj, _ = dense_graph()
    conv = conv64(6, 4)
    mask = torch.tensor(
        [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool
    )
    expected = conv(x, adj, mask)
    assert torch.equal(conv(x, adj, mask.long()), expected)
    with torch_geometric.debug():
        assert torch.equal(conv(x, adj, mask.int()), expected)
        with pytest.raises(
            ValueError,
            match=r"'mask' must hold only 0 and "
            r'1 \(got 2\)',
        ):
            conv(x, adj, mask.long() * 2)
    for float_mask in (mask.double() * 0.5, mask.double(), mask.half()):
        with pytest.raises(
            ValueError,
            match=r"^'mask' must be a boolean "
            r'\(or 0/1 integer\) tensor of the valid nodes '
            r'\(got dtype torch\.\w+\): pass mask\.bool\(\)',
        ):
            conv(x, adj, float_mask)


def test_dense_apnet_conv_meta_tensors():
    conv = DenseAPNetConv(6, 4).to('meta')
    out = conv(
        torch.empty(3, 5, 6, device='meta'),
        torch.empty(3, 5, 5, device='meta'),
    )
    assert out.device.type == 'meta' and out.shape == (3, 5, 6)


def test_dense_apnet_conv_mask():
    x, _, adj = dense_graph()
    mask = torch.tensor(
        [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool
    )
    conv = conv64(6, 4)
    out = conv(x, adj, mask)
    assert bool((out[~mask] == 0).all())
    # Padding never leaks into the valid nodes:
    x_noisy = x.clone()
    x_noisy[~mask] = 1e3
    assert torch.allclose(conv(x_noisy, adj, mask), out)
    # ... and each graph equals the unpadded graph on its own:
    assert torch.allclose(out[1, :3], conv(x[1, :3], adj[1, :3, :3])[0])
    # A single valid node with its self-loop is returned unchanged:
    assert torch.allclose(out[2, 0], x[2, 0])


def test_dense_apnet_conv_no_self_loops():
    x, adj, _ = dense_graph()
    adj[:, 2, :] = False  # node 2 aggregates from nobody
    conv = conv64(6, 4)
    out = conv(x, adj, add_loop=False)
    assert bool(torch.isfinite(out).all())
    assert bool((out[:, 2] == 0).all())


def test_dense_apnet_conv_adjacency_values_are_weights(apnet_reference):
    # Integer counts (e.g. to_dense_adj of repeated edges) are weights too.
    x, adj, _ = dense_graph()
    conv = conv64(6, 4)
    counts = adj.long() * 2
    assert torch.allclose(conv(x, counts), conv(x, counts.double()))
    assert not torch.allclose(conv(x, counts), conv(x, adj))
    # Scaling every weight of a row, self-loop included, changes nothing:
    with_loops = adj | torch.eye(5, dtype=torch.bool)
    assert torch.allclose(
        conv(x, 3.0 * with_loops.double()), conv(x, with_loops)
    )


def test_dense_apnet_conv_bad_input():
    x, adj, weight = dense_graph()
    conv = conv64(6, 4)
    with pytest.raises(ValueError, match="'adj' must have shape"):
        conv(x, adj[:, :4])
    with pytest.raises(ValueError, match='6 features'):
        conv(x[..., :5], adj)
    with pytest.raises(ValueError, match="'mask' must have shape"):
        conv(x, adj, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="'adj' must be a dense tensor"):
        conv(x, adj.to_sparse())
    with pytest.raises(ValueError, match='must be an int'):
        DenseAPNetConv((6, 6))

    # Value checks run in debug mode (they read the data):
    x_bad = x.clone()
    x_bad[0, 0, 0] = math.nan
    negative = torch.where(adj, -weight, weight)
    for message, args in [
        ('NaN or infinite', (x_bad, adj)),
        ("'adj' must be strictly positive", (x, negative)),
        ("'adj' contains NaN", (x, weight.clone().fill_(math.inf))),
    ]:
        with torch_geometric.debug():
            with pytest.raises(ValueError, match=message):
                conv(*args)
        assert conv(*args).shape == x.shape  # No check outside debug mode.


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_dense_apnet_conv_compile(dtype, device):
    import torch._dynamo

    torch._dynamo.reset()
    x, _, adj = dense_graph(channels=6, device=device)
    x, adj = x.to(dtype), adj.to(dtype)
    mask = torch.ones(3, 5, dtype=torch.bool, device=device)
    mask[1, 3:] = False
    conv = DenseAPNetConv(
        6,
        4,
        num_steps=2,
        learn_temperature=True,
        learn_step_weights=False,
        teleport=None,
    ).to(device, dtype)
    explanation = torch._dynamo.explain(conv)(x, adj, mask)
    assert explanation.graph_break_count == 0, explanation.break_reasons

    x.requires_grad_()
    compiled = torch.compile(conv, fullgraph=True, backend='aot_eager')
    results = []
    for module in [compiled, conv]:
        out = module(x, adj, mask)
        results.append(
            (
                out,
                *torch.autograd.grad(
                    out.square().sum(), [x, conv.lin.weight, conv.temperature]
                ),
            )
        )
    atol = 1e-5 if dtype == torch.float32 else 1e-2
    for compiled_result, eager_result in zip(*results):
        assert compiled_result.dtype == eager_result.dtype == dtype
        assert torch.allclose(compiled_result, eager_result, atol=atol)
    torch._dynamo.reset()


def masked_dense_reference(
    x, adj, mask, weight, temperature, num_steps, add_loop
):
    r"""Every graph's valid nodes on their own, from the equation:
    :math:`\alpha_{ij} \propto A_{ij} \exp(\gamma \cos(W x_i, W x_j))` over
    the valid :math:`j` with :math:`A_{ij} \neq 0` (and, with
    :obj:`add_loop`, a self-loop of weight 1 where there is none),
    :math:`x'_i = \sum_j \alpha_{ij} x_j`, zero for a row without any
    edge; the padding nodes' outputs are zero."""
    out = []
    for b in range(x.size(0)):
        valid = mask[b].nonzero().view(-1)
        h = x[b][valid]
        prior = adj[b][valid][:, valid]
        prior = torch.where(prior != 0, prior, 0.0)  # No gradient off edges.
        if add_loop:
            prior = prior + torch.diag((prior.diagonal() == 0).to(x.dtype))
        for _ in range(num_steps):
            p = h @ weight.t()
            p = p / p.norm(dim=-1, keepdim=True).clamp_min(1e-12)
            scores = prior * torch.exp(temperature * (p @ p.t()))
            denominator = scores.sum(dim=-1, keepdim=True)
            h = scores / torch.where(denominator > 0, denominator, 1.0) @ h
        out.append(x.new_zeros(x.shape[1:]).index_put((valid,), h))
    return torch.stack(out)


@pytest.mark.parametrize('num_steps', [1, 2])
@pytest.mark.parametrize('add_loop', [True, False])
def test_dense_apnet_conv_mask_equals_reference(add_loop, num_steps, device):
    x, _, weight = dense_graph()
    generator = torch.Generator().manual_seed(1)
    # Valid nodes anywhere in a graph (node 0 always); edges to and from
    # padding nodes, which the mask must drop; a self-loop of its own
    # weight on node 1; node 0 of graph 0 is isolated.
    mask = torch.rand(3, 5, generator=generator) < 0.6
    mask[:, 0] = True
    weight[:, 1, 1] = (
        torch.rand(3, generator=generator, dtype=torch.float64) + 0.1
    )
    weight[0, 0, :] = weight[0, :, 0] = 0.0
    assert bool((~mask).any()) and bool((weight[~mask] != 0).any())
    x, weight, mask = x.to(device), weight.to(device), mask.to(device)
    x.requires_grad_()
    weight.requires_grad_()
    conv = conv64(
        6,
        4,
        temperature=4.0,
        learn_temperature=True,
        num_steps=num_steps,
        device=device,
    )

    out = conv(x, weight, mask, add_loop=add_loop)
    expected = masked_dense_reference(
        x, weight, mask, conv.lin.weight, conv.temperature, num_steps, add_loop
    )
    torch.testing.assert_close(out, expected)
    # The isolated node: unchanged with its added self-loop, else zero.
    torch.testing.assert_close(
        out[0, 0], x[0, 0] if add_loop else x.new_zeros(6)
    )
    inputs = [x, weight, conv.lin.weight, conv.temperature]
    grad_out = torch.randn(
        out.shape, generator=generator, dtype=torch.float64
    ).to(device)
    grads = torch.autograd.grad(out, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    for grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected_grad)
    # Nothing flows to the padding nodes:
    assert bool((grads[0][~mask] == 0).all())


# Half precision and autocast #################################################
LOW_PRECISION = [torch.float16, torch.bfloat16]


def assert_close_in(actual, expected, dtype):
    r"""Within two units in the last place of the largest value."""
    assert actual.dtype == dtype
    atol = 2 * torch.finfo(dtype).eps * expected.abs().max().item()
    torch.testing.assert_close(
        actual.double(), expected.double(), rtol=0, atol=atol
    )


@pytest.mark.parametrize('dtype', LOW_PRECISION)
@pytest.mark.parametrize('temperature,num_steps', [(0.5, 2), (10.0, 1)])
def test_dense_apnet_conv_half_precision_equals_reference(
    temperature, num_steps, dtype, device
):
    # The attention in float32, the aggregation a product in dtype: output
    # and gradients are the float64 reference of the same (rounded) values
    # within two units in the last place.
    x, _, weight = dense_graph(num_nodes=12, channels=16, device=device)
    torch.manual_seed(0)
    conv = DenseAPNetConv(
        16,
        32,
        temperature=temperature,
        learn_temperature=True,
        num_steps=num_steps,
        learn_step_weights=False,
        teleport=None,
    ).to(device, dtype)
    mask = torch.ones(3, 12, dtype=torch.bool, device=device)
    mask[1, 9:] = False
    x = x.to(dtype).requires_grad_()
    weight = weight.to(dtype).requires_grad_()
    out, alpha = conv(x, weight, mask, return_attention_weights=True)
    assert alpha.dtype == dtype

    parameters = [conv.lin.weight, conv.temperature]
    inputs64 = [
        t.detach().double().requires_grad_() for t in [x, weight, *parameters]
    ]
    expected = masked_dense_reference(
        *inputs64[:2], mask, *inputs64[2:], num_steps, add_loop=True
    )
    assert_close_in(out, expected, dtype)
    grad_out = torch.randn(
        out.shape, dtype=dtype, generator=torch.Generator().manual_seed(1)
    )
    grad_out = grad_out.to(device)
    grads = torch.autograd.grad(out, [x, weight, *parameters], grad_out)
    expected_grads = torch.autograd.grad(expected, inputs64, grad_out.double())
    for grad, expected_grad in zip(grads, expected_grads):
        assert_close_in(grad, expected_grad, dtype)


@pytest.mark.parametrize('dtype', LOW_PRECISION)
def test_dense_apnet_conv_autocast(dtype, device):
    # As DenseGATConv: under autocast the products run in its dtype, and so
    # does the output; the cosines and the softmax stay in float32.
    x, _, _ = dense_graph(num_nodes=12, channels=16, device=device)
    x = x.float()
    adj = torch.ones(12, 12, dtype=torch.bool, device=device)
    torch.manual_seed(0)
    conv = DenseAPNetConv(
        16,
        32,
        temperature=10.0,
        num_steps=1,
        learn_step_weights=False,
        teleport=None,
    ).to(device)
    with torch.autocast(device.type, dtype=dtype):
        out, alpha = conv(x, adj, return_attention_weights=True)
        h = conv.lin(x)
    assert out.dtype == h.dtype == dtype and alpha.dtype == torch.float32
    h = torch.nn.functional.normalize(h.float(), dim=-1)
    expected = torch.softmax(10.0 * (h @ h.transpose(-1, -2)), dim=-1)
    torch.testing.assert_close(alpha, expected, rtol=1e-5, atol=1e-6)
    assert_close_in(out, conv(x, adj), dtype)
