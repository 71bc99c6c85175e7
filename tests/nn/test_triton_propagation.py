r"""The fused Triton kernels of attention propagation
(:mod:`apnet_pyg.nn.triton_propagation`) against a dense float64
reference and the composed sparse kernels: forward, every gradient,
gradcheck, empty rows, isolated nodes, repeated edges, bipartite sizes, a
symmetric pattern (the one-pass backward), weights, self-loops and their
log weights, half precision.

On CPU the kernels run under Triton's interpreter, which must be chosen
before Triton is imported: the CPU cases run in one subprocess started
with TRITON_INTERPRET=1 (:func:`test_cpu_cases_under_the_interpreter`);
the same tests run natively on a CUDA device when there is one."""

import functools
import subprocess
import sys

import pytest
import torch
from torch._dynamo.backends.registry import lookup_backend
from torch.autograd import gradcheck
from torch_geometric import EdgeIndex

from apnet_pyg.nn import triton_propagation as tp
from apnet_pyg.nn.functional import (
    NORM_EPS,
    csr_arrays,
    edge_index_arrays,
)
from apnet_pyg.nn.triton_propagation import (
    MAX_FEATURES,
    composed_attention_propagate,
    is_symmetric_pattern,
    propagation_floor_bytes,
    propagation_kernel_bytes,
    triton_attention_propagate,
)
from tests.helpers.interpreter import (
    run_under_interpreter,
    starts_interpreter,
)

requires_triton = pytest.mark.skipif(
    not tp.is_triton_available(),
    reason='Triton is not installed (pip install triton==3.6.0)',
)

DEVICES = [
    'cpu',
    pytest.param(
        'cuda',
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(
                not torch.cuda.is_available(),
                reason='no CUDA device: the native kernels run only on a GPU',
            ),
        ],
    ),
]


@pytest.fixture(params=DEVICES)
def device(request):
    if not tp.is_triton_available():
        pytest.skip('Triton is not installed (pip install triton==3.6.0)')
    if request.param == 'cpu' and not tp.interpreting():
        pytest.skip(
            'CPU tensors run the kernels under the interpreter, in the '
            'subprocess of test_cpu_cases_under_the_interpreter'
        )
    if request.param == 'cuda' and tp.interpreting():
        pytest.skip(
            'Triton was imported with TRITON_INTERPRET=1: it runs '
            'interpreted in this process, also on CUDA tensors'
        )
    return torch.device(request.param)


@starts_interpreter
def test_cpu_cases_under_the_interpreter(tmp_path):
    # Every test of this module on CPU tensors, in a process where Triton
    # is imported with TRITON_INTERPRET=1 (its library functions, tl.sum
    # and the like, are then interpreted ones).
    run_under_interpreter(
        __file__,
        'cpu and not test_cpu_cases_under_the_interpreter',
        tmp_path,
        minimum=25,
    )


# (destination, source) entries of small graphs, chosen for their
# corner cases. 'square': node 0 a hub (several blocks of entries, a
# repeated entry), node 1 with a self-loop entry of its own, node 2 a
# repeated entry, node 4 an empty row without a self-loop, node 6
# isolated (only its self-loop). 'bipartite': 4 destinations, 6 sources,
# row 3 empty. 'wide': more destinations than sources (no self-loops).
# 'symmetric': the pattern of an undirected graph.
CASES = {
    'square': dict(
        size=(7, 7),
        entries=[
            (0, 1),
            (0, 2),
            (0, 3),
            (0, 4),
            (0, 5),
            (0, 2),
            (1, 1),
            (1, 0),
            (2, 3),
            (2, 3),
            (2, 4),
            (3, 0),
            (5, 2),
        ],
        loop_kept=[True, False, True, True, False, True, True],
    ),
    'bipartite': dict(
        size=(4, 6),
        entries=[
            (0, 0),
            (0, 1),
            (0, 2),
            (0, 3),
            (0, 4),
            (0, 5),
            (1, 2),
            (1, 2),
            (2, 5),
        ],
        loop_kept=[True, False, True, True],
    ),
    'wide': dict(
        size=(5, 3),
        entries=[(0, 0), (0, 1), (0, 2), (1, 1), (2, 0), (2, 2), (3, 2)],
        loop_kept=None,
    ),
    # An undirected graph (its pattern equals its transpose's): node 0 a
    # hub, a repeated edge (1, 2), a self-loop entry (3, 3), node 5
    # isolated.
    'symmetric': dict(
        size=(6, 6),
        entries=[
            (0, 1),
            (1, 0),
            (0, 2),
            (2, 0),
            (0, 3),
            (3, 0),
            (0, 4),
            (4, 0),
            (1, 2),
            (2, 1),
            (1, 2),
            (2, 1),
            (3, 3),
            (2, 4),
            (4, 2),
        ],
        loop_kept=[True, True, False, True, True, True],
    ),
}


def make_case(
    name,
    device,
    dtype=torch.float64,
    loops=True,
    weights=True,
    temperature=2.0,
    x_channels=5,
    h_channels=3,
    zero_row=None,
    seed=0,
    loop_weights=True,
):
    r"""A graph of :data:`CASES` with random features: the pattern and the
    inputs of :func:`triton_attention_propagate` (as a dict; the log
    weights one per entry in pattern order, and one per row for the
    self-loops where :obj:`loops` and :obj:`loop_weights`)."""
    spec = CASES[name]
    num_dst, num_src = spec['size']
    generator = torch.Generator().manual_seed(seed)
    entries = torch.tensor(spec['entries'], dtype=torch.long).view(-1, 2)
    pattern, perm = edge_index_arrays(
        entries.t().to(device), (num_dst, num_src)
    )
    bipartite = name not in ('square', 'symmetric')

    def randn(*shape):
        return torch.randn(
            *shape, generator=generator, dtype=torch.float64
        ).to(device, dtype)

    x = randn(num_src, x_channels)
    h_dst = randn(num_dst, h_channels)
    h_src = randn(num_src, h_channels) if bipartite else None
    if zero_row is not None:  # A norm below NORM_EPS: clamped.
        (h_dst if h_src is None else h_src)[zero_row] = 0.0
    log_weight = randn(entries.size(0)) if weights else None
    loop_kept = loop_log_weight = None
    if loops and spec['loop_kept'] is not None:
        loop_kept = torch.tensor(spec['loop_kept'], device=device)
        if loop_weights:
            loop_log_weight = randn(num_dst)
    inputs = dict(
        x=x,
        h_dst=h_dst,
        h_src=h_src,
        temperature=torch.tensor(temperature, dtype=dtype, device=device),
        log_weight=log_weight,
        loop_kept=loop_kept,
        loop_log_weight=loop_log_weight,
    )
    return pattern, inputs


def dense_reference(
    pattern,
    x,
    h_dst,
    h_src,
    temperature,
    log_weight=None,
    loop_kept=None,
    loop_log_weight=None,
):
    r"""The propagation from its equation, with dense :math:`M \times N`
    matrices: :math:`\alpha_{ij} \propto W_{ij} \exp(\gamma \cos_{ij})`,
    :math:`W_{ij}` the summed weights of the entries :math:`(i, j)`, and a
    self-loop as one more column (logit :math:`\gamma` times the
    self-cosine of :math:`\mathbf{h}^{dst}_i` plus its log weight, value
    :math:`\mathbf{x}_i`); rows without any term mapped to zero.
    Independent of the package's kernels."""
    num_dst, num_src = pattern.size
    h_src = h_dst if h_src is None else h_src

    def norm(h):
        return h.norm(dim=-1, keepdim=True).clamp_min(NORM_EPS)

    cos = (h_dst / norm(h_dst)) @ (h_src / norm(h_src)).t()
    row, col = pattern.row.long(), pattern.col.long()
    if log_weight is None:
        log_weight = x.new_zeros(pattern.nnz)
    weight = x.new_zeros(num_dst, num_src).index_put(
        (row, col), log_weight.exp(), accumulate=True
    )
    present = weight > 0
    # log(1) where absent: a log(0) would send NaN through where's backward.
    logits = torch.where(
        present,
        temperature * cos + torch.where(present, weight, 1.0).log(),
        float('-inf'),
    )
    values = x
    if loop_kept is not None:
        self_cos = (h_dst.detach().norm(dim=-1) > NORM_EPS).to(x.dtype)
        loop_logit = temperature * self_cos
        if loop_log_weight is not None:
            loop_logit = loop_logit + loop_log_weight
        loop_logit = torch.where(loop_kept, loop_logit, float('-inf'))
        logits = torch.cat([logits, loop_logit.unsqueeze(-1)], dim=-1)
        values = torch.cat([x, x[:num_dst]], dim=0)
    row_max = logits.max(dim=-1, keepdim=True).values.detach()
    row_max = torch.where(row_max.isfinite(), row_max, 0.0)
    exp = (logits - row_max).exp()
    total = exp.sum(dim=-1, keepdim=True)
    alpha = exp / torch.where(total > 0, total, 1.0)
    if loop_kept is None:
        return alpha @ values
    return alpha[:, :num_src] @ x + alpha[:, num_src:] * x[:num_dst]


NAMES = (
    'x',
    'h_dst',
    'h_src',
    'temperature',
    'log_weight',
    'loop_log_weight',
)


def outputs_and_grads(function, pattern, inputs, grad_out=None, seed=1):
    r"""The output and the gradients of :obj:`(grad_out * out).sum()` with
    respect to the floating inputs (:obj:`None` where absent), through
    detached views of :obj:`inputs` (same layout) as leaves."""
    leaves = {
        name: (
            None
            if value is None
            else value.detach().requires_grad_(name in NAMES)
        )
        for name, value in inputs.items()
    }
    out = function(pattern, **leaves)
    if grad_out is None:
        generator = torch.Generator().manual_seed(seed)
        grad_out = torch.randn(
            out.shape, generator=generator, dtype=torch.float64
        ).to(out.device, out.dtype)
    wanted = [leaves[name] for name in NAMES if leaves.get(name) is not None]
    grads = iter(torch.autograd.grad(out, wanted, grad_out))
    return out, {
        name: next(grads) if leaves.get(name) is not None else None
        for name in NAMES
    }


def assert_close_all(actual, expected, **tolerance):
    out, grads = actual
    expected_out, expected_grads = expected
    torch.testing.assert_close(out, expected_out.to(out.dtype), **tolerance)
    for name in NAMES:
        if expected_grads[name] is None:
            assert grads[name] is None, name
        else:
            torch.testing.assert_close(
                grads[name],
                expected_grads[name].to(grads[name].dtype),
                **tolerance,
                msg=lambda m, name=name: f'gradient of {name}: {m}',
            )


# ---------------------------------------------------------------------------
# Against the dense float64 reference
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    'name,loops,weights,channels',
    [
        ('square', True, True, (5, 3)),
        ('square', False, False, (5, 3)),
        ('square', True, False, (3, 5)),
        ('bipartite', True, True, (5, 3)),
        ('bipartite', False, True, (5, 3)),
        ('wide', False, True, (5, 3)),
        # F <= H: the one-pass symmetric backward; F > H: columns and rows.
        ('symmetric', True, True, (3, 5)),
        ('symmetric', False, False, (3, 5)),
        ('symmetric', True, True, (5, 3)),
    ],
)
def test_matches_dense_reference(device, name, loops, weights, channels):
    pattern, inputs = make_case(
        name,
        device,
        loops=loops,
        weights=weights,
        x_channels=channels[0],
        h_channels=channels[1],
    )
    actual = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    expected = outputs_and_grads(dense_reference, pattern, inputs)
    assert_close_all(actual, expected, rtol=1e-9, atol=1e-11)
    out = actual[0]
    if name == 'square':
        # Node 4: an empty row without a self-loop; node 6: isolated, only
        # its self-loop (x_6 itself) or nothing.
        assert torch.equal(out[4], torch.zeros_like(out[4]))
        assert torch.allclose(
            out[6], inputs['x'][6] if loops else torch.zeros_like(out[6])
        )


@pytest.mark.parametrize(
    'channels,one_pass', [((3, 5), True), ((5, 3), False)]
)
def test_symmetric_pattern_backward(device, channels, one_pass, monkeypatch):
    # An undirected graph's pattern is its transpose's: with h_src = h_dst
    # and F <= H the backward pass takes the one-pass kernel (entry and
    # mirror in one program), otherwise the column and row passes; both
    # against the reference, every gradient.
    from apnet_pyg.nn.triton_propagation import launch

    taken = []
    choose = launch.uses_symmetric_backward

    def record(*args):
        taken.append(choose(*args))
        return taken[-1]

    monkeypatch.setattr(launch, 'uses_symmetric_backward', record)
    pattern, inputs = make_case(
        'symmetric', device, x_channels=channels[0], h_channels=channels[1]
    )
    assert is_symmetric_pattern(pattern)
    assert not is_symmetric_pattern(make_case('square', device)[0])
    actual = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    expected = outputs_and_grads(dense_reference, pattern, inputs)
    assert_close_all(actual, expected, rtol=1e-9, atol=1e-11)
    assert taken == [one_pass]


def test_zero_rows_and_large_temperature(device):
    # A row of h with norm 0 (cosine 0 with everything, self-cosine 0, the
    # clamped norm's gradient) and a temperature of 300, at which exp()
    # overflows without the running maximum. (Not the bipartite case's
    # column 2: row 1 aggregates it alone, so its gradient is exactly 0 by
    # cancellation, alpha (g.x_2 - sum alpha g.x_2), and the clamped norm
    # multiplies what rounding leaves by gamma / eps = 3e14: 0.27 on an
    # H200, 0 in the interpreter, neither of them wrong.)
    for name, zero_row in (('square', 3), ('bipartite', 3)):
        pattern, inputs = make_case(
            name, device, temperature=300.0, zero_row=zero_row
        )
        actual = outputs_and_grads(triton_attention_propagate, pattern, inputs)
        expected = outputs_and_grads(dense_reference, pattern, inputs)
        assert_close_all(actual, expected, rtol=1e-8, atol=1e-9)
        assert bool(actual[0].isfinite().all())


def test_edge_index_input(device):
    # A row-sorted EdgeIndex (rows the destinations) gives the output of
    # the arrays read from it.
    edge_index = EdgeIndex(
        torch.tensor([[0, 0, 1, 2, 2, 3], [1, 3, 0, 0, 3, 2]], device=device),
        sparse_size=(4, 4),
        sort_order='row',
    )
    arrays, _ = csr_arrays(edge_index)
    generator = torch.Generator().manual_seed(0)
    x, h = (
        torch.randn(4, width, generator=generator, dtype=torch.float64).to(
            device
        )
        for width in (3, 2)
    )
    kept = torch.tensor([True, False, True, True], device=device)
    expected = composed_attention_propagate(
        arrays, x, h, None, 2.0, loop_kept=kept
    )
    for adjacency in (edge_index, arrays):
        torch.testing.assert_close(
            triton_attention_propagate(
                adjacency, x, h, None, 2.0, loop_kept=kept
            ),
            expected,
        )


def test_empty_pattern(device):
    # No entries at all: a self-loop returns x_i, no self-loop gives 0.
    num_nodes = 3
    empty = torch.empty(2, 0, dtype=torch.long, device=device)
    pattern, _ = edge_index_arrays(empty, (num_nodes, num_nodes))
    x = torch.randn(num_nodes, 4, dtype=torch.float64, device=device)
    h = torch.randn(num_nodes, 2, dtype=torch.float64, device=device)
    kept = torch.tensor([True, False, True], device=device)
    inputs = dict(
        x=x,
        h_dst=h,
        h_src=None,
        temperature=torch.tensor(1.0, dtype=torch.float64, device=device),
        log_weight=None,
        loop_kept=kept,
    )
    out, grads = outputs_and_grads(
        triton_attention_propagate,
        pattern,
        inputs,
        grad_out=torch.ones_like(x),
    )
    assert torch.equal(out, x * kept.unsqueeze(-1))
    assert torch.equal(grads['x'], kept.unsqueeze(-1).expand_as(x).double())
    assert torch.equal(grads['h_dst'], torch.zeros_like(h))
    assert float(grads['temperature']) == 0.0
    inputs['loop_kept'] = None
    assert torch.equal(
        triton_attention_propagate(pattern, **inputs), torch.zeros_like(x)
    )

    # No destination rows.
    pattern, _ = edge_index_arrays(empty, (0, num_nodes))
    out = triton_attention_propagate(pattern, x, h[:0], h, 1.0)
    assert out.shape == (0, 4)


# ---------------------------------------------------------------------------
# Against the composed sparse kernels (APNetConv's fused path today)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize('name', ['square', 'bipartite', 'symmetric'])
def test_matches_composed_kernels(device, name):
    pattern, inputs = make_case(
        name, device, dtype=torch.float32, x_channels=4, h_channels=6
    )
    actual = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    expected = outputs_and_grads(composed_attention_propagate, pattern, inputs)
    assert_close_all(actual, expected, rtol=1e-5, atol=1e-5)


def test_gradcheck(device):
    # Every input, the self-loops' log weights too; the symmetric case
    # through the one-pass backward (F <= H).
    for name, channels in (
        ('square', (3, 2)),
        ('bipartite', (3, 2)),
        ('symmetric', (2, 3)),
    ):
        pattern, inputs = make_case(
            name, device, x_channels=channels[0], h_channels=channels[1]
        )
        names = [n for n in NAMES if inputs[n] is not None]
        values = [inputs[n].detach().requires_grad_() for n in names]

        def function(*args, pattern=pattern, inputs=inputs, names=names):
            return triton_attention_propagate(
                pattern, **dict(inputs, **dict(zip(names, args)))
            )

        assert gradcheck(function, values, fast_mode=True)


def test_some_inputs_need_gradients(device):
    # Each input alone needs a gradient (the kernels skip the others'),
    # and none (inference).
    pattern, inputs = make_case('bipartite', device)
    expected = outputs_and_grads(dense_reference, pattern, inputs)[1]
    for name in NAMES:
        leaves = dict(inputs)
        leaves[name] = inputs[name].detach().clone().requires_grad_()
        out = triton_attention_propagate(pattern, **leaves)
        generator = torch.Generator().manual_seed(1)
        grad_out = torch.randn(
            out.shape, generator=generator, dtype=torch.float64
        ).to(device)
        (grad,) = torch.autograd.grad(out, leaves[name], grad_out)
        torch.testing.assert_close(grad, expected[name], rtol=1e-9, atol=1e-11)
    with torch.no_grad():
        out = triton_attention_propagate(pattern, **inputs)
    torch.testing.assert_close(
        out, dense_reference(pattern, **inputs), rtol=1e-9, atol=1e-11
    )


def test_same_tensor_on_both_sides(device):
    # h given as h_dst and h_src (one tensor): one gradient with both parts.
    pattern, inputs = make_case('square', device)
    h = inputs['h_dst'].detach().clone().requires_grad_()
    out = triton_attention_propagate(
        pattern, inputs['x'], h, h, inputs['temperature']
    )
    (grad,) = torch.autograd.grad(out.square().sum(), h)
    h_ref = h.detach().clone().requires_grad_()
    out_ref = dense_reference(
        pattern, inputs['x'], h_ref, None, inputs['temperature']
    )
    (grad_ref,) = torch.autograd.grad(out_ref.square().sum(), h_ref)
    torch.testing.assert_close(grad, grad_ref, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_precision(device, dtype):
    # Half-precision inputs, float32 accumulation: the float64 reference on
    # the same (rounded) inputs, up to the rounding of the results.
    pattern, inputs = make_case(
        'square', device, dtype=dtype, x_channels=8, h_channels=8
    )
    inputs['temperature'] = inputs['temperature'].float()  # a float32 param
    out, grads = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    assert out.dtype == dtype
    for name in NAMES:
        if grads[name] is not None:
            assert grads[name].dtype == inputs[name].dtype, name
    wide = {
        name: value.double() if name in NAMES and value is not None else value
        for name, value in inputs.items()
    }
    expected_out, expected = outputs_and_grads(dense_reference, pattern, wide)
    unit = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    torch.testing.assert_close(
        out.double(), expected_out, rtol=2 * unit, atol=2 * unit
    )
    for name in NAMES:
        if grads[name] is not None:
            # Rounding of the result (and of float32 sums of large terms).
            scale = float(expected[name].abs().max())
            torch.testing.assert_close(
                grads[name].double(),
                expected[name],
                rtol=2 * unit,
                atol=2 * unit * scale,
                msg=lambda m, name=name: f'gradient of {name}: {m}',
            )


def test_mixed_dtypes(device):
    # As under autocast: x in float32, the projections in bfloat16.
    pattern, inputs = make_case('bipartite', device, dtype=torch.float32)
    inputs['h_dst'] = inputs['h_dst'].bfloat16()
    inputs['h_src'] = inputs['h_src'].bfloat16()
    out, grads = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    assert out.dtype == grads['x'].dtype == torch.float32
    assert grads['h_dst'].dtype == grads['h_src'].dtype == torch.bfloat16
    wide = {
        name: value.double() if name in NAMES and value is not None else value
        for name, value in inputs.items()
    }
    torch.testing.assert_close(
        out.double(), dense_reference(pattern, **wide), rtol=1e-5, atol=1e-6
    )


def test_non_contiguous_inputs(device):
    # Column-major features, a strided weight vector, an expanded output
    # gradient: read and written as the kernels' row-major layout needs.
    pattern, inputs = make_case('bipartite', device)
    inputs['x'] = inputs['x'].t().contiguous().t()
    inputs['h_src'] = inputs['h_src'].t().contiguous().t()
    inputs['log_weight'] = inputs['log_weight'].repeat_interleave(2)[::2]
    assert not inputs['x'].is_contiguous()
    assert not inputs['log_weight'].is_contiguous()
    # The self-loops' log weight strided, then a scalar expanded (stride 0,
    # as APNetConv passes a learned one): its gradient sums the rows'.
    inputs['loop_log_weight'] = inputs['loop_log_weight'].repeat(2)[::2]
    assert inputs['loop_log_weight'].stride() == (2,)
    grad_out = torch.ones(1, 1, dtype=torch.float64, device=device).expand(
        4, 5
    )
    actual = outputs_and_grads(
        triton_attention_propagate, pattern, inputs, grad_out=grad_out
    )
    expected = outputs_and_grads(
        dense_reference, pattern, inputs, grad_out=grad_out
    )
    assert_close_all(actual, expected, rtol=1e-9, atol=1e-11)

    scalar = torch.tensor(0.3, dtype=torch.float64, device=device)
    grads = []
    for function in (triton_attention_propagate, dense_reference):
        bias = scalar.clone().requires_grad_()
        loop_log_weight = bias.expand(4)
        assert loop_log_weight.stride() == (0,)
        out = function(
            pattern, **dict(inputs, loop_log_weight=loop_log_weight)
        )
        grads.append(torch.autograd.grad(out, bias, grad_out)[0])
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize('name', ['square', 'symmetric'])
def test_deterministic(device, name):
    # No atomics: the same inputs give bitwise the same gradients.
    pattern, inputs = make_case(
        name, device, dtype=torch.float32, x_channels=3, h_channels=5
    )
    first = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    second = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    assert torch.equal(first[0], second[0])
    for name in NAMES:
        if first[1][name] is not None:
            assert torch.equal(first[1][name], second[1][name]), name


@pytest.mark.parametrize('dropout', [0.0, 0.5])
def test_double_backward(device, dropout):
    # A second derivative differentiates the composed kernels (with the
    # kernels' own dropout draws).
    pattern, inputs = make_case('square', device, weights=False)
    fused, reference = triton_attention_propagate, dense_reference
    if dropout:
        seed = torch.tensor([5], device=device)
        drop = dict(dropout=dropout, dropout_seed=seed)
        fused = functools.partial(triton_attention_propagate, **drop)
        reference = functools.partial(composed_attention_propagate, **drop)
    results = []
    for function in (fused, reference):
        x = inputs['x'].detach().clone().requires_grad_()
        h = inputs['h_dst'].detach().clone().requires_grad_()
        out = function(
            pattern,
            x,
            h,
            None,
            inputs['temperature'],
            loop_kept=inputs['loop_kept'],
        )
        (grad_h,) = torch.autograd.grad(out.sum(), h, create_graph=True)
        results.append(torch.autograd.grad(grad_h.square().sum(), [x, h]))
    for actual, expected in zip(*results):
        torch.testing.assert_close(actual, expected, rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------------------
# Attention dropout
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    'name,loops,channels',
    [
        ('square', True, (5, 3)),
        ('square', False, (5, 3)),
        ('bipartite', True, (5, 3)),
        ('wide', False, (5, 3)),
        # F <= H: the one-pass symmetric backward; F > H: columns and rows.
        ('symmetric', True, (3, 5)),
        ('symmetric', True, (5, 3)),
    ],
)
def test_dropout_matches_composed_kernels(device, name, loops, channels):
    # The kernels draw each entry's and self-loop's factor from the seed
    # (forward and backward the same draws): equal to the sparse kernels
    # given those factors (dropout_scales), every gradient.
    pattern, inputs = make_case(
        name,
        device,
        loops=loops,
        x_channels=channels[0],
        h_channels=channels[1],
    )
    seed = torch.tensor([11], device=device)
    scales = tp.dropout_scales(
        seed, 0.5, pattern.nnz + pattern.size[0], torch.float64
    )
    assert set(scales.tolist()) == {0.0, 2.0}
    dropout = dict(dropout=0.5, dropout_seed=seed)
    actual = outputs_and_grads(
        functools.partial(triton_attention_propagate, **dropout),
        pattern,
        inputs,
    )
    expected = outputs_and_grads(
        functools.partial(composed_attention_propagate, **dropout),
        pattern,
        inputs,
    )
    assert_close_all(actual, expected, rtol=1e-9, atol=1e-11)
    plain = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    assert not torch.allclose(actual[0], plain[0])


def test_dropout_draws(device):
    # From torch's generator when no seed is given (manual_seed fixes
    # them); about the probability dropped; none at 0, all at 1.
    pattern, inputs = make_case('square', device)
    torch.manual_seed(0)
    first = triton_attention_propagate(pattern, **inputs, dropout=0.3)
    torch.manual_seed(0)
    again = triton_attention_propagate(pattern, **inputs, dropout=0.3)
    other = triton_attention_propagate(pattern, **inputs, dropout=0.3)
    assert torch.equal(first, again) and not torch.equal(first, other)
    seed = tp.draw_dropout_seed(device)
    assert seed.dtype == torch.int64 and seed.shape == (1,)
    drawn = tp.dropout_scales(seed, 0.3, 20_000, torch.float32)
    assert abs(float((drawn == 0).float().mean()) - 0.3) < 0.02
    assert torch.equal(
        drawn[drawn != 0], torch.full_like(drawn, 1 / 0.7)[drawn != 0]
    )
    none = triton_attention_propagate(pattern, **inputs, dropout=0.0)
    assert torch.equal(none, triton_attention_propagate(pattern, **inputs))
    everything = triton_attention_propagate(pattern, **inputs, dropout=1.0)
    assert torch.equal(everything, torch.zeros_like(everything))


# ---------------------------------------------------------------------------
# The operators torch.compile sees
# ---------------------------------------------------------------------------
def test_custom_operators(device):
    pattern, inputs = make_case('square', device, dtype=torch.float32)
    x, h = inputs['x'], inputs['h_dst']
    gamma, lw, kept, loop_lw = (
        inputs['temperature'],
        inputs['log_weight'],
        inputs['loop_kept'],
        inputs['loop_log_weight'],
    )
    forward_args = (x, h, None, gamma, lw, kept, loop_lw)
    no_dropout = (None, 0.0)
    out, lse, out_acc = torch.ops.apnet_pyg.triton_propagate(
        *forward_args, pattern.rowptr, pattern.col, *no_dropout
    )
    assert lse.dtype == torch.float32 and lse.shape == (7,)
    assert out_acc.shape == (0,)  # float32 x: the output is in float32
    seed = torch.tensor([7], device=device)
    for dropout in (no_dropout, (seed, 0.5)):
        torch.library.opcheck(
            torch.ops.apnet_pyg.triton_propagate,
            (*forward_args, pattern.rowptr, pattern.col, *dropout),
        )
    half = torch.ops.apnet_pyg.triton_propagate(
        x.bfloat16(), *forward_args[1:], pattern.rowptr, pattern.col, None, 0.0
    )
    assert half[0].dtype == torch.bfloat16
    assert half[2].dtype == torch.float32 and half[2].shape == out.shape
    backward_args = (
        torch.randn_like(out),
        out,
        lse,
        *forward_args,
        pattern.rowptr,
        pattern.col,
        pattern.rowptr_t,
        pattern.col_t,
        pattern.perm_t,
    )
    for needs_grad, dropout in (
        ([True] * 6, no_dropout),
        ([True] * 6, (seed, 0.5)),
        ([False, True, False, False, True, False], no_dropout),
        ([True, False, False, False, False, True], no_dropout),
    ):
        torch.library.opcheck(
            torch.ops.apnet_pyg.triton_propagate_backward,
            (*backward_args, *dropout, needs_grad),
        )


def test_meta_tensors():
    # Shape inference on meta tensors takes the fake implementation.
    if not tp.is_triton_available():
        pytest.skip('Triton is not installed (pip install triton==3.6.0)')
    pattern, inputs = make_case('bipartite', 'meta', dtype=torch.bfloat16)
    out = triton_attention_propagate(pattern, **inputs)
    assert out.device.type == 'meta' and out.shape == (4, 5)
    assert out.dtype == torch.bfloat16


@pytest.mark.parametrize('dropout', [0.0, 0.5])
def test_compile_fullgraph(device, dropout):
    # One opaque operator each way, no graph break; the fake
    # implementations under AOT autograd; attention dropout's seed drawn
    # inside the compiled function (the same draws as eager for a seed).
    pattern, inputs = make_case('bipartite', device, dtype=torch.float32)
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return lookup_backend('aot_eager')(graph_module, example_inputs)

    def function(pattern, **kwargs):
        return triton_attention_propagate(pattern, **kwargs, dropout=dropout)

    torch._dynamo.reset()
    compiled = torch.compile(function, backend=backend, fullgraph=True)
    torch.manual_seed(0)
    actual = outputs_and_grads(compiled, pattern, inputs)
    torch.manual_seed(0)
    expected = outputs_and_grads(function, pattern, inputs)
    assert_close_all(actual, expected, rtol=0.0, atol=0.0)
    assert len(graphs) == 1
    # The autograd function's forward and backward bodies are subgraphs.
    code = ''.join(
        module.code
        for module in graphs[0].modules()
        if isinstance(module, torch.fx.GraphModule)
    )
    assert code.count('apnet_pyg.triton_propagate.default') == 1
    assert code.count('apnet_pyg.triton_propagate_backward.default') == 1
    torch._dynamo.reset()


# ---------------------------------------------------------------------------
# The kernels as a GPU compiles them (no GPU needed)
# ---------------------------------------------------------------------------
_TRITON_TYPES = {
    torch.float16: 'fp16',
    torch.bfloat16: 'bf16',
    torch.float32: 'fp32',
    torch.float64: 'fp64',
}
KERNELS = [
    'forward_kernel',
    'output_dot_kernel',
    'column_backward_kernel',
    'row_backward_kernel',
    'symmetric_backward_kernel',
    'dropout_scale_kernel',
]


def compile_for_sm90(name, dtype, flags, num_warps=4, block_e=16):
    r"""Kernel :obj:`name` compiled for sm_90 (Triton's own LLVM and
    ptxas, no GPU) as a launch on row-major tensors specialises it: every
    pointer and the widths (64 and 256) divisible by 16."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from apnet_pyg.nn.triton_propagation import launch

    kernel = getattr(launch.kernels, name)
    # An autotuned kernel's JIT function is inside its autotuner.
    function = kernel.fn if hasattr(kernel, 'configs') else kernel
    data = '*' + _TRITON_TYPES[dtype]
    acc = '*fp64' if dtype == torch.float64 else '*fp32'
    index = ('rowptr_ptr', 'col_ptr', 'rowptr_t_ptr', 'col_t_ptr')
    accumulated = (
        'gamma_ptr',
        'lse_ptr',
        'delta_ptr',
        'grad_z_ptr',
        'grad_loop_ptr',
        'gamma_part_ptr',
        'out_acc_ptr',
        'partial_ptr',
    )
    if name == 'dropout_scale_kernel':
        accumulated += ('out_ptr',)
    signature, constants, attrs = {}, {}, {}
    for position, arg in enumerate(function.arg_names):
        if arg.endswith('_ptr'):
            if arg in index or arg == 'perm_t_ptr':
                signature[arg] = '*i32'
            elif arg == 'loop_ptr':
                signature[arg] = '*u8'
            elif arg == 'seed_ptr':
                signature[arg] = '*i64'
            else:
                signature[arg] = acc if arg in accumulated else data
            attrs[(position,)] = [['tt.divisibility', 16]]
        elif arg in ('p', 'keep_scale'):  # Attention dropout's.
            signature[arg] = 'fp32'
        elif arg.startswith('num_') or arg in (
            'degree',
            'loop_weight_stride',
            'nnz',
            'count',
        ):
            signature[arg] = 'i32'
            if arg in ('num_x', 'num_h'):
                attrs[(position,)] = [['tt.divisibility', 16]]
        else:
            signature[arg] = 'constexpr'
            constants[arg] = flags
    constants.update(
        BLOCK_E=block_e,
        BLOCK=1024,
        BLOCK_R=16,
        BLOCK_X=64,
        BLOCK_H=256,
        EPS=NORM_EPS,
        ACC=tl.float64 if dtype == torch.float64 else tl.float32,
    )
    constants = {k: v for k, v in constants.items() if k in signature}
    return triton.compile(
        ASTSource(function, signature, constexprs=constants, attrs=attrs),
        target=GPUTarget('cuda', 90, 32),
        options=dict(num_warps=num_warps, num_stages=1),
    )


@requires_triton
@pytest.mark.skipif(
    tp.is_triton_available() and tp.interpreting(),
    reason='Triton was imported with TRITON_INTERPRET=1: '
    'it cannot compile in this process',
)
@pytest.mark.parametrize('kernel', KERNELS)
@pytest.mark.parametrize(
    'dtype,flags',
    [(torch.bfloat16, True), (torch.float32, True), (torch.float64, False)],
)
def test_kernels_compile_for_sm90(kernel, dtype, flags):
    # The interpreter runs Python and forgives what the compiler does not
    # (types changing in a loop, scalars of the wrong dtype): every kernel
    # compiled to a cubin for sm_90. Its gathers of whole rows are 16-byte
    # loads (ld.global.v4: 4 floats, 8 bfloat16): a scalar load a thread
    # would issue four to eight times the instructions for the same bytes.
    compiled = compile_for_sm90(kernel, dtype, flags)
    assert compiled.asm['cubin']
    gathers = kernel != 'dropout_scale_kernel'
    if gathers and flags and dtype != torch.float64:
        assert 'ld.global.v4' in compiled.asm['ptx'] or (
            'ld.global.nc.v4' in compiled.asm['ptx']
        )


# ---------------------------------------------------------------------------
# Bad input, availability, launch configuration, the bandwidth floor
# ---------------------------------------------------------------------------
@requires_triton
def test_bad_input():
    pattern, inputs = make_case('bipartite', 'cpu', dtype=torch.float32)

    def call(**changes):
        triton_attention_propagate(pattern, **dict(inputs, **changes))

    x, h_dst, h_src = inputs['x'], inputs['h_dst'], inputs['h_src']
    for changes, message in [
        (
            dict(x=x[:-1]),
            r"'x' must have 6 rows for a pattern of size "
            r'\(4, 6\)',
        ),
        (dict(h_dst=h_src), r"'h_dst' must have 4 rows"),
        (dict(dropout=1.5), r"'dropout' must lie in \[0, 1\]"),
        (
            dict(dropout=0.5, dropout_seed=torch.tensor([1.0])),
            r"'dropout_seed' must be an int64 tensor of shape \[1\]",
        ),
        (
            dict(h_src=None),
            r'h_src=None \(h_src = h_dst\) needs a square '
            r'pattern',
        ),
        (
            dict(h_src=h_src[:, :2]),
            r"'h_src' and 'h_dst' must have the "
            r'same number of features \(got 2 and 3\)',
        ),
        (dict(x=x.long()), r"'x' must be a floating-point tensor"),
        (dict(x=x[0]), r"'x' must have 2 dimensions"),
        (
            dict(log_weight=inputs['log_weight'][:-1]),
            r"'log_weight' must "
            r'have 9 rows',
        ),
        (
            dict(loop_kept=inputs['loop_kept'].float()),
            r"'loop_kept' must be "
            r'a boolean tensor with one entry per destination row, \[4\]',
        ),
        (
            dict(temperature=torch.ones(2)),
            r"'temperature' must be a float "
            r'or a floating-point tensor of one element',
        ),
        (
            dict(x=x.new_zeros(6, MAX_FEATURES + 1)),
            r"'x' has 4097 features, "
            r"more than the Triton kernel's 4096",
        ),
        (
            dict(loop_log_weight=torch.zeros(3)),
            r"'loop_log_weight' must have one entry per destination row, "
            r'\[4\] \(got shape \(3,\)\): expand a scalar with '
            r'\.expand\(4\)',
        ),
        (
            dict(loop_log_weight=torch.zeros(4, 1)),
            r"'loop_log_weight' must have 1 dimensions",
        ),
        (
            dict(loop_log_weight=torch.zeros(4, dtype=torch.long)),
            r"'loop_log_weight' must be a floating-point tensor",
        ),
        (
            dict(loop_log_weight=torch.zeros(4, device='meta')),
            r"'loop_log_weight' is on meta but 'x' on cpu",
        ),
        (
            dict(loop_kept=None),
            r"'loop_log_weight' is the log weight of the self-loops, which "
            r"'loop_kept' names: pass 'loop_kept' too",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            call(**changes)
    with pytest.raises(
        ValueError,
        match=r"'edge_index' is transposed "
        r'CSRArrays',
    ):
        triton_attention_propagate(pattern.t(), h_src, h_src, h_dst, 1.0)
    with pytest.raises(
        ValueError,
        match=r"'edge_index' must be an "
        r'EdgeIndex sorted by row',
    ):
        triton_attention_propagate((pattern.rowptr,), x, h_dst, h_src, 1.0)
    wide_pattern, wide = make_case('wide', 'cpu', dtype=torch.float32)
    with pytest.raises(
        ValueError,
        match=r"'loop_kept' needs a pattern with "
        r'no more rows than columns',
    ):
        triton_attention_propagate(
            wide_pattern,
            **dict(wide, loop_kept=torch.ones(5, dtype=torch.bool)),
        )

    if tp.interpreting():  # Set when Triton was imported: CPU runs.
        return
    with pytest.raises(
        ValueError,
        match=r'The Triton kernel runs on CUDA '
        r'tensors \(got CPU tensors\).*TRITON_INTERPRET=1',
    ):
        call()


def test_without_triton():
    # Triton is optional: without it the package imports, says so, and the
    # kernel names what is missing (a subprocess: Triton blocked before
    # anything imports it).
    script = (
        'import sys; sys.modules["triton"] = None\n'
        'import torch\n'
        'from apnet_pyg.nn import APNetConv\n'
        'from apnet_pyg.nn import triton_propagation as tp\n'
        'assert not tp.is_triton_available()\n'
        'assert not tp.interpreting()\n'
        'from apnet_pyg.nn.functional import edge_index_arrays\n'
        'pattern, _ = edge_index_arrays(torch.tensor([[0], [1]]), (2, 2))\n'
        'try:\n'
        '    tp.triton_attention_propagate(\n'
        '        pattern, torch.ones(2, 3), torch.ones(2, 3), None, 1.0)\n'
        'except RuntimeError as error:\n'
        '    print(error)\n'
    )
    result = subprocess.run(
        [sys.executable, '-c', script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        'triton_attention_propagate needs Triton, which is not installed'
    )


@requires_triton
def test_launch_configuration():
    from apnet_pyg.nn.triton_propagation import launch

    # Feature tiles: the next power of two, at least 16.
    assert [launch.feature_block(n) for n in (1, 16, 17, 64, 300)] == [
        16,
        16,
        32,
        64,
        512,
    ]
    # The mean degree's power of two, 1 to 64 (WordNet: 250,969 entries
    # with the self-loops over 82,115 rows; 1M nodes of degree 10 + 1).
    assert launch.degree_bucket(250_969, 82_115) == 4
    assert launch.degree_bucket(11_000_000, 1_000_000) == 16
    assert launch.degree_bucket(0, 0) == 1
    assert launch.degree_bucket(10**9, 10) == 64
    # Fixed configurations: 4 to 16 entries a block, ~16 elements a thread.
    assert launch.fixed_config(256, 16) == dict(
        BLOCK_E=16, num_warps=8, num_stages=1
    )
    assert launch.fixed_config(64, 1) == dict(
        BLOCK_E=4, num_warps=1, num_stages=1
    )
    # The zero-shot pipeline's 2048-wide x: 4 entries, 8 warps (32 a
    # thread); 4096 features: 2.
    assert launch.fixed_config(2048, 16) == dict(
        BLOCK_E=4, num_warps=8, num_stages=1
    )
    assert launch.fixed_config(4096, 16)['BLOCK_E'] == 2


@requires_triton
@pytest.mark.skipif(
    tp.is_triton_available() and tp.interpreting(),
    reason='the interpreter has one configuration',
)
def test_autotune_candidates():
    # Per key, the candidates left after pruning: BLOCK_E the mean degree's
    # power of two, half or twice it (4 to 32), and 16 to 32 elements a
    # thread of the widest tile; a handful, so that tuning stays cheap.
    from apnet_pyg.nn.triton_propagation import launch

    kernels = launch.kernels
    prune = kernels.PRUNE['early_config_prune']

    def candidates(degree, block_x, block_h):
        return {
            (c.kwargs['BLOCK_E'], c.num_warps)
            for c in prune(
                kernels.CONFIGS,
                {'degree': degree},
                BLOCK_X=block_x,
                BLOCK_H=block_h,
            )
        }

    # 1M x 10, F = 64 or 256 with H = 256: tiles of 8 to 32 entries.
    assert candidates(16, 64, 256) == {
        (8, 2),
        (8, 4),
        (16, 4),
        (16, 8),
        (32, 8),
    }
    # WordNet (degree 4 with the self-loops), F = 64, H = 256.
    assert candidates(4, 64, 256) == {(4, 1), (4, 2), (8, 2), (8, 4)}
    # The zero-shot pipeline's 2048-wide rows: 4 entries a block; the
    # widest rows, 4096 features: 2 (32 elements a thread either way).
    assert candidates(4, 2048, 256) == {(4, 8)}
    assert candidates(4, 4096, 256) == {(2, 8)}
    assert kernels.KEY == ['num_x', 'num_h', 'degree']
    assert all(c.num_stages == 1 for c in kernels.CONFIGS)


def test_floor_bytes():
    # WordNet-sized, float32, int32 indices, h = x (F = H = 64), no weights:
    # entries read their index and two source rows, 82,116 row pointers,
    # the 82,115 destination rows of h read and of the output written.
    nodes, entries = 82115, 168854
    forward = propagation_floor_bytes(nodes, nodes, entries, 64, 64)
    assert (
        forward == entries * (4 + 128 * 4) + (nodes + 1) * 4 + nodes * 128 * 4
    )
    # Backward: the entries again, dL/do and h read, dL/dx and dL/dh
    # written.
    both = propagation_floor_bytes(
        nodes, nodes, entries, 64, 64, backward=True
    )
    assert both == 2 * forward + nodes * 128 * 4
    # Bipartite, bfloat16, weights, self-loops, int64 indices.
    # Each pass: entries (index, weight, rows), pointers, self-loops; the
    # node rows: h_dst read and the output written, then dL/do and h_dst
    # read, dL/dx, dL/dh_src, dL/dh_dst and the weights' gradient written.
    assert (
        propagation_floor_bytes(
            3,
            5,
            7,
            8,
            4,
            dtype=torch.bfloat16,
            index_dtype=torch.long,
            same_h=False,
            weights=True,
            loops=True,
            backward=True,
        )
        == 2 * (7 * (8 + 2 + 12 * 2) + 4 * 8 + 3 * (1 + 8 * 2))
        + (3 * 12 + 3 * 12 + 5 * 12 + 3 * 4 + 7) * 2
    )


def test_kernel_bytes():
    # Per entry (the difference of two entry counts), float32, int32
    # indices: the forward pass gathers F + H floats and one index; the
    # backward pass's column pass H + F floats, two indices (col_t,
    # perm_t), lse_i, D_i and dL/dz_ij; the row pass H floats, an index and
    # dL/dz_ij; the symmetric pass H + 2F floats, two indices, lse_i, D_i.
    F, H = 64, 256

    def per_entry(**kwargs):
        one, two = (
            propagation_kernel_bytes(10, 10, E, F, H, backward=True, **kwargs)
            for E in (1000, 2000)
        )
        return {name: (two[name] - one[name]) // 1000 for name in one}

    general = per_entry()
    assert general == {
        'forward': 4 + (F + H) * 4,
        'output_dot': 0,
        'columns': 2 * 4 + (H + F) * 4 + 3 * 4,
        'rows': 4 + 4 + H * 4,
    }
    assert per_entry(symmetric=True) == {
        'forward': 4 + (F + H) * 4,
        'output_dot': 0,
        'symmetric': 2 * 4 + (H + 2 * F) * 4 + 2 * 4,
    }
    # The backward pass gathers 2H + F floats an entry (the old row and
    # column passes: 2H + 2F), or H + 2F on a symmetric pattern.
    assert sum(general.values()) < 3 * (F + H) * 4
    # F > H: the symmetric pass would gather more; the general one runs.
    assert 'symmetric' not in propagation_kernel_bytes(
        10, 10, 10, 512, 256, backward=True, symmetric=True
    )
    # Forward alone; bfloat16 stores the output in float32 too.
    forward = propagation_kernel_bytes(10, 10, 0, F, H)
    assert list(forward) == ['forward']
    half = propagation_kernel_bytes(10, 10, 0, F, H, dtype=torch.bfloat16)
    assert half['forward'] == 11 * 4 + 10 * (H + F) * 2 + 10 * F * 4 + 40


# ---------------------------------------------------------------------------
# CUDA only: autotuning, CUDA graphs, torch.compile's reduce-overhead
# ---------------------------------------------------------------------------
def cuda_only(function):
    r"""The CUDA tier's marks: skipped without CUDA, or where Triton runs
    interpreted."""
    for mark in (
        pytest.mark.cuda,
        pytest.mark.skipif(
            not torch.cuda.is_available(), reason='CUDA not available'
        ),
        pytest.mark.skipif(
            not tp.is_triton_available() or tp.interpreting(),
            reason='needs Triton compiling (not interpreting)',
        ),
    ):
        function = mark(function)
    return function


def random_symmetric_pattern(num_nodes, degree, device, seed=0):
    r"""The CSR arrays of a random undirected graph (both directions)."""
    generator = torch.Generator().manual_seed(seed)
    pairs = num_nodes * degree // 2
    source = torch.randint(num_nodes, (pairs,), generator=generator)
    target = torch.randint(num_nodes, (pairs,), generator=generator)
    keep = source != target
    source, target = source[keep], target[keep]
    edges = torch.stack(
        [torch.cat([source, target]), torch.cat([target, source])]
    )
    return edge_index_arrays(edges.to(device), (num_nodes, num_nodes))[0]


def static_inputs(pattern, x_channels, h_channels, device, seed=0):
    generator = torch.Generator(device).manual_seed(seed)
    num_nodes = pattern.size[0]
    return dict(
        x=torch.randn(
            num_nodes, x_channels, device=device, generator=generator
        ),
        h_dst=torch.randn(
            num_nodes, h_channels, device=device, generator=generator
        ),
        h_src=None,
        temperature=torch.tensor(3.0, device=device),
        log_weight=None,
        loop_kept=torch.rand(num_nodes, device=device, generator=generator)
        > 0.5,
        loop_log_weight=torch.tensor(0.5, device=device).expand(num_nodes),
    )


@cuda_only
@pytest.mark.parametrize('symmetric', [True, False])
def test_autotuned_launches_on_cuda(symmetric):
    from apnet_pyg.nn.triton_propagation import launch

    device = torch.device('cuda', torch.cuda.current_device())
    pattern = random_symmetric_pattern(20_000, 8, device)
    assert pattern.nnz >= launch.TUNE_MIN_ENTRIES
    inputs = static_inputs(pattern, 32, 64, device)
    if not symmetric:  # The same graph, bipartite: columns and rows.
        inputs['h_src'] = inputs['h_dst'].clone()
    actual = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    expected = outputs_and_grads(composed_attention_propagate, pattern, inputs)
    assert_close_all(actual, expected, rtol=1e-4, atol=1e-5)
    kernels = {row['kernel'] for row in tp.tuned_configs()}
    assert 'forward_kernel' in kernels
    assert (
        'symmetric_backward_kernel' in kernels
        if symmetric
        else {'column_backward_kernel', 'row_backward_kernel'} <= kernels
    )
    # Deterministic algorithms: the fixed configuration, bitwise repeatable.
    torch.use_deterministic_algorithms(True)
    try:
        first = outputs_and_grads(triton_attention_propagate, pattern, inputs)
        second = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    finally:
        torch.use_deterministic_algorithms(False)
    assert_close_all(first, second, rtol=0.0, atol=0.0)
    assert_close_all(first, expected, rtol=1e-4, atol=1e-5)


def _cuda_graph_step(pattern, inputs, grad_out):
    x = inputs['x']
    h = inputs['h_dst']
    out = triton_attention_propagate(
        pattern,
        x,
        h,
        None,
        inputs['temperature'],
        loop_kept=inputs['loop_kept'],
        loop_log_weight=inputs['loop_log_weight'],
    )
    return (out, *torch.autograd.grad(out, (x, h), grad_out))


@cuda_only
def test_cuda_graph_capture_of_a_static_graph():
    # A static graph: the pattern built once and reused; forward and
    # backward captured in one CUDA graph after eager warm-up steps (which
    # autotune and compare the pattern with its transpose), then replayed
    # on new features copied into the captured inputs.
    device = torch.device('cuda', torch.cuda.current_device())
    pattern = random_symmetric_pattern(20_000, 8, device)
    inputs = static_inputs(pattern, 32, 64, device)
    inputs['x'].requires_grad_()
    inputs['h_dst'].requires_grad_()
    grad_out = torch.randn_like(inputs['x'])
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            _cuda_graph_step(pattern, inputs, grad_out)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_results = _cuda_graph_step(pattern, inputs, grad_out)
    for seed in (1, 2):
        generator = torch.Generator(device).manual_seed(seed)
        with torch.no_grad():
            for name in ('x', 'h_dst'):
                inputs[name].copy_(
                    torch.randn(
                        inputs[name].shape, device=device, generator=generator
                    )
                )
        graph.replay()
        expected = _cuda_graph_step(pattern, inputs, grad_out)
        for actual, wanted in zip(static_results, expected):
            torch.testing.assert_close(actual, wanted, rtol=0.0, atol=0.0)


@cuda_only
def test_cuda_graph_replays_draw_new_dropout():
    # The dropout seed is drawn on the device from torch's CUDA generator,
    # which is graph-safe: each replay of a captured forward draws anew.
    device = torch.device('cuda', torch.cuda.current_device())
    pattern = random_symmetric_pattern(2_000, 8, device)
    inputs = static_inputs(pattern, 32, 64, device)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            triton_attention_propagate(pattern, **inputs, dropout=0.5)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = triton_attention_propagate(pattern, **inputs, dropout=0.5)
    replays = []
    for _ in range(2):
        graph.replay()
        replays.append(out.clone())
    assert not torch.equal(replays[0], replays[1])
    plain = triton_attention_propagate(pattern, **inputs)
    mean = (replays[0] + replays[1]) / 2
    assert (mean - plain).abs().mean() < (replays[0] - plain).abs().mean()


class _Layer(torch.nn.Module):
    r"""A projection and the propagation over a fixed pattern."""

    def __init__(self, pattern, channels):
        super().__init__()
        self.pattern = pattern
        self.lin = torch.nn.Linear(channels, 2 * channels)

    def forward(self, x, loop_kept):
        return triton_attention_propagate(
            self.pattern, x, self.lin(x), None, 3.0, loop_kept=loop_kept
        )


@cuda_only
def test_compile_reduce_overhead():
    # torch.compile's CUDA graphs (mode='reduce-overhead') over the custom
    # operators, no graph break: the same values and gradients as eager.
    device = torch.device('cuda', torch.cuda.current_device())
    pattern = random_symmetric_pattern(5_000, 8, device)
    layer = _Layer(pattern, 16).to(device)
    x = torch.randn(5_000, 16, device=device)
    loop_kept = torch.ones(5_000, dtype=torch.bool, device=device)
    torch._dynamo.reset()
    compiled = torch.compile(layer, mode='reduce-overhead', fullgraph=True)
    for _ in range(4):  # Warm-up, recording, replays.
        leaf = x.clone().requires_grad_()
        out = compiled(leaf, loop_kept)
        (grad,) = torch.autograd.grad(out.square().sum(), leaf)
        out, grad = out.clone(), grad.clone()
    leaf = x.clone().requires_grad_()
    expected = layer(leaf, loop_kept)
    (expected_grad,) = torch.autograd.grad(expected.square().sum(), leaf)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()


@cuda_only
@pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason='needs two CUDA devices'
)
def test_tensors_on_a_second_gpu():
    # Triton launches on the current device: tensors on cuda:1 under a
    # current cuda:0 still run there, and give the values of cuda:0.
    results = []
    for index in (0, 1):
        device = torch.device('cuda', index)
        pattern, inputs = make_case('symmetric', device, dtype=torch.float32)
        with torch.cuda.device(0):
            results.append(
                outputs_and_grads(triton_attention_propagate, pattern, inputs)
            )
    out, grads = results[1]
    assert out.device == torch.device('cuda', 1)
    assert_close_all(
        (
            out.cpu(),
            {k: v if v is None else v.cpu() for k, v in grads.items()},
        ),
        (
            results[0][0].cpu(),
            {k: v if v is None else v.cpu() for k, v in results[0][1].items()},
        ),
        rtol=0.0,
        atol=0.0,
    )
