r"""Argument checks of the sparse kernels' public functions (metadata
only: no host synchronisation)."""

from typing import TYPE_CHECKING, Tuple

import torch
from torch import Tensor

from apnet_pyg.utils import check_features, check_int, check_same_device

if TYPE_CHECKING:  # Not at run time: csr imports from here.
    from apnet_pyg.nn.functional.csr import CSRArrays


def _check_entries(
    edge_index: Tensor, size: Tuple[int, int], dim: int
) -> None:
    if not isinstance(size, (tuple, list)) or len(size) != 2:
        raise ValueError(
            f"'size' must be a pair (num_rows, num_cols) (got {size!r})"
        )
    check_int(size[0], 'size[0]', minimum=0)
    check_int(size[1], 'size[1]', minimum=0)
    if dim not in (0, 1):
        raise ValueError(
            f"'dim' must be 0 or 1, the row of 'edge_index' "
            f'that indexes the matrix rows (got {dim!r})'
        )
    if (
        not isinstance(edge_index, Tensor)
        or edge_index.dim() != 2
        or edge_index.size(0) != 2
        or edge_index.is_floating_point()
        or edge_index.is_complex()
        or edge_index.dtype == torch.bool
    ):
        raise ValueError(
            f"'edge_index' must be a [2, nnz] tensor of "
            f'integer indices (got {_describe(edge_index)})'
        )
    if edge_index.size(1) > 0:
        # An asynchronous assertion: no host synchronisation.
        low, high = edge_index.aminmax(dim=1)
        in_range = (low >= 0).all() & (high[0] < size[0]) & (high[1] < size[1])
        torch._assert_async(
            in_range,
            f"'edge_index' holds indices outside the size {tuple(size)}",
        )


def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f'shape {tuple(value.shape)}, dtype {value.dtype}'
    return type(value).__name__


def _check_operand(
    tensor: Tensor,
    name: str,
    pattern: 'CSRArrays',
    rows: int,
    side: str,
    dim: int = 2,
) -> None:
    r"""Checks that :obj:`tensor` (:obj:`dim`-D, floating point) has
    :obj:`rows` rows and lives on the pattern's device (metadata only;
    the kernels would otherwise read out of bounds)."""
    check_features(tensor, name, dim=dim)
    if tensor.size(0) != rows:
        raise ValueError(
            f"'{name}' must have {rows} rows, the pattern's "
            f'{side} (got shape {tuple(tensor.shape)})'
        )
    check_same_device(tensor, name, pattern.rowptr, 'pattern')


def _check_entry_values_and_x(
    pattern: 'CSRArrays',
    values: Tensor,
    name: str,
    x: Tensor,
    same_dtype: bool = True,
) -> None:
    r"""The operands of a sparse-dense product: one value per entry of
    :obj:`pattern` and a row of :obj:`x` per column (of one dtype if
    :obj:`same_dtype`)."""
    _check_operand(
        values, name, pattern, pattern.nnz, 'number of entries', dim=1
    )
    _check_operand(x, 'x', pattern, pattern.size[1], 'number of columns')
    if same_dtype:
        _check_same_dtype(values, name, x, 'x')


def _check_same_dtype(
    tensor: Tensor, name: str, reference: Tensor, reference_name: str
) -> None:
    if tensor.dtype != reference.dtype:
        raise ValueError(
            f"'{name}' has dtype {tensor.dtype} but "
            f"'{reference_name}' {reference.dtype}: convert one "
            f'to the other'
        )


def _check_same_width(
    tensor: Tensor, name: str, reference: Tensor, reference_name: str
) -> None:
    if tensor.size(-1) != reference.size(-1):
        raise ValueError(
            f"'{name}' and '{reference_name}' must have the "
            f'same number of features (got '
            f'{tensor.size(-1)} and {reference.size(-1)})'
        )
