import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck as _gradcheck
from torch.autograd import gradgradcheck as _gradgradcheck

from apnet_pyg.nn.functional import (
    SparsePattern,
    edge_cosine,
    sddmm,
    softmax_spmm,
    sparse_pattern,
    spmm,
)


def gradcheck(function, inputs):
    # fast_mode: a random projection of the Jacobian, not every entry.
    return _gradcheck(function, inputs, fast_mode=True)


def gradgradcheck(function, inputs):
    return _gradgradcheck(function, inputs, fast_mode=True)


def make_entries(num_rows=6, num_cols=5, nnz=14, seed=0, symmetric=False):
    generator = torch.Generator().manual_seed(seed)
    row = torch.randint(0, num_rows, (nnz, ), generator=generator)
    col = torch.randint(0, num_cols, (nnz, ), generator=generator)
    if symmetric:
        row, col = torch.cat([row, col]), torch.cat([col, row])
    return row, col


def dense_of(pattern, values):
    out = values.new_zeros(pattern.size)
    return out.index_put_((pattern.row.long(), pattern.col.long()), values,
                          accumulate=True)


def test_sparse_pattern():
    row, col = make_entries()
    pattern, perm = sparse_pattern(row, col, (6, 5))
    assert isinstance(pattern, SparsePattern)
    assert str(pattern) == 'SparsePattern(size=(6, 5), nnz=14)'
    assert pattern.rowptr.dtype == torch.int32  # small enough for int32
    assert torch.equal(pattern.row.long(), row[perm])
    assert torch.equal(pattern.col.long(), col[perm])
    key = pattern.row * 5 + pattern.col
    assert bool((key[1:] >= key[:-1]).all())
    assert pattern.rowptr.tolist() == [0] + torch.bincount(
        row, minlength=6).cumsum(0).tolist()

    values = torch.randn(14, dtype=torch.float64)
    transposed = pattern.t()
    assert transposed.size == (5, 6)
    assert transposed.t() == pattern
    assert torch.equal(dense_of(transposed,
                                pattern.transpose_values(values)),
                       dense_of(pattern, values).t())
    assert torch.equal(transposed.transpose_values(
        pattern.transpose_values(values)), values)


def test_sparse_pattern_sorted_inputs():
    # Inputs sorted by (row, col) or by (col, row) skip a sort; the pattern
    # is the same as from shuffled entries.
    row, col = make_entries(6, 6, nnz=30, symmetric=True)
    expected, _ = sparse_pattern(row, col, (6, 6))
    for order in [torch.randperm(60), torch.argsort(row * 6 + col),
                  torch.argsort(col * 6 + row)]:
        pattern, perm = sparse_pattern(row[order], col[order], (6, 6))
        for tensor, expected_tensor in zip(pattern[:6], expected[:6]):
            assert torch.equal(tensor, expected_tensor)
        assert torch.equal(pattern.row.long(), row[order][perm])
        values = torch.randn(60, dtype=torch.float64)
        # (Repeated entries may add up in another order.)
        assert torch.allclose(dense_of(pattern.t(),
                                       pattern.transpose_values(values)),
                              dense_of(pattern, values).t(), atol=1e-12)


def test_sparse_pattern_symmetric_has_identical_transpose():
    # What the fused backward of edge_cosine relies on to use one SpMM.
    row, col = make_entries(5, 5, symmetric=True)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    assert torch.equal(pattern.rowptr, pattern.rowptr_t)
    assert torch.equal(pattern.col, pattern.col_t)
    row, col = torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 2])
    pattern, _ = sparse_pattern(row, col, (3, 3))
    assert not torch.equal(pattern.col, pattern.col_t)


def test_spmm():
    row, col = make_entries()
    pattern, _ = sparse_pattern(row, col, (6, 5))
    values = torch.randn(14, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)

    out = spmm(pattern, values, x)
    assert out.size() == (6, 3)
    assert torch.allclose(out, dense_of(pattern, values) @ x, atol=1e-12)

    assert gradcheck(lambda v, x: spmm(pattern, v, x), (values, x))
    assert gradgradcheck(lambda v, x: spmm(pattern, v, x), (values, x))
    # ... and on the transposed pattern (the other direction of perm_t):
    values_t = pattern.transpose_values(values).detach().requires_grad_()
    y = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    assert gradgradcheck(lambda v, y: spmm(pattern.t(), v, y), (values_t, y))

    # A strided (expanded) operand gives the same result:
    ones = torch.ones(1, 1, dtype=torch.float64).expand(5, 3)
    assert torch.allclose(spmm(pattern, values, ones),
                          dense_of(pattern, values) @ ones.contiguous())


def test_sddmm():
    row, col = make_entries()
    pattern, _ = sparse_pattern(row, col, (6, 5))
    a = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)

    out = sddmm(pattern, a, b)
    assert out.size() == (14, )
    expected = (a @ b.t())[pattern.row.long(), pattern.col.long()]
    assert torch.allclose(out, expected, atol=1e-12)

    assert gradcheck(lambda a, b: sddmm(pattern, a, b), (a, b))
    assert gradgradcheck(lambda a, b: sddmm(pattern, a, b), (a, b))


def test_empty_pattern():
    empty = torch.zeros(0, dtype=torch.long)
    pattern, _ = sparse_pattern(empty, empty, (3, 3))
    x = torch.randn(3, 2, requires_grad=True)
    assert torch.equal(spmm(pattern, x.new_zeros(0), x), torch.zeros(3, 2))
    assert sddmm(pattern, x, x).numel() == 0
    assert edge_cosine(pattern, x)[0].numel() == 0
    out, alpha, alpha_loop = softmax_spmm(pattern, x.new_zeros(0), x,
                                          x.new_zeros(3))
    assert torch.allclose(out, x) and torch.equal(alpha_loop, torch.ones(3))
    out.sum().backward()
    assert torch.equal(x.grad, torch.ones(3, 2))


@pytest.mark.parametrize('symmetric', [False, True])
def test_edge_cosine(symmetric):
    row, col = make_entries(7, 7, nnz=20, symmetric=symmetric)
    pattern, _ = sparse_pattern(row, col, (7, 7))
    x = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)

    out, self_cos = edge_cosine(pattern, x)
    h = F.normalize(x, dim=-1)
    expected = (h @ h.t())[pattern.row.long(), pattern.col.long()]
    assert torch.allclose(out, expected, atol=1e-12)
    assert torch.equal(self_cos, torch.ones(7, dtype=torch.float64))

    grad = torch.randn_like(out)
    grad_x, = torch.autograd.grad(out, x, grad)
    expected_grad, = torch.autograd.grad(expected, x, grad)
    assert torch.allclose(grad_x, expected_grad, atol=1e-12)

    assert gradcheck(lambda x: edge_cosine(pattern, x)[0], (x, ))
    assert gradgradcheck(lambda x: edge_cosine(pattern, x)[0], (x, ))


def test_edge_cosine_bipartite():
    row, col = make_entries()
    pattern, _ = sparse_pattern(row, col, (6, 5))
    a = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    out, _ = edge_cosine(pattern, a, b)
    expected = (F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).t())[
        pattern.row.long(), pattern.col.long()]
    assert torch.allclose(out, expected, atol=1e-12)
    assert gradcheck(lambda a, b: edge_cosine(pattern, a, b)[0], (a, b))
    assert gradgradcheck(lambda a, b: edge_cosine(pattern, a, b)[0], (a, b))
    # Only a needs a gradient:
    grad_a, = torch.autograd.grad(edge_cosine(pattern, a, b.detach())[0],
                                  a, torch.ones(14, dtype=torch.float64))
    expected_a, = torch.autograd.grad(expected, a,
                                      torch.ones(14, dtype=torch.float64))
    assert torch.allclose(grad_a, expected_a, atol=1e-12)


def test_edge_cosine_zero_row():
    pattern, _ = sparse_pattern(torch.tensor([0, 0, 1]),
                                torch.tensor([0, 1, 1]), (2, 2))
    x = torch.tensor([[0.0, 0.0], [1.0, 2.0]])
    cos, self_cos = edge_cosine(pattern, x)
    assert cos.tolist() == pytest.approx([0.0, 0.0, 1.0])
    assert self_cos.tolist() == [0.0, 1.0]


def softmax_reference(pattern, logits, x, loop_logits=None):
    r"""Row softmax over the entries (and the self-loop), dense."""
    num_rows, num_cols = pattern.size
    scores = torch.full((num_rows, num_cols + 1), float('-inf'),
                        dtype=logits.dtype)
    alpha = []
    for i in range(num_rows):
        entries = (pattern.row == i).nonzero().view(-1)
        row_logits = logits[entries]
        if loop_logits is not None:
            row_logits = torch.cat([row_logits, loop_logits[i:i + 1]])
        alpha.append(torch.softmax(row_logits, dim=0))
    del scores
    out, edge_alpha, loop_alpha = [], [], []
    for i, a in enumerate(alpha):
        entries = (pattern.row == i).nonzero().view(-1)
        k = entries.numel()
        row_out = (a[:k].unsqueeze(-1) * x[pattern.col[entries].long()]).sum(
            dim=0)
        if loop_logits is not None:
            row_out = row_out + a[k] * x[i]
            loop_alpha.append(a[k])
        out.append(row_out)
        edge_alpha.append((entries, a[:k]))
    full_alpha = logits.new_zeros(logits.numel())
    for entries, a in edge_alpha:
        full_alpha = full_alpha.index_put((entries, ), a)
    loops = torch.stack(loop_alpha) if loop_alpha else None
    return torch.stack(out), full_alpha, loops


@pytest.mark.parametrize('loops', [False, True])
def test_softmax_spmm(loops):
    row, col = make_entries(5, 5, nnz=12)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    logits = torch.randn(12, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    loop_logits = torch.randn(5, dtype=torch.float64, requires_grad=True) \
        if loops else None

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
    inputs = (logits, x) + ((loop_logits, ) if loops else ())

    def function(*inputs):
        return softmax_spmm(pattern, *inputs[:2], *inputs[2:])

    for pick in [lambda r: r[0], lambda r: r[1], lambda r: (r[0], r[1])]:
        assert gradcheck(lambda *i: pick(function(*i)), inputs)
    assert gradgradcheck(lambda *i: function(*i)[0], inputs)


def test_softmax_spmm_masked_self_loops_and_high_logits():
    row, col = make_entries(5, 5, nnz=12)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    logits = 1000.0 * torch.randn(12, dtype=torch.float64)
    x = torch.randn(5, 3, dtype=torch.float64)
    loop_logits = torch.full((5, ), float('-inf'), dtype=torch.float64)
    loop_logits[pattern.row.unique().long()[0]] = 0.0
    out, alpha, alpha_loop = softmax_spmm(pattern, logits, x, loop_logits)
    expected = softmax_reference(pattern, logits, x, loop_logits)
    assert bool(torch.isfinite(out).all())
    assert torch.allclose(out, expected[0], atol=1e-12)
    assert torch.allclose(alpha_loop, expected[2], atol=1e-12)


def test_kernels_as_custom_operators():
    # The operators torch.compile sees: schema, fake (meta) implementation
    # and dispatch agree with the eager kernels.
    row, col = make_entries(5, 5, nnz=12, symmetric=True)
    pattern, _ = sparse_pattern(row, col, (5, 5))
    x = torch.randn(5, 3)
    logits = torch.randn(24)
    ops = torch.ops.apnet_pyg
    backward_args = (pattern.rowptr, pattern.row, pattern.col,
                     pattern.rowptr_t, pattern.col_t, pattern.perm_t, False)
    cos, h, inv_norm, _, _ = ops.edge_cosine(pattern.rowptr, pattern.col, x,
                                             None)
    out, alpha, alpha_loop = ops.softmax_spmm(pattern.rowptr, pattern.row,
                                              pattern.col, logits, x,
                                              torch.zeros(5))
    for op, args in [
        (ops.edge_cosine_backward, (*backward_args, logits, cos, h, inv_norm,
                                    None, None, False)),
        (ops.edge_cosine_backward, (*backward_args, logits, cos, h, inv_norm,
                                    h, inv_norm, True)),
        (ops.softmax_spmm_backward, (*backward_args, x, out, alpha,
                                     alpha_loop, torch.randn(5, 3), None,
                                     None, True)),
        (ops.softmax_spmm_backward, (*backward_args, x, out, alpha, None,
                                     torch.randn(5, 3), logits, None, False)),
        (ops.sparse_pattern, (row, col, 5, 5)),
        (ops.spmm, (pattern.rowptr, pattern.col, logits, x)),
        (ops.sddmm, (pattern.rowptr, pattern.col, x, x)),
        (ops.edge_cosine, (pattern.rowptr, pattern.col, x, None)),
        (ops.edge_cosine, (pattern.rowptr, pattern.col, x, x + 1)),
        (ops.softmax_spmm, (pattern.rowptr, pattern.row, pattern.col, logits,
                            x, torch.zeros(5))),
        (ops.softmax_spmm, (pattern.rowptr, pattern.row, pattern.col, logits,
                            x, None)),
    ]:
        torch.library.opcheck(op, args)


def test_sparse_pattern_int32_indices_of_a_large_graph():
    # row * num_cols overflows int32 from 46,341 nodes on: the keys are
    # computed in int64, so int32 indices give the int64 pattern.
    n = 50_000
    row = torch.tensor([0, 49_998, 49_999, 49_999])
    col = torch.tensor([49_999, 1, 0, 2])
    expected, expected_perm = sparse_pattern(row, col, (n, n))
    pattern, perm = sparse_pattern(row.int(), col.int(), (n, n))
    assert torch.equal(perm, expected_perm)
    for name in ('rowptr', 'row', 'col', 'rowptr_t', 'row_t', 'col_t',
                 'perm_t'):
        assert torch.equal(getattr(pattern, name), getattr(expected, name))
