r"""A check, on the CPU, that code never reads a tensor's values on the host
(:func:`no_host_sync`): on a GPU each such read is a synchronisation (on
CUDA, :func:`torch.cuda.set_sync_debug_mode` would catch it; CPU tensors
have no such mode)."""

import contextlib

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

#: Operators whose result the host must read: a value (:obj:`item`,
#: :obj:`bool`, :obj:`int`, :obj:`float`, a 0-d index, a format) or the
#: size of a data-dependent output.
_SYNC_OPS = {
    aten._local_scalar_dense.default,
    aten.equal.default,
    aten.is_nonzero.default,
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
    aten.repeat_interleave.Tensor,
}
_INDEX_OPS = {
    aten.index.Tensor,
    aten.index_put.default,
    aten.index_put_.default,
    aten._index_put_impl_.default,
}
#: Tensor methods that copy the data out without an operator.
_SYNC_METHODS = {torch.Tensor.tolist, torch.Tensor.numpy}


class HostSync(AssertionError):
    r"""Raised by :func:`no_host_sync`."""


class _Operators(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _SYNC_OPS and not (
            func is aten.repeat_interleave.Tensor and kwargs.get('output_size')
        ):
            raise HostSync(f'{func} reads a tensor on the host')
        if func in _INDEX_OPS and any(
            index is not None and index.dtype in (torch.bool, torch.uint8)
            for index in args[1]
        ):
            raise HostSync(f'{func} with a boolean mask (a nonzero)')
        return func(*args, **kwargs)


class _Methods(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _SYNC_METHODS:
            raise HostSync(f'{func.__name__} copies a tensor to the host')
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def no_host_sync():
    r"""Raises :class:`HostSync` where the code inside reads a tensor's
    values on the host."""
    with _Methods(), _Operators():
        yield
