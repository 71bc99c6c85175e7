r"""The fused Triton kernel of attention propagation
(:mod:`apnet_pyg.nn.triton_propagation`) against a dense float64
reference and the composed sparse kernels: forward, every gradient,
gradcheck, empty rows, isolated nodes, repeated edges, bipartite sizes,
weights, self-loops on and off, half precision. On CPU through Triton's
interpreter (TRITON_INTERPRET=1, set per test); the same tests run natively
on a CUDA device when there is one."""

import sys
from pathlib import Path

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
    propagation_floor_bytes,
    triton_attention_propagate,
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
def device(request, monkeypatch):
    if not tp.is_triton_available():
        pytest.skip('Triton is not installed (pip install triton==3.6.0)')
    if request.param == 'cpu':
        # Read at each call: CPU tensors run the kernels interpreted.
        monkeypatch.setenv('TRITON_INTERPRET', '1')
    elif tp.interpreting():
        pytest.skip(
            'Triton was imported with TRITON_INTERPRET=1: it runs '
            'interpreted in this process, also on CUDA tensors'
        )
    return torch.device(request.param)


# (destination, source) entries of small graphs, chosen for their
# corner cases. 'square': node 0 a hub (several blocks of entries, a
# repeated entry), node 1 with a self-loop entry of its own, node 2 a
# repeated entry, node 4 an empty row without a self-loop, node 6
# isolated (only its self-loop). 'bipartite': 4 destinations, 6 sources,
# row 3 empty. 'wide': more destinations than sources (no self-loops).
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
):
    r"""A graph of :data:`CASES` with random features: the pattern, the
    inputs of :func:`triton_attention_propagate` (as a dict) and the
    entries in pattern order."""
    spec = CASES[name]
    num_dst, num_src = spec['size']
    generator = torch.Generator().manual_seed(seed)
    entries = torch.tensor(spec['entries'], dtype=torch.long).view(-1, 2)
    pattern, perm = edge_index_arrays(
        entries.t().to(device), (num_dst, num_src)
    )
    bipartite = name != 'square'

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
    loop_kept = None
    if loops and spec['loop_kept'] is not None:
        loop_kept = torch.tensor(spec['loop_kept'], device=device)
    inputs = dict(
        x=x,
        h_dst=h_dst,
        h_src=h_src,
        temperature=torch.tensor(temperature, dtype=dtype, device=device),
        log_weight=log_weight,
        loop_kept=loop_kept,
    )
    return pattern, inputs


def dense_reference(
    pattern, x, h_dst, h_src, temperature, log_weight=None, loop_kept=None
):
    r"""The propagation from its equation, with dense :math:`M \times N`
    matrices: :math:`\alpha_{ij} \propto W_{ij} \exp(\gamma \cos_{ij})`,
    :math:`W_{ij}` the summed weights of the entries :math:`(i, j)`, and a
    self-loop as one more column (logit :math:`\gamma` times the
    self-cosine of :math:`\mathbf{h}^{dst}_i`, value :math:`\mathbf{x}_i`);
    rows without any term mapped to zero. Independent of the package's
    kernels."""
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
        loop_logit = torch.where(
            loop_kept, temperature * self_cos, float('-inf')
        )
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


NAMES = ('x', 'h_dst', 'h_src', 'temperature', 'log_weight')


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
    wanted = [leaves[name] for name in NAMES if leaves[name] is not None]
    grads = iter(torch.autograd.grad(out, wanted, grad_out))
    return out, {
        name: next(grads) if leaves[name] is not None else None
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
    'name,loops,weights',
    [
        ('square', True, True),
        ('square', False, False),
        ('square', True, False),
        ('bipartite', True, True),
        ('bipartite', False, True),
        ('wide', False, True),
    ],
)
def test_matches_dense_reference(device, name, loops, weights):
    pattern, inputs = make_case(name, device, loops=loops, weights=weights)
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
@pytest.mark.parametrize('name', ['square', 'bipartite'])
def test_matches_composed_kernels(device, name):
    pattern, inputs = make_case(name, device, dtype=torch.float32)
    actual = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    expected = outputs_and_grads(composed_attention_propagate, pattern, inputs)
    assert_close_all(actual, expected, rtol=1e-5, atol=1e-5)


def test_gradcheck(device):
    for name in ('square', 'bipartite'):
        pattern, inputs = make_case(name, device, x_channels=3, h_channels=2)
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


def test_deterministic(device):
    # No atomics: the same inputs give bitwise the same gradients.
    pattern, inputs = make_case('square', device, dtype=torch.float32)
    first = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    second = outputs_and_grads(triton_attention_propagate, pattern, inputs)
    assert torch.equal(first[0], second[0])
    for name in NAMES:
        if first[1][name] is not None:
            assert torch.equal(first[1][name], second[1][name]), name


def test_double_backward(device):
    # A second derivative differentiates the composed kernels.
    pattern, inputs = make_case('square', device, weights=False)
    results = []
    for function in (triton_attention_propagate, dense_reference):
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
# The operators torch.compile sees
# ---------------------------------------------------------------------------
def test_custom_operators(device):
    pattern, inputs = make_case('square', device, dtype=torch.float32)
    x, h = inputs['x'], inputs['h_dst']
    gamma, lw, kept = (
        inputs['temperature'],
        inputs['log_weight'],
        inputs['loop_kept'],
    )
    out, lse = torch.ops.apnet_pyg.triton_propagate(
        x, h, None, gamma, lw, kept, pattern.rowptr, pattern.col
    )
    assert lse.dtype == torch.float32 and lse.shape == (7,)
    torch.library.opcheck(
        torch.ops.apnet_pyg.triton_propagate,
        (x, h, None, gamma, lw, kept, pattern.rowptr, pattern.col),
    )
    backward_args = (
        torch.randn_like(out),
        lse,
        x,
        h,
        None,
        gamma,
        lw,
        kept,
        pattern.rowptr,
        pattern.col,
        pattern.rowptr_t,
        pattern.col_t,
        pattern.perm_t,
    )
    for needs_grad in ([True] * 5, [False, True, False, False, True]):
        torch.library.opcheck(
            torch.ops.apnet_pyg.triton_propagate_backward,
            (*backward_args, needs_grad),
        )


def test_meta_tensors():
    # Shape inference on meta tensors takes the fake implementation.
    if not tp.is_triton_available():
        pytest.skip('Triton is not installed (pip install triton==3.6.0)')
    pattern, inputs = make_case('bipartite', 'meta', dtype=torch.bfloat16)
    out = triton_attention_propagate(pattern, **inputs)
    assert out.device.type == 'meta' and out.shape == (4, 5)
    assert out.dtype == torch.bfloat16


def test_compile_fullgraph(device):
    # One opaque operator each way, no graph break; the fake
    # implementations under AOT autograd.
    pattern, inputs = make_case('bipartite', device, dtype=torch.float32)
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return lookup_backend('aot_eager')(graph_module, example_inputs)

    def function(pattern, **kwargs):
        return triton_attention_propagate(pattern, **kwargs)

    torch._dynamo.reset()
    compiled = torch.compile(function, backend=backend, fullgraph=True)
    actual = outputs_and_grads(compiled, pattern, inputs)
    expected = outputs_and_grads(triton_attention_propagate, pattern, inputs)
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


@requires_triton
@pytest.mark.skipif(
    tp.is_triton_available() and tp.interpreting(),
    reason='Triton was imported with TRITON_INTERPRET=1: '
    'it cannot compile in this process',
)
@pytest.mark.parametrize(
    'kernel',
    ['_forward_kernel', '_backward_row_kernel', '_backward_col_kernel'],
)
@pytest.mark.parametrize(
    'dtype,flags,same_h',
    [
        (torch.bfloat16, True, True),
        (torch.float16, True, False),
        (torch.float64, False, False),
    ],
)
def test_kernels_compile_for_sm90(kernel, dtype, flags, same_h):
    # The interpreter runs Python and forgives what the compiler does not
    # (types changing in a loop, scalars of the wrong dtype): compile each
    # kernel to a cubin for sm_90 (Triton's own LLVM and ptxas, no GPU).
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as error:  # pragma: no cover
        pytest.skip(f'Triton cannot compile here: {error}')
    import triton.language as tl

    function = tp._kernels(False)[kernel]
    data = '*' + _TRITON_TYPES[dtype]
    acc = '*fp64' if dtype == torch.float64 else '*fp32'
    pointers = {
        'gamma_ptr': '*fp32',
        'loop_ptr': '*u8',
        'lse_ptr': acc,
        'delta_ptr': acc,
        'grad_gamma_ptr': acc,
        'grad_h_partial_ptr': acc,
    }
    signature, constants = {}, {}
    for arg in function.arg_names:
        if arg.endswith('_ptr'):
            index = 'ptr_t' in arg or arg in ('rowptr_ptr', 'col_ptr')
            signature[arg] = '*i32' if index else pointers.get(arg, data)
        elif arg.startswith('num_'):
            signature[arg] = 'i32'
        else:
            signature[arg] = 'constexpr'
            constants[arg] = same_h if arg == 'SAME_H' else flags
    constants.update(
        BLOCK_E=4,
        BLOCK_X=64,
        BLOCK_H=32,
        EPS=NORM_EPS,
        ACC=tl.float64 if dtype == torch.float64 else tl.float32,
    )
    compiled = triton.compile(
        ASTSource(function, signature=signature, constexprs=constants),
        target=GPUTarget('cuda', 90, 32),
        options=dict(num_warps=2),
    )
    assert compiled.asm['cubin']


# ---------------------------------------------------------------------------
# Bad input, availability, launch configuration, the bandwidth floor
# ---------------------------------------------------------------------------
@requires_triton
def test_bad_input(monkeypatch):
    monkeypatch.setenv('TRITON_INTERPRET', '1')
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

    monkeypatch.delenv('TRITON_INTERPRET')
    if tp.interpreting():  # Set when Triton was imported: CPU runs.
        return
    with pytest.raises(
        ValueError,
        match=r'The Triton kernel runs on CUDA '
        r'tensors \(got CPU tensors\).*TRITON_INTERPRET=1',
    ):
        call()


def test_without_triton(monkeypatch):
    # Triton is optional: the module never imports it at import time, and
    # without it the kernel says what is missing.
    for path in Path(tp.__file__).parent.glob('*.py'):  # The package.
        source = path.read_text()
        assert '\nimport triton' not in source, path.name
        assert '\nfrom triton' not in source, path.name
    monkeypatch.setitem(sys.modules, 'triton', None)  # Blocks the import.
    tp.is_triton_available.cache_clear()
    try:
        assert not tp.is_triton_available()
        pattern, inputs = make_case('square', 'cpu', dtype=torch.float32)
        with pytest.raises(
            RuntimeError,
            match=r'triton_attention_propagate '
            r'needs Triton, which is not installed',
        ):
            triton_attention_propagate(pattern, **inputs)
    finally:
        tp.is_triton_available.cache_clear()


@requires_triton
def test_launch_configuration():
    # Tiles within budget, at least two entries a block, the mean degree.
    wordnet = tp._Config(82115, 168854, 64, 64)  # mean degree 2.06
    assert (wordnet.block_e, wordnet.block_x, wordnet.num_warps) == (4, 64, 1)
    random = tp._Config(10**6, 10**7, 64, 64)
    assert (random.block_e, random.num_warps) == (8, 2)
    zsl = tp._Config(50, 400, 2048, 256)
    assert (zsl.block_e, zsl.block_x, zsl.block_h, zsl.num_warps) == (
        2,
        2048,
        256,
        8,
    )
    tiny = tp._Config(3, 0, 3, 1)
    assert (tiny.block_e, tiny.block_x, tiny.block_h) == (2, 16, 16)


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
