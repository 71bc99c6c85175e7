import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck, gradgradcheck

from apnet_pyg.nn.functional import SparsePattern, edge_cosine, sddmm, spmm


def make_pattern(num_rows=6, num_cols=5, nnz=14, seed=0, symmetric=False):
    generator = torch.Generator().manual_seed(seed)
    row = torch.randint(0, num_rows, (nnz, ), generator=generator)
    col = torch.randint(0, num_cols, (nnz, ), generator=generator)
    if symmetric:
        row, col = torch.cat([row, col]), torch.cat([col, row])
    return row, col


def dense_of(pattern, values):
    out = values.new_zeros(pattern.size)
    return out.index_put_((pattern.row, pattern.col), values,
                          accumulate=True)


def test_sparse_pattern_from_coo():
    row, col = make_pattern()
    pattern, perm = SparsePattern.from_coo(row, col, (6, 5))
    assert str(pattern) == 'SparsePattern(size=(6, 5), nnz=14)'
    assert torch.equal(pattern.row, row[perm])
    assert torch.equal(pattern.col, col[perm])
    key = pattern.row * 5 + pattern.col
    assert bool((key[1:] >= key[:-1]).all())
    assert pattern.rowptr.tolist() == [0] + torch.bincount(
        row, minlength=6).cumsum(0).tolist()
    assert not pattern.is_symmetric

    values = torch.randn(14, dtype=torch.float64)
    transposed = pattern.t()
    assert transposed.size == (5, 6)
    assert transposed.t() is pattern
    assert torch.equal(dense_of(transposed,
                                pattern.transpose_values(values)),
                       dense_of(pattern, values).t())


def test_sparse_pattern_symmetric():
    row, col = make_pattern(5, 5, symmetric=True)
    pattern, _ = SparsePattern.from_coo(row, col, (5, 5))
    assert pattern.is_symmetric
    row, col = torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 2])
    pattern, _ = SparsePattern.from_coo(row, col, (3, 3))
    assert not pattern.is_symmetric
    pattern, _ = SparsePattern.from_coo(row[:2], col[:2], (3, 3))
    assert pattern.is_symmetric


def test_spmm():
    row, col = make_pattern()
    pattern, _ = SparsePattern.from_coo(row, col, (6, 5))
    values = torch.randn(14, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)

    out = spmm(pattern, values, x)
    assert out.size() == (6, 3)
    assert torch.allclose(out, dense_of(pattern, values) @ x, atol=1e-12)

    assert gradcheck(lambda v, x: spmm(pattern, v, x), (values, x))
    assert gradgradcheck(lambda v, x: spmm(pattern, v, x), (values, x))

    # A strided (expanded) operand gives the same result:
    ones = torch.ones(1, 1, dtype=torch.float64).expand(5, 3)
    assert torch.allclose(spmm(pattern, values, ones),
                          dense_of(pattern, values) @ ones.contiguous())


def test_sddmm():
    row, col = make_pattern()
    pattern, _ = SparsePattern.from_coo(row, col, (6, 5))
    a = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)

    out = sddmm(pattern, a, b)
    assert out.size() == (14, )
    expected = (a @ b.t())[pattern.row, pattern.col]
    assert torch.allclose(out, expected, atol=1e-12)

    assert gradcheck(lambda a, b: sddmm(pattern, a, b), (a, b))
    assert gradgradcheck(lambda a, b: sddmm(pattern, a, b), (a, b))


def test_empty_pattern():
    pattern, _ = SparsePattern.from_coo(torch.zeros(0, dtype=torch.long),
                                        torch.zeros(0, dtype=torch.long),
                                        (3, 3))
    x = torch.randn(3, 2, requires_grad=True)
    assert torch.equal(spmm(pattern, x.new_zeros(0), x), torch.zeros(3, 2))
    assert sddmm(pattern, x, x).numel() == 0
    assert edge_cosine(pattern, x).numel() == 0


@pytest.mark.parametrize('symmetric', [False, True])
def test_edge_cosine(symmetric):
    row, col = make_pattern(7, 7, nnz=20, symmetric=symmetric)
    pattern, _ = SparsePattern.from_coo(row, col, (7, 7))
    assert pattern.is_symmetric == symmetric
    x = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)

    out = edge_cosine(pattern, x)
    h = F.normalize(x, dim=-1)
    expected = (h @ h.t())[pattern.row, pattern.col]
    assert torch.allclose(out, expected, atol=1e-12)

    grad = torch.randn_like(out)
    grad_x, = torch.autograd.grad(out, x, grad)
    expected_grad, = torch.autograd.grad(expected, x, grad)
    assert torch.allclose(grad_x, expected_grad, atol=1e-12)

    assert gradcheck(lambda x: edge_cosine(pattern, x), (x, ))
    assert gradgradcheck(lambda x: edge_cosine(pattern, x), (x, ))


def test_edge_cosine_zero_row():
    pattern, _ = SparsePattern.from_coo(torch.tensor([0, 0, 1]),
                                        torch.tensor([0, 1, 1]), (2, 2))
    x = torch.tensor([[0.0, 0.0], [1.0, 2.0]])
    assert edge_cosine(pattern, x).tolist() == pytest.approx([0.0, 0.0, 1.0])
