import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck as _gradcheck
from torch.autograd import gradgradcheck as _gradgradcheck
from torch_geometric import EdgeIndex

from apnet_pyg.nn.functional import (
    NORM_EPS,
    CSRArrays,
    csr_arrays,
    edge_cosine,
    edge_index_arrays,
    sddmm,
    softmax_spmm,
    spmm,
)


def sparse_pattern(row, col, size):
    r"""The CSR arrays of the entries :obj:`(row[k], col[k])` of a matrix
    of :obj:`size`, and :obj:`perm` (entry :obj:`k` is input entry
    :obj:`perm[k]`)."""
    return edge_index_arrays(torch.stack([row, col]), size)


def _nondeterminism(inputs):
    # On CUDA the backward's sparse products sum in an order that changes
    # from call to call (cuSPARSE's and the scatters' atomic additions):
    # the same gradient to float64 rounding, not bit for bit (gradcheck
    # failed once in two H200 runs with the default tolerance of 0).
    on_cuda = any(t.is_cuda for t in inputs if isinstance(t, torch.Tensor))
    return 1e-12 if on_cuda else 0.0


def gradcheck(function, inputs):
    # fast_mode: a random projection of the Jacobian, not every entry.
    return _gradcheck(
        function, inputs, fast_mode=True, nondet_tol=_nondeterminism(inputs)
    )


def gradgradcheck(function, inputs):
    return _gradgradcheck(
        function, inputs, fast_mode=True, nondet_tol=_nondeterminism(inputs)
    )


def make_entries(
    num_rows=6, num_cols=5, nnz=14, seed=0, symmetric=False, device='cpu'
):
    generator = torch.Generator().manual_seed(seed)
    row = torch.randint(0, num_rows, (nnz,), generator=generator)
    col = torch.randint(0, num_cols, (nnz,), generator=generator)
    if symmetric:
        row, col = torch.cat([row, col]), torch.cat([col, row])
    return row.to(device), col.to(device)


def randn(*size, device, dtype=torch.float64, seed=None, generator=None):
    r"""Random values drawn on CPU (the same on every device), on
    :obj:`device`."""
    if generator is None:
        generator = torch.Generator().manual_seed(seed or 0)
    return torch.randn(*size, generator=generator, dtype=dtype).to(device)


def dense_of(pattern, values):
    out = values.new_zeros(pattern.size)
    return out.index_put_(
        (pattern.row.long(), pattern.col.long()), values, accumulate=True
    )


def test_sparse_pattern(device):
    row, col = make_entries(device=device)
    pattern, perm = sparse_pattern(row, col, (6, 5))
    assert isinstance(pattern, CSRArrays)
    assert str(pattern) == 'CSRArrays(size=(6, 5), nnz=14)'
    assert pattern.rowptr.dtype == torch.int32  # small enough for int32
    assert torch.equal(pattern.row.long(), row[perm])
    assert torch.equal(pattern.col.long(), col[perm])
    key = pattern.row * 5 + pattern.col
    assert bool((key[1:] >= key[:-1]).all())
    assert (
        pattern.rowptr.tolist()
        == [0] + torch.bincount(row, minlength=6).cumsum(0).tolist()
    )
    assert pattern.rowptr.device == device

    values = randn(14, device=device)
    transposed = pattern.t()
    assert transposed.size == (5, 6)
    assert transposed.t() == pattern
    assert torch.equal(
        dense_of(transposed, pattern.transpose_values(values)),
        dense_of(pattern, values).t(),
    )
    assert torch.equal(
        transposed.transpose_values(pattern.transpose_values(values)), values
    )


def test_sparse_pattern_sorted_inputs(device):
    # Inputs sorted by (row, col) or by (col, row) skip a sort (on CPU);
    # the arrays are the same as from shuffled entries.
    row, col = make_entries(6, 6, nnz=30, symmetric=True, device=device)
    expected, _ = sparse_pattern(row, col, (6, 6))
    ones = torch.ones(60, dtype=torch.float64, device=device)
    shuffled = torch.randperm(60, generator=torch.Generator().manual_seed(0))
    for order in [
        shuffled.to(device),
        torch.argsort(row * 6 + col),
        torch.argsort(col * 6 + row),
    ]:
        pattern, perm = sparse_pattern(row[order], col[order], (6, 6))
        for tensor, expected_tensor in zip(pattern[:6], expected[:6]):
            assert torch.equal(tensor, expected_tensor)
        assert torch.equal(dense_of(pattern, ones), dense_of(expected, ones))
        assert torch.equal(pattern.row.long(), row[order][perm])
        assert torch.equal(pattern.col.long(), col[order][perm])
        values = randn(60, device=device)
        # (Repeated entries may add up in another order.)
        assert torch.allclose(
            dense_of(pattern.t(), pattern.transpose_values(values)),
            dense_of(pattern, values).t(),
            atol=1e-12,
        )


def test_csr_arrays_of_an_edge_index(device):
    # The indices come from the EdgeIndex's cache, which they fill: a
    # second read gives the same memory; the pointers are rebuilt from the
    # sorted indices (a re-sorted EdgeIndex caches the wrong ones) and
    # equal the cache's. Sorted by either row, for either dim.
    row, col = make_entries(6, 5, nnz=20, device=device)
    values = randn(20, device=device)
    for sort_order in ('row', 'col'):
        edge_index, _ = EdgeIndex(
            torch.stack([row, col]), sparse_size=(6, 5)
        ).sort_by(sort_order)
        for dim in (0, 1):
            arrays, perm = csr_arrays(edge_index, dim)
            again, _ = csr_arrays(edge_index, dim)
            for name in ('col', 'col_t'):
                assert (
                    getattr(arrays, name).data_ptr()
                    == getattr(again, name).data_ptr()
                )
            get_rows, get_cols = edge_index.get_csr, edge_index.get_csc
            if dim == 1:
                get_rows, get_cols = get_cols, get_rows
            assert torch.equal(arrays.rowptr, get_rows()[0][0])
            assert torch.equal(arrays.rowptr_t, get_cols()[0][0])
            assert (perm is None) == (sort_order == ('row', 'col')[dim])
            perm = torch.arange(20, device=device) if perm is None else perm
            data = edge_index.as_tensor()
            assert torch.equal(arrays.row, data[dim][perm])
            assert torch.equal(arrays.col, data[1 - dim][perm])
            assert arrays.size == ((6, 5) if dim == 0 else (5, 6))
            expected = dense_of(arrays, values[perm])
            assert torch.allclose(
                dense_of(arrays.t(), arrays.transpose_values(values[perm])),
                expected.t(),
                atol=1e-12,
            )
        assert edge_index._T_perm is not None  # the caller's cache


def test_public_functions_take_a_row_sorted_edge_index(device):
    row, col = make_entries(6, 5, nnz=20, device=device)
    edge_index, perm = EdgeIndex(
        torch.stack([row, col]), sparse_size=(6, 5)
    ).sort_by('row')
    arrays, _ = csr_arrays(edge_index)
    generator = torch.Generator().manual_seed(0)
    values = randn(20, device=device, generator=generator)
    x = randn(5, 3, device=device, generator=generator)
    a = randn(6, 3, device=device, generator=generator)
    dense = values.new_zeros(6, 5).index_put_(
        (row[perm], col[perm]), values, accumulate=True
    )
    torch.testing.assert_close(spmm(edge_index, values, x), dense @ x)
    torch.testing.assert_close(
        sddmm(edge_index, a, x), (a @ x.t())[row[perm], col[perm]]
    )
    torch.testing.assert_close(
        edge_cosine(edge_index, a, x)[0], edge_cosine(arrays, a, x)[0]
    )
    for bad in (
        edge_index.as_tensor(),
        edge_index.sort_by('col')[0],
        EdgeIndex(edge_index.as_tensor(), sort_order='row'),
    ):
        with pytest.raises(ValueError, match="'edge_index'"):
            spmm(bad, values, x)


def test_sparse_pattern_symmetric_has_identical_transpose(device):
    # What the fused backward of edge_cosine relies on to use one SpMM
    # (the transpose is sorted stably: columns ascend within its rows).
    row, col = make_entries(5, 5, symmetric=True, device=device)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    assert torch.equal(pattern.rowptr, pattern.rowptr_t)
    assert torch.equal(pattern.col, pattern.col_t)
    row = torch.tensor([0, 1, 1, 2], device=device)
    col = torch.tensor([1, 0, 2, 2], device=device)
    pattern, _ = sparse_pattern(row, col, (3, 3))
    assert not torch.equal(pattern.col, pattern.col_t)


def test_symmetric_pattern_with_identical_transpose(device):
    # Where the arrays of the transpose equal the pattern's (a symmetric
    # pattern, columns ascending in both), the fused backward of
    # edge_cosine runs one SpMM instead of two: the same gradient as with
    # the transpose of a row-sorted EdgeIndex (PyG's order).
    row, col = make_entries(5, 5, symmetric=True, device=device)
    key = torch.argsort(row * 5 + col)
    edge_index = EdgeIndex(
        torch.stack([row[key], col[key]]), sparse_size=(5, 5), sort_order='row'
    )
    pattern, _ = csr_arrays(edge_index)
    identical, _ = sparse_pattern(row[key], col[key], (5, 5))
    assert torch.equal(identical.col, pattern.col)
    assert torch.equal(identical.col, identical.col_t)
    assert torch.equal(identical.rowptr, identical.rowptr_t)
    a = randn(5, 4, device=device).requires_grad_()
    grads = [
        torch.autograd.grad(edge_cosine(p, a)[0].square().sum(), a)[0]
        for p in (pattern, identical)
    ]
    torch.testing.assert_close(grads[0], grads[1])
    assert gradcheck(lambda a: edge_cosine(identical, a)[0], (a,))


def test_spmm(device):
    row, col = make_entries(device=device)
    pattern, _ = sparse_pattern(row, col, (6, 5))
    generator = torch.Generator().manual_seed(0)
    values = randn(14, device=device, generator=generator).requires_grad_()
    x = randn(5, 3, device=device, generator=generator).requires_grad_()

    out = spmm(pattern, values, x)
    assert out.size() == (6, 3)
    assert torch.allclose(out, dense_of(pattern, values) @ x, atol=1e-12)

    assert gradcheck(lambda v, x: spmm(pattern, v, x), (values, x))
    assert gradgradcheck(lambda v, x: spmm(pattern, v, x), (values, x))
    # ... and on the transposed pattern (the other direction of perm_t):
    values_t = pattern.transpose_values(values).detach().requires_grad_()
    y = randn(6, 3, device=device, generator=generator).requires_grad_()
    assert gradgradcheck(lambda v, y: spmm(pattern.t(), v, y), (values_t, y))

    # A strided (expanded) operand gives the same result:
    ones = torch.ones(1, 1, dtype=torch.float64, device=device).expand(5, 3)
    assert torch.allclose(
        spmm(pattern, values, ones),
        dense_of(pattern, values) @ ones.contiguous(),
    )


def test_sddmm(device):
    row, col = make_entries(device=device)
    pattern, _ = sparse_pattern(row, col, (6, 5))
    generator = torch.Generator().manual_seed(0)
    a = randn(6, 4, device=device, generator=generator).requires_grad_()
    b = randn(5, 4, device=device, generator=generator).requires_grad_()

    out = sddmm(pattern, a, b)
    assert out.size() == (14,)
    expected = (a @ b.t())[pattern.row.long(), pattern.col.long()]
    assert torch.allclose(out, expected, atol=1e-12)

    assert gradcheck(lambda a, b: sddmm(pattern, a, b), (a, b))
    assert gradgradcheck(lambda a, b: sddmm(pattern, a, b), (a, b))


def test_empty_pattern(device):
    empty = torch.zeros(0, dtype=torch.long, device=device)
    pattern, _ = sparse_pattern(empty, empty, (3, 3))
    x = randn(3, 2, device=device, dtype=torch.float32).requires_grad_()
    assert torch.equal(spmm(pattern, x.new_zeros(0), x), x.new_zeros(3, 2))
    assert sddmm(pattern, x, x).numel() == 0
    assert edge_cosine(pattern, x)[0].numel() == 0
    out, alpha, alpha_loop = softmax_spmm(
        pattern, x.new_zeros(0), x, x.new_zeros(3)
    )
    assert torch.allclose(out, x) and torch.equal(alpha_loop, x.new_ones(3))
    out.sum().backward()
    assert torch.equal(x.grad, x.new_ones(3, 2))


@pytest.mark.parametrize('symmetric', [False, True])
def test_edge_cosine(symmetric, device):
    row, col = make_entries(7, 7, nnz=20, symmetric=symmetric, device=device)
    pattern, _ = sparse_pattern(row, col, (7, 7))
    x = randn(7, 4, device=device).requires_grad_()

    out, self_cos = edge_cosine(pattern, x)
    h = F.normalize(x, dim=-1)
    expected = (h @ h.t())[pattern.row.long(), pattern.col.long()]
    assert torch.allclose(out, expected, atol=1e-12)
    assert torch.equal(self_cos, x.new_ones(7))

    grad = torch.randn_like(out)
    (grad_x,) = torch.autograd.grad(out, x, grad)
    (expected_grad,) = torch.autograd.grad(expected, x, grad)
    assert torch.allclose(grad_x, expected_grad, atol=1e-12)

    assert gradcheck(lambda x: edge_cosine(pattern, x)[0], (x,))
    assert gradgradcheck(lambda x: edge_cosine(pattern, x)[0], (x,))


def test_edge_cosine_bipartite(device):
    row, col = make_entries(device=device)
    pattern, _ = sparse_pattern(row, col, (6, 5))
    generator = torch.Generator().manual_seed(0)
    a = randn(6, 4, device=device, generator=generator).requires_grad_()
    b = randn(5, 4, device=device, generator=generator).requires_grad_()
    out, _ = edge_cosine(pattern, a, b)
    expected = (F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).t())[
        pattern.row.long(), pattern.col.long()
    ]
    assert torch.allclose(out, expected, atol=1e-12)
    assert gradcheck(lambda a, b: edge_cosine(pattern, a, b)[0], (a, b))
    assert gradgradcheck(lambda a, b: edge_cosine(pattern, a, b)[0], (a, b))
    # Only a needs a gradient:
    (grad_a,) = torch.autograd.grad(
        edge_cosine(pattern, a, b.detach())[0], a, a.new_ones(14)
    )
    (expected_a,) = torch.autograd.grad(expected, a, a.new_ones(14))
    assert torch.allclose(grad_a, expected_a, atol=1e-12)


def test_edge_cosine_zero_row(device):
    pattern, _ = sparse_pattern(
        torch.tensor([0, 0, 1], device=device),
        torch.tensor([0, 1, 1], device=device),
        (2, 2),
    )
    x = torch.tensor([[0.0, 0.0], [1.0, 2.0]], device=device)
    cos, self_cos = edge_cosine(pattern, x)
    assert cos.tolist() == pytest.approx([0.0, 0.0, 1.0])
    assert self_cos.tolist() == [0.0, 1.0]


def softmax_reference(pattern, logits, x, loop_logits=None):
    r"""Row softmax over the entries (and the self-loop), dense."""
    num_rows, num_cols = pattern.size
    alpha = []
    for i in range(num_rows):
        entries = (pattern.row == i).nonzero().view(-1)
        row_logits = logits[entries]
        if loop_logits is not None:
            row_logits = torch.cat([row_logits, loop_logits[i : i + 1]])
        alpha.append(torch.softmax(row_logits, dim=0))
    out, edge_alpha, loop_alpha = [], [], []
    for i, a in enumerate(alpha):
        entries = (pattern.row == i).nonzero().view(-1)
        k = entries.numel()
        row_out = (a[:k].unsqueeze(-1) * x[pattern.col[entries].long()]).sum(
            dim=0
        )
        if loop_logits is not None:
            row_out = row_out + a[k] * x[i]
            loop_alpha.append(a[k])
        out.append(row_out)
        edge_alpha.append((entries, a[:k]))
    full_alpha = logits.new_zeros(logits.numel())
    for entries, a in edge_alpha:
        full_alpha = full_alpha.index_put((entries,), a)
    loops = torch.stack(loop_alpha) if loop_alpha else None
    return torch.stack(out), full_alpha, loops


def softmax_inputs(loops, device, generator):
    r"""A 5 x 5 pattern of 12 entries, and leaves of its logits, of
    :math:`\mathbf{x}` and (where :obj:`loops`) of the self-loops'
    logits."""
    row, col = make_entries(5, 5, nnz=12, device=device)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    logits = randn(12, device=device, generator=generator).requires_grad_()
    x = randn(5, 3, device=device, generator=generator).requires_grad_()
    loop_logits = (
        randn(5, device=device, generator=generator).requires_grad_()
        if loops
        else None
    )
    return pattern, logits, x, loop_logits


@pytest.mark.parametrize('loops', [False, True])
def test_softmax_spmm(loops, device):
    generator = torch.Generator().manual_seed(0)
    pattern, logits, x, loop_logits = softmax_inputs(loops, device, generator)

    out, alpha, alpha_loop = softmax_spmm(pattern, logits, x, loop_logits)
    expected = softmax_reference(pattern, logits, x, loop_logits)
    assert torch.allclose(out, expected[0], atol=1e-12)
    assert torch.allclose(alpha, expected[1], atol=1e-12)
    if loops:
        assert torch.allclose(alpha_loop, expected[2], atol=1e-12)
    else:
        assert alpha_loop is None

    # Gradients through the output, the attention, or both; and second
    # derivatives.
    inputs = (logits, x) + ((loop_logits,) if loops else ())

    def function(*inputs):
        return softmax_spmm(pattern, *inputs[:2], *inputs[2:])

    for pick in [lambda r: r[0], lambda r: r[1], lambda r: (r[0], r[1])]:
        assert gradcheck(lambda *i, pick=pick: pick(function(*i)), inputs)
    assert gradgradcheck(lambda *i: function(*i)[0], inputs)


@pytest.mark.parametrize('loops', [False, True])
def test_softmax_spmm_scaled(loops, device):
    # Attention dropout's draws scale the attention in the aggregation
    # only: the attention comes back as the softmax gives it.
    generator = torch.Generator().manual_seed(1)
    pattern, logits, x, loop_logits = softmax_inputs(loops, device, generator)
    scale = 2.0 * (randn(12, device=device, generator=generator) > 0)
    loop_scale = (
        2.0 * (randn(5, device=device, generator=generator) > 0)
        if loops
        else None
    )
    assert 0 < int(scale.count_nonzero()) < 12

    out, alpha, alpha_loop = softmax_spmm(
        pattern, logits, x, loop_logits, scale, loop_scale
    )
    _, expected_alpha, expected_loop = softmax_reference(
        pattern, logits, x, loop_logits
    )
    dense = x.new_zeros(5, 5).index_put(
        (pattern.row.long(), pattern.col.long()),
        expected_alpha * scale,
        accumulate=True,
    )
    if loops:
        dense = dense + torch.diag(expected_loop * loop_scale)
    assert torch.allclose(out, dense @ x, atol=1e-12)
    assert torch.allclose(alpha, expected_alpha, atol=1e-12)
    if loops:
        assert torch.allclose(alpha_loop, expected_loop, atol=1e-12)

    inputs = (logits, x) + ((loop_logits,) if loops else ())

    def function(*inputs):
        logits, x, *loop = inputs
        loop_logits = loop[0] if loop else None
        return softmax_spmm(pattern, logits, x, loop_logits, scale, loop_scale)

    for pick in [lambda r: r[0], lambda r: (r[0], r[1])]:
        assert gradcheck(lambda *i, pick=pick: pick(function(*i)), inputs)
    assert gradgradcheck(lambda *i: function(*i)[0], inputs)


def test_softmax_spmm_masked_self_loops_and_high_logits(device):
    row, col = make_entries(5, 5, nnz=12, device=device)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    generator = torch.Generator().manual_seed(0)
    logits = 1000.0 * randn(12, device=device, generator=generator)
    x = randn(5, 3, device=device, generator=generator)
    loop_logits = x.new_full((5,), float('-inf'))
    loop_logits[pattern.row.unique().long()[0]] = 0.0
    out, alpha, alpha_loop = softmax_spmm(pattern, logits, x, loop_logits)
    expected = softmax_reference(pattern, logits, x, loop_logits)
    assert bool(torch.isfinite(out).all())
    assert torch.allclose(out, expected[0], atol=1e-12)
    assert torch.allclose(alpha_loop, expected[2], atol=1e-12)


@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
def test_kernels_as_custom_operators(dtype, device):
    # The operators torch.compile sees: schema, fake (meta) implementation
    # and dispatch agree with the eager kernels (also in half precision,
    # where they return float32 for the backward pass).
    row, col = make_entries(5, 5, nnz=12, symmetric=True, device=device)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    generator = torch.Generator().manual_seed(0)
    x = randn(5, 3, device=device, generator=generator, dtype=dtype)
    logits = randn(24, device=device, generator=generator, dtype=dtype)
    zeros, grad_out = (
        x.new_zeros(5),
        randn(5, 3, device=device, generator=generator, dtype=dtype),
    )
    ops = torch.ops.apnet_pyg
    backward_args = (
        pattern.rowptr,
        pattern.row,
        pattern.col,
        pattern.rowptr_t,
        pattern.col_t,
        pattern.perm_t,
        False,
    )
    cos, h, inv_norm, _, _ = ops.edge_cosine(
        pattern.rowptr, pattern.col, x, None
    )
    out, alpha, alpha_loop = ops.softmax_spmm(
        pattern.rowptr, pattern.row, pattern.col, logits, x, zeros, None, None
    )
    # Attention dropout's draws: 0 or 1 / (1 - p).
    scale = 2.0 * (randn(24, device=device, generator=generator) > 0)
    loop_scale = 2.0 * (randn(5, device=device, generator=generator) > 0)
    assert cos.dtype == h.dtype == out.dtype == alpha.dtype == torch.float32
    for op, args in [
        (
            ops.edge_cosine_backward,
            (*backward_args, logits, cos, h, inv_norm, None, None, False),
        ),
        (
            ops.edge_cosine_backward,
            (*backward_args, logits, cos, h, inv_norm, h, inv_norm, True),
        ),
        (
            ops.softmax_spmm_backward,
            (
                *backward_args,
                x,
                out,
                alpha,
                alpha_loop,
                None,
                None,
                grad_out,
                None,
                None,
                True,
            ),
        ),
        (
            ops.softmax_spmm_backward,
            (
                *backward_args,
                x,
                out,
                alpha,
                alpha_loop,
                scale,
                loop_scale,
                grad_out,
                logits,
                zeros,
                True,
            ),
        ),
        (
            ops.softmax_spmm_backward,
            (
                *backward_args,
                x,
                out,
                alpha,
                None,
                None,
                None,
                grad_out,
                logits,
                None,
                False,
            ),
        ),
        (ops.edge_index_arrays, (torch.stack([row, col]), 5, 5, 1)),
        (ops.spmm, (pattern.rowptr, pattern.col, logits, x)),
        (ops.sddmm, (pattern.rowptr, pattern.col, x, x)),
        (ops.edge_cosine, (pattern.rowptr, pattern.col, x, None)),
        (ops.edge_cosine, (pattern.rowptr, pattern.col, x, x + 1)),
        (
            ops.softmax_spmm,
            (
                pattern.rowptr,
                pattern.row,
                pattern.col,
                logits,
                x,
                zeros,
                None,
                None,
            ),
        ),
        (
            ops.softmax_spmm,
            (
                pattern.rowptr,
                pattern.row,
                pattern.col,
                logits,
                x,
                None,
                scale,
                None,
            ),
        ),
        # Float32 logits with x in another dtype (APNetConv's half path):
        (
            ops.softmax_spmm,
            (
                pattern.rowptr,
                pattern.row,
                pattern.col,
                logits.float(),
                x,
                zeros.float(),
                scale,
                loop_scale,
            ),
        ),
    ]:
        torch.library.opcheck(op, args)


def test_more_entries_than_cells(device):
    # Repeated entries can outnumber the cells of the matrix; torch's
    # sampled_addmm then rewrote the pattern's index tensors (CPU), and
    # cuSPARSE refuses such a matrix (CUDA): the kernels take another route.
    row, col = make_entries(3, 2, nnz=20, device=device)
    pattern, _ = sparse_pattern(row, col, (3, 2))
    saved = [t.clone() for t in pattern[:7]]
    generator = torch.Generator().manual_seed(0)
    a = randn(3, 4, device=device, generator=generator).requires_grad_()
    b = randn(2, 4, device=device, generator=generator).requires_grad_()
    expected = (a @ b.t())[pattern.row.long(), pattern.col.long()]
    for _ in range(3):
        torch.testing.assert_close(sddmm(pattern, a, b), expected)
        cos, _ = edge_cosine(pattern, a, b)
        torch.testing.assert_close(
            cos,
            (F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).t())[
                pattern.row.long(), pattern.col.long()
            ],
        )
        logits = randn(20, device=device, generator=generator)
        _, alpha, _ = softmax_spmm(pattern, logits, b)
        torch.autograd.grad(alpha.square().sum() + cos.sum(), [a, b])
    for tensor, saved_tensor in zip(pattern[:7], saved):
        assert torch.equal(tensor, saved_tensor)
    assert gradcheck(lambda a, b: sddmm(pattern, a, b), (a, b))
    values = randn(20, device=device, generator=generator).requires_grad_()
    torch.testing.assert_close(
        spmm(pattern, values, b), dense_of(pattern, values) @ b
    )
    assert gradcheck(lambda v, b: spmm(pattern, v, b), (values, b))
    assert gradcheck(
        lambda v, a: spmm(pattern.t(), v, a),
        (pattern.transpose_values(values).detach().requires_grad_(), a),
    )


def test_sparse_pattern_int32_indices_of_a_large_graph(device):
    # row * num_cols overflows int32 from 46,341 nodes on: the keys are
    # computed in int64, so int32 indices give the int64 pattern.
    n = 50_000
    row = torch.tensor([0, 49_998, 49_999, 49_999], device=device)
    col = torch.tensor([49_999, 1, 0, 2], device=device)
    expected, expected_perm = sparse_pattern(row, col, (n, n))
    pattern, perm = sparse_pattern(row.int(), col.int(), (n, n))
    assert torch.equal(perm, expected_perm)
    for name in (
        'rowptr',
        'row',
        'col',
        'rowptr_t',
        'row_t',
        'col_t',
        'perm_t',
    ):
        assert torch.equal(getattr(pattern, name), getattr(expected, name))


# Equality with dense references, forward and gradient (float64) ############
#
# The references below are written from the docstrings with dense tensors
# only: the entries enter as one-hot incidence matrices (row R [nnz, M] and
# column C [nnz, N]), so a repeated entry is one term per copy, as the
# pattern's docstring says. Values and outputs per entry are in input order;
# the kernels' are in pattern order, the input's reordered by `perm`.
def special_entries(num_rows, num_cols, nnz, seed=0, device='cpu'):
    r"""Random entries, then a copy of the first entry and a self-loop on
    row 1; the last row and the last column have no entry."""
    generator = torch.Generator().manual_seed(seed)
    row = torch.randint(0, num_rows - 1, (nnz,), generator=generator)
    col = torch.randint(0, num_cols - 1, (nnz,), generator=generator)
    one = torch.ones(1, dtype=torch.long)
    return torch.cat([row, row[:1], one]).to(device), torch.cat(
        [col, col[:1], one]
    ).to(device)


def incidence(index, size):
    return F.one_hot(index, size).to(torch.float64)


def randn64(*size, generator, device='cpu'):
    return randn(*size, generator=generator, device=device).requires_grad_()


def assert_same_gradients(
    outputs, expected_outputs, inputs, generator, create_graph=False
):
    r"""Forward equality, then equality of the gradients of both sides with
    respect to every input, for the same random output gradients."""
    grads_out = []
    for out, expected in zip(outputs, expected_outputs):
        torch.testing.assert_close(out, expected)
        grads_out.append(
            randn(
                out.shape,
                generator=generator,
                dtype=out.dtype,
                device=out.device,
            )
        )
    # (An input that an output does not depend on has a zero gradient.)
    grads = torch.autograd.grad(
        outputs,
        inputs,
        grads_out,
        create_graph=create_graph,
        materialize_grads=True,
    )
    expected_grads = torch.autograd.grad(
        expected_outputs, inputs, grads_out, materialize_grads=True
    )
    for grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected_grad)


@pytest.mark.parametrize('transposed', [False, True])
def test_spmm_equals_dense_reference(transposed, device):
    row, col = special_entries(6, 5, nnz=10, device=device)
    pattern, perm = sparse_pattern(row, col, (6, 5))
    generator = torch.Generator().manual_seed(1)
    values = randn64(
        row.numel(), generator=generator, device=device
    )  # input order
    # A = R^T diag(v) C, with a repeated entry adding up:
    dense = incidence(row, 6).t() @ (values.unsqueeze(-1) * incidence(col, 5))
    if transposed:  # The other direction of perm_t.
        x = randn64(6, 3, generator=generator, device=device)
        out = spmm(pattern.t(), pattern.transpose_values(values[perm]), x)
        expected = dense.t() @ x
    else:
        x = randn64(5, 3, generator=generator, device=device)
        out = spmm(pattern, values[perm], x)
        expected = dense @ x
    assert_same_gradients([out], [expected], [values, x], generator)


@pytest.mark.parametrize('transposed', [False, True])
def test_sddmm_equals_dense_reference(transposed, device):
    row, col = special_entries(6, 5, nnz=10, device=device)
    pattern, perm = sparse_pattern(row, col, (6, 5))
    generator = torch.Generator().manual_seed(1)
    if transposed:  # Entries (col, row) of the [5, 6] transpose.
        a = randn64(5, 4, generator=generator, device=device)
        b = randn64(6, 4, generator=generator, device=device)
        out = sddmm(pattern.t(), a, b)
        # v_k = <a_{col_k}, b_{row_k}>, reordered for the transpose:
        expected = pattern.transpose_values(
            ((incidence(col, 5) @ a) * (incidence(row, 6) @ b)).sum(-1)[perm]
        )
    else:
        a = randn64(6, 4, generator=generator, device=device)
        b = randn64(5, 4, generator=generator, device=device)
        out = sddmm(pattern, a, b)
        expected = ((incidence(row, 6) @ a) * (incidence(col, 5) @ b)).sum(-1)[
            perm
        ]
    assert_same_gradients([out], [expected], [a, b], generator)


def softmax_spmm_dense_reference(row, col, size, logits, x, loop_logits):
    r"""alpha_k = exp(z_k) / sum over row_k's entries (and its self-loop)
    of exp(z); o_i = sum_k alpha_k x_{col_k} (+ alpha_ii x_i)."""
    rows, cols = incidence(row, size[0]), incidence(col, size[1])
    exp = logits.exp()
    denominator = rows.t() @ exp
    alpha_loop = None
    if loop_logits is not None:
        exp_loop = loop_logits.exp()
        denominator = denominator + exp_loop
        alpha_loop = exp_loop / denominator
    alpha = exp / (rows @ denominator)
    out = rows.t() @ (alpha.unsqueeze(-1) * (cols @ x))
    if loop_logits is not None:
        out = out + alpha_loop.unsqueeze(-1) * x[: size[0]]
    return out, alpha, alpha_loop


@pytest.mark.parametrize(
    'through,create_graph',
    [
        ('out', False),
        ('alpha', False),
        ('both', False),
        ('out', True),
        # The attention alone does not use x: its gradient is zero.
        ('alpha', True),
        ('both', True),
    ],
)
@pytest.mark.parametrize('loops', [False, True])
def test_softmax_spmm_equals_dense_reference(
    loops, through, create_graph, device
):
    # create_graph=True runs the backward of second derivatives.
    row, col = special_entries(5, 6, nnz=10, device=device)
    pattern, perm = sparse_pattern(row, col, (5, 6))
    generator = torch.Generator().manual_seed(1)
    logits = randn64(
        row.numel(), generator=generator, device=device
    )  # input order
    x = randn64(6, 3, generator=generator, device=device)
    inputs = [logits, x]
    loop_logits = None
    if loops:
        loop_logits = randn(5, generator=generator, device=device)
        loop_logits[row[0]] = float('-inf')  # no self-loop on this row
        loop_logits.requires_grad_()
        inputs.append(loop_logits)

    out, alpha, alpha_loop = softmax_spmm(
        pattern, logits[perm], x, loop_logits
    )
    expected = softmax_spmm_dense_reference(
        row, col, (5, 6), logits, x, loop_logits
    )
    # The last row has no entry: zero, or x_4 through its self-loop alone.
    torch.testing.assert_close(out[4], x[4] if loops else x.new_zeros(3))
    outputs = [out, alpha, alpha_loop]
    expected = [expected[0], expected[1][perm], expected[2]]
    picked = {'out': [0], 'alpha': [1, 2], 'both': [0, 1, 2]}[through]
    picked = [i for i in picked if outputs[i] is not None]
    assert_same_gradients(
        [outputs[i] for i in picked],
        [expected[i] for i in picked],
        inputs,
        generator,
        create_graph,
    )


@pytest.mark.parametrize('create_graph', [False, True])
@pytest.mark.parametrize('wrt', ['a and b', 'b'])
def test_edge_cosine_bipartite_equals_dense_reference(
    wrt, create_graph, device
):
    row, col = special_entries(6, 5, nnz=10, device=device)
    pattern, perm = sparse_pattern(row, col, (6, 5))
    generator = torch.Generator().manual_seed(1)
    a = randn(6, 4, generator=generator, device=device)
    b = randn(5, 4, generator=generator, device=device)
    b[col[0]] = 0.0  # A zero row: cosine 0 with every row.
    b.requires_grad_()
    inputs = [b]
    if wrt == 'a and b':
        inputs.insert(0, a.requires_grad_())

    def normalized(t):
        return t / t.norm(dim=-1, keepdim=True).clamp_min(NORM_EPS)

    out, _ = edge_cosine(pattern, a, b)
    expected = (
        (incidence(row, 6) @ normalized(a))
        * (incidence(col, 5) @ normalized(b))
    ).sum(-1)[perm]
    assert bool((out[pattern.col.long() == col[0]] == 0).all())
    assert_same_gradients([out], [expected], inputs, generator, create_graph)


# Half precision and autocast ################################################
#
# float16 and bfloat16 operands are computed in float32: each result is the
# float64 result rounded to the operands' dtype, within one unit in the last
# place (rtol = eps) and float32's rounding, on rows of 100 entries and 64
# features, where sums in half precision would be off by several units.
LOW_PRECISION = [torch.float16, torch.bfloat16]


def assert_rounded_from(actual, expected, dtype):
    r""":obj:`actual` (in :obj:`dtype`) is :obj:`expected` (float64)
    rounded to :obj:`dtype`, within one unit in the last place, up to the
    rounding errors of a float32 computation (relative, and for sums with
    cancellation, absolute: tens of float32 epsilons)."""
    assert actual.dtype == dtype
    finfo, eps32 = torch.finfo(dtype), torch.finfo(torch.float32).eps
    atol = 16 * eps32 * expected.abs().max().item() + finfo.tiny
    torch.testing.assert_close(
        actual.double(),
        expected.to(dtype).double(),
        rtol=max(finfo.eps, 32 * eps32),
        atol=atol,
    )


def half_problem(dtype, device, num_rows=12, num_cols=150, nnz=1200):
    r"""A pattern with 100 entries a row, and operands exact in
    :obj:`dtype` (float64 copies of them)."""
    row, col = make_entries(num_rows, num_cols, nnz=nnz, device=device)
    pattern, _ = sparse_pattern(row, col, (num_rows, num_cols))
    generator = torch.Generator().manual_seed(2)

    def operand(*size):
        low = randn(*size, device=device, generator=generator, dtype=dtype)
        return low.requires_grad_(), low.double().requires_grad_()

    return pattern, operand


def gradients(outputs, inputs, grads_out):
    return torch.autograd.grad(
        outputs, inputs, grads_out, materialize_grads=True
    )


@pytest.mark.parametrize('dtype', LOW_PRECISION)
def test_spmm_and_sddmm_in_half_precision(dtype, device):
    pattern, operand = half_problem(dtype, device)
    (values, values64), (x, x64) = operand(pattern.nnz), operand(150, 64)
    (a, a64), (grad, grad64) = operand(12, 64), operand(12, 64)

    out = spmm(pattern, values, x)
    assert_rounded_from(out, spmm(pattern, values64, x64), dtype)
    for actual, expected in zip(
        gradients(out, [values, x], grad),
        gradients(spmm(pattern, values64, x64), [values64, x64], grad64),
    ):
        assert_rounded_from(actual, expected, dtype)

    out = sddmm(pattern, a, x)
    grad_values, grad_values64 = operand(pattern.nnz)
    assert_rounded_from(out, sddmm(pattern, a64, x64), dtype)
    for actual, expected in zip(
        gradients(out, [a, x], grad_values),
        gradients(sddmm(pattern, a64, x64), [a64, x64], grad_values64),
    ):
        assert_rounded_from(actual, expected, dtype)


@pytest.mark.parametrize('dtype', LOW_PRECISION)
@pytest.mark.parametrize('bipartite', [False, True])
def test_edge_cosine_in_half_precision(bipartite, dtype, device):
    pattern, operand = half_problem(dtype, device, num_rows=40, num_cols=40)
    (a, a64), (b, b64) = operand(40, 64), operand(40, 64)
    inputs, inputs64 = ([a, b], [a64, b64]) if bipartite else ([a], [a64])
    cos, self_cos = edge_cosine(pattern, *inputs)
    cos64, _ = edge_cosine(pattern, *inputs64)
    assert_rounded_from(cos, cos64, dtype)
    assert self_cos.dtype == dtype and bool((self_cos == 1).all())
    grad_cos, grad_cos64 = operand(pattern.nnz)
    for actual, expected in zip(
        gradients(cos, inputs, grad_cos),
        gradients(cos64, inputs64, grad_cos64),
    ):
        assert_rounded_from(actual, expected, dtype)


@pytest.mark.parametrize('dtype', LOW_PRECISION)
@pytest.mark.parametrize('logits_dtype', ['same', 'float32'])
def test_softmax_spmm_in_half_precision(logits_dtype, dtype, device):
    # Float32 logits with half-precision features are what APNetConv
    # passes: the aggregation comes back in x's dtype, the attention in the
    # logits'.
    pattern, operand = half_problem(dtype, device)
    (logits, logits64), (x, x64) = operand(pattern.nnz), operand(150, 64)
    (loop_logits, loop_logits64) = operand(12)
    if logits_dtype == 'float32':
        logits = logits.detach().float().requires_grad_()
        loop_logits = loop_logits.detach().float().requires_grad_()
    inputs = [logits, x, loop_logits]
    inputs64 = [logits64, x64, loop_logits64]
    # (A temperature of 4: exact in every dtype.)
    outputs = softmax_spmm(pattern, 4.0 * logits, x, 4.0 * loop_logits)
    outputs64 = softmax_spmm(pattern, 4.0 * logits64, x64, 4.0 * loop_logits64)
    for actual, expected, source in zip(
        outputs, outputs64, [x, logits, logits]
    ):
        assert_rounded_from(actual, expected, source.dtype)
    # Through the aggregation and the attention at once:
    (grad_out, grad_out64), (grad_alpha, grad_alpha64) = (
        operand(12, 64),
        operand(pattern.nnz),
    )
    grads = gradients(
        outputs[:2], inputs, [grad_out, grad_alpha.to(logits.dtype)]
    )
    grads64 = gradients(outputs64[:2], inputs64, [grad_out64, grad_alpha64])
    for actual, expected, source in zip(grads, grads64, inputs):
        assert_rounded_from(actual, expected, source.dtype)


def test_kernels_ignore_autocast(device):
    # Under autocast, torch would run the kernels' matrix products (bmm,
    # and on CUDA the sparse product) in half precision: the kernels
    # disable it, and give float32 operands the float32 results, forward
    # and backward.
    pattern, operand = half_problem(torch.float32, device)
    (a, _), (x, _) = operand(12, 64), operand(150, 64)
    (logits, _), (loop_logits, _) = operand(pattern.nnz), operand(12)
    grad_out = torch.ones(12, 64, device=device)

    def run():
        cos, _ = edge_cosine(pattern, a, x)
        out, alpha, _ = softmax_spmm(pattern, logits + cos, x, loop_logits)
        out = out + spmm(pattern, alpha, x)
        value = out, sddmm(pattern, out, x)
        return value + gradients(
            value,
            [a, x, logits, loop_logits],
            [grad_out, torch.ones_like(value[1])],
        )

    expected = run()
    autocast_dtype = torch.bfloat16 if device.type == 'cpu' else torch.float16
    with torch.autocast(device.type, dtype=autocast_dtype):
        results = run()
    # On CUDA the float32 results differ in their last bits from run to run
    # (cuSPARSE's and the scatters' atomic sums, seen on an H200 at 2e-5
    # of an entry); a half-precision product would be off by 1e-3.
    tolerance = 1e-6 if device.type == 'cpu' else 2e-5
    for result, expected_result in zip(results, expected):
        assert result.dtype == torch.float32
        torch.testing.assert_close(
            result, expected_result, rtol=tolerance, atol=tolerance
        )


def test_softmax_spmm_dtypes_of_its_operands():
    # x may have another dtype than the logits; the self-loops' logits are
    # logits, of their dtype.
    row, col = make_entries(5, 5, nnz=12)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    logits, x = torch.randn(12), torch.randn(5, 3).half()
    out, alpha, alpha_loop = softmax_spmm(pattern, logits, x, torch.zeros(5))
    assert (out.dtype, alpha.dtype, alpha_loop.dtype) == (
        torch.float16,
        torch.float32,
        torch.float32,
    )
    with pytest.raises(
        ValueError,
        match=r"'loop_logits' has dtype "
        r"torch.float16 but 'logits' torch.float32: convert",
    ):
        softmax_spmm(pattern, logits, x, torch.zeros(5).half())
    with pytest.raises(
        ValueError,
        match=r"'values' has dtype torch.float32 "
        r"but 'x' torch.float16: convert",
    ):
        spmm(pattern, logits, x)
