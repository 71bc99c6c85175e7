"""Input checks shared by the operators, graph builders and readers.

Every check raises a :class:`ValueError` that names the argument and the
problem, so that bad input never turns into a silent wrong answer (an
out-of-range index would otherwise read garbage in a sparse kernel, a NaN
would spread through every softmax it touches).

The operators split them the way PyG's :class:`MessagePassing` does:

* checks of shapes, dtypes and devices read only metadata and always run
  (no host synchronisation, no graph break under :func:`torch.compile`);
* node indices are always checked for range, with an asynchronous device
  assertion (:func:`assert_edge_index_in_range`): no host synchronisation,
  and a clear error instead of an out-of-bounds read;
* checks of values (finite features, strictly positive weights, and the
  exact offending indices) synchronise with the device and run only in
  PyG's debug mode (:obj:`with torch_geometric.debug(): ...`), in eager
  execution (:func:`value_checks_enabled`).

Model parts and graph builders, which run once per input rather than in a
training loop, use :func:`check_node_features` with its value check.

Constructor and builder arguments (numbers, sizes) are checked with
:func:`check_number` and :func:`check_int`, once per call.
"""

import math
import numbers
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric import is_compiling, is_debug_enabled


def _described(value: Any) -> str:
    return f'{type(value).__name__} {value!r}'


def is_real_number(value: Any) -> bool:
    r"""Whether :obj:`value` is a real number: not a string, and not a
    bool (which Python counts as an integer)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_number(
    value: Any,
    name: str,
    minimum: Optional[float] = None,
    maximum: Optional[float] = None,
) -> float:
    r"""Checks that :obj:`value` is a finite real number
    (:func:`is_real_number`) in :obj:`[minimum, maximum]` and returns it as
    a float."""
    if not is_real_number(value):
        raise ValueError(
            f"'{name}' must be a real number (got {_described(value)})"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"'{name}' must be finite (got {value})")
    if (minimum is not None and value < minimum) or (
        maximum is not None and value > maximum
    ):
        if minimum is not None and maximum is not None:
            bounds = f'lie in [{minimum:g}, {maximum:g}]'
        elif minimum is not None:
            bounds = f'be at least {minimum:g}'
        else:
            bounds = f'be at most {maximum:g}'
        raise ValueError(f"'{name}' must {bounds} (got {value:g})")
    return value


def check_int(
    value: Any,
    name: str,
    minimum: Optional[int] = None,
    optional: bool = False,
) -> Optional[int]:
    r"""Checks that :obj:`value` is an integer (not a bool nor a float) of
    at least :obj:`minimum`, or :obj:`None` if :obj:`optional`, and returns
    it."""
    if value is None and optional:
        return None
    what = 'a positive integer' if minimum == 1 else 'an integer'
    if optional:
        what += ' or None'
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"'{name}' must be {what} (got {_described(value)})")
    value = int(value)
    if minimum is not None and value < minimum:
        if minimum != 1:
            raise ValueError(
                f"'{name}' must be at least {minimum} (got {value})"
            )
        raise ValueError(f"'{name}' must be {what} (got {value})")
    return value


def check_bool(value: Any, name: str) -> bool:
    r"""Checks that :obj:`value` is a bool (a truthy string such as
    :obj:`"no"` would otherwise pass for :obj:`True`)."""
    if not isinstance(value, bool):
        raise ValueError(
            f"'{name}' must be True or False (got {_described(value)})"
        )
    return value


def check_temperature(value: Any, name: str = 'temperature') -> float:
    r"""The temperature of an attention softmax as a float in
    :obj:`[0, the largest float32]` (the layers keep it in float32): the
    one check of it, for the layers, :class:`~apnet_pyg.nn.APNet` and the
    ZSL application's configuration."""
    value = check_number(
        value, name, maximum=float(torch.finfo(torch.float32).max)
    )
    if value < 0:
        raise ValueError(
            f"'{name}' must be at least 0 (got {value:g}): a "
            f'negative temperature makes the softmax prefer '
            f'the least similar neighbours'
        )
    return value


def check_in_channels(value: Any, name: str = 'in_channels') -> None:
    r"""Checks a layer's input size, PyG's convention: a positive integer,
    or :obj:`-1` to derive it from the first input (lazy); :obj:`0` or
    another negative value would silently mean the same."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or (value < 1 and value != -1)
    ):
        raise ValueError(
            f"'{name}' must be a positive integer, or -1 to "
            f'derive it from the first input (got '
            f'{type(value).__name__} {value!r})'
        )


def as_index_tensor(value: Any, name: str) -> Tensor:
    r""":obj:`value` (a tensor or sequence of integers) as a flat int64
    tensor, or a clear error: a float label or index would otherwise be
    truncated silently."""
    try:
        tensor = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(
            f"'{name}' must be a tensor or sequence of integer "
            f'indices (got {type(value).__name__})'
        ) from None
    if (
        tensor.is_floating_point()
        or tensor.is_complex()
        or tensor.dtype == torch.bool
    ):
        raise ValueError(
            f"'{name}' must hold integer indices (got dtype {tensor.dtype})"
        )
    return tensor.reshape(-1).long()


def value_checks_enabled() -> bool:
    r"""Whether the operators check input values: in PyG's debug mode
    (:class:`torch_geometric.debug`), outside :func:`torch.compile` (a
    value check reads a device tensor on the host, which would break the
    graph)."""
    return is_debug_enabled() and not is_compiling()


def check_features(
    x: Tensor, name: str = 'x', dim: int = 2, channels: Optional[int] = None
) -> None:
    r"""Checks that :obj:`x` is a floating-point tensor with :obj:`dim`
    dimensions and, if given, :obj:`channels` features in its last
    dimension (metadata only)."""
    if not isinstance(x, Tensor):
        raise ValueError(
            f"'{name}' must be a torch.Tensor (got {type(x).__name__})"
        )
    if x.dim() != dim:
        raise ValueError(
            f"'{name}' must have {dim} dimensions (got shape {tuple(x.shape)})"
        )
    if not x.is_floating_point():
        raise ValueError(
            f"'{name}' must be a floating-point tensor (got dtype {x.dtype})"
        )
    if channels is not None and channels > 0 and x.size(-1) != channels:
        raise ValueError(
            f"'{name}' must have {channels} features in its "
            f'last dimension (got shape {tuple(x.shape)})'
        )


def check_finite(x: Tensor, name: str = 'x') -> None:
    r"""Checks that :obj:`x` holds no NaN or infinite value (reads the
    data)."""
    # A NaN or inf anywhere makes the sum non-finite; the sum is ~40x cheaper
    # than an elementwise check, which then runs only to rule out overflow.
    if not bool(torch.isfinite(x.sum())) and not bool(torch.isfinite(x).all()):
        raise ValueError(f"'{name}' contains NaN or infinite values")


def check_node_features(
    x: Tensor, name: str = 'x', dim: int = 2, channels: Optional[int] = None
) -> None:
    r""":func:`check_features` and :func:`check_finite`."""
    check_features(x, name, dim, channels)
    check_finite(x, name)


def check_same_device(
    tensor: Tensor, name: str, reference: Tensor, reference_name: str = 'x'
) -> None:
    r"""Checks that :obj:`tensor` lives on the device of
    :obj:`reference`."""
    if tensor.device != reference.device:
        raise ValueError(
            f"'{name}' is on {tensor.device} but "
            f"'{reference_name}' on {reference.device}; move "
            f'both to the same device'
        )


def describe(value: Any) -> str:
    r"""A short description of :obj:`value` for an error message: the
    shape and dtype of a tensor, else the type's name."""
    if isinstance(value, Tensor):
        return f'shape {tuple(value.shape)}, dtype {value.dtype}'
    return type(value).__name__


def check_same_dtype(
    tensor: Tensor, name: str, reference: Tensor, reference_name: str
) -> None:
    r"""Checks that :obj:`tensor` has the dtype of :obj:`reference`
    (metadata only)."""
    if tensor.dtype != reference.dtype:
        raise ValueError(
            f"'{name}' has dtype {tensor.dtype} but "
            f"'{reference_name}' {reference.dtype}: convert one "
            f'to the other'
        )


def check_same_width(
    tensor: Tensor, name: str, reference: Tensor, reference_name: str
) -> None:
    r"""Checks that :obj:`tensor` has as many features (last dimension)
    as :obj:`reference` (metadata only)."""
    if tensor.size(-1) != reference.size(-1):
        raise ValueError(
            f"'{name}' and '{reference_name}' must have the "
            f'same number of features (got '
            f'{tensor.size(-1)} and {reference.size(-1)})'
        )


def check_edge_index(edge_index: Tensor) -> None:
    r"""Checks that :obj:`edge_index` is an int64 or int32 tensor (the
    index dtypes of PyG and torch's sparse kernels) of shape
    :obj:`[2, num_edges]` (metadata only)."""
    if not isinstance(edge_index, Tensor):
        raise ValueError(
            f"'edge_index' must be a torch.Tensor "
            f'(got {type(edge_index).__name__})'
        )
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(
            f"'edge_index' must have shape [2, num_edges] "
            f'(got {tuple(edge_index.shape)})'
        )
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"'edge_index' must hold int64 or int32 indices "
            f'(got dtype {edge_index.dtype})'
        )


def _range_message(size: Tuple[int, int]) -> str:
    if size[0] == size[1]:
        return f'outside [0, {size[0] - 1}] for {size[0]} nodes'
    return (
        f'outside [0, {size[0] - 1}] (sources, row 0) x '
        f'[0, {size[1] - 1}] (targets, row 1) for {size[0]} source and '
        f'{size[1]} target nodes'
    )


def check_edge_index_values(edge_index: Tensor, size: Tuple[int, int]) -> None:
    r"""Checks that the sources :obj:`edge_index[0]` lie in
    :obj:`[0, size[0])` and the targets :obj:`edge_index[1]` in
    :obj:`[0, size[1])`, and names the offending values (reads the
    data)."""
    for index, num_nodes in zip(edge_index, size):
        if index.numel() > 0:
            low, high = int(index.min()), int(index.max())
            if low < 0 or high >= num_nodes:
                raise ValueError(
                    f"'edge_index' holds node indices in "
                    f'[{low}, {high}], {_range_message(size)}'
                )


def assert_edge_index_in_range(
    edge_index: Tensor, size: Tuple[int, int]
) -> None:
    r"""Checks the range of :obj:`edge_index` as
    :func:`check_edge_index_values` does in debug mode, and otherwise with
    :func:`torch._assert_async`: a :class:`RuntimeError` on CPU, a device
    assertion on a GPU, never a host synchronisation nor a graph break."""
    if value_checks_enabled():
        check_edge_index_values(edge_index, size)
        return
    if edge_index.numel() == 0:
        return
    if size[0] == size[1]:
        low, high = torch.aminmax(edge_index)
        in_range = (low >= 0) & (high < size[0])
    else:
        source_low, source_high = torch.aminmax(edge_index[0])
        target_low, target_high = torch.aminmax(edge_index[1])
        in_range = (
            (source_low >= 0)
            & (source_high < size[0])
            & (target_low >= 0)
            & (target_high < size[1])
        )
    # Compiled, the sizes are symbolic: formatting them into the message
    # would specialise the graph to them.
    where = (
        'negative or not below the number of nodes'
        if is_compiling()
        else _range_message(size)
    )
    torch._assert_async(
        in_range,
        f"'edge_index' holds node indices {where} (run under "
        f'torch_geometric.debug() to see which)',
    )


def check_edge_weight(edge_weight: Tensor, num_edges: int) -> None:
    r"""Checks that :obj:`edge_weight` is a floating-point tensor of shape
    :obj:`[num_edges]` (metadata only)."""
    if not isinstance(edge_weight, Tensor):
        raise ValueError(
            f"'edge_weight' must be a torch.Tensor "
            f'(got {type(edge_weight).__name__})'
        )
    if edge_weight.dim() != 1 or edge_weight.numel() != num_edges:
        raise ValueError(
            f"'edge_weight' must have shape [{num_edges}] "
            f'(one weight per edge; got '
            f'{tuple(edge_weight.shape)})'
        )
    if not edge_weight.is_floating_point():
        raise ValueError(
            f"'edge_weight' must be a floating-point tensor "
            f'(got dtype {edge_weight.dtype})'
        )


def check_zeros_and_ones(mask: Tensor, name: str = 'mask') -> None:
    r"""Checks that a non-boolean :obj:`mask` holds only zeros and ones
    (reads the data)."""
    other = (mask != 0) & (mask != 1)
    if bool(other.any()):
        raise ValueError(
            f"'{name}' must hold only 0 and 1 (got "
            f'{mask[other].reshape(-1)[0].item()}); pass a '
            f'boolean mask of the valid nodes'
        )


def check_positive_weights(weight: Tensor, name: str = 'edge_weight') -> None:
    r"""Checks that :obj:`weight` is finite and strictly positive (it
    enters the attention as :math:`\log w_{ij}`, so zero or negative
    weights have no meaning; reads the data)."""
    if not bool(torch.isfinite(weight).all()):
        raise ValueError(f"'{name}' contains NaN or infinite values")
    if weight.numel() > 0 and not bool((weight > 0).all()):
        raise ValueError(
            f"'{name}' must be strictly positive (got a "
            f'minimum of {float(weight.min())}); drop an '
            f'edge instead of giving it weight zero'
        )


def assert_finite(x: Tensor, name: str = 'x') -> None:
    r"""Refuses NaN or infinite values in :obj:`x` in every mode, without
    a host synchronisation: where reading the values costs none (CPU
    tensors in eager mode) or is asked for (debug mode), with
    :func:`check_finite`'s :class:`ValueError`; on a GPU and under
    :func:`torch.compile`, with the same message as an asynchronous
    assertion (:func:`torch._assert_async`: a device-side assertion)."""
    if x.device.type == 'meta':
        return
    if not is_compiling() and (
        x.device.type == 'cpu' or value_checks_enabled()
    ):
        check_finite(x, name)
        return
    torch._assert_async(
        torch.isfinite(x).all(), f"'{name}' contains NaN or infinite values"
    )


def assert_positive_weights(weight: Tensor, name: str = 'edge_weight') -> None:
    r""":func:`check_positive_weights` in every mode, as
    :func:`assert_finite` does for :func:`check_finite`."""
    if weight.device.type == 'meta':
        return
    if not is_compiling() and (
        weight.device.type == 'cpu' or value_checks_enabled()
    ):
        check_positive_weights(weight, name)
        return
    torch._assert_async(
        (torch.isfinite(weight) & (weight > 0)).all(),
        f"'{name}' must be finite and strictly positive: drop an edge "
        f'instead of giving it weight zero',
    )
