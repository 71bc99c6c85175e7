r"""Launching the Triton kernels: Triton's import guard, the kernels'
launch configuration (autotuned or fixed), and the forward and backward
passes registered as custom operators."""

import functools
import importlib
import importlib.util
import weakref
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from apnet_pyg.nn.functional import NORM_EPS, custom_kernel

try:  # Triton is optional (it ships with PyTorch's CUDA builds).
    import triton
except ImportError:  # pragma: no cover - exercised in a subprocess
    triton = None

#: The widest feature row (of :obj:`x` or :obj:`h`) a kernel holds in one
#: tile (registers, not memory, bound it); wider rows need the sparse
#: kernels.
MAX_FEATURES = 4096

#: Launches over fewer entries than this run a fixed configuration: timing
#: the candidates would cost more than it saves (and tests stay fast).
TUNE_MIN_ENTRIES = 1 << 17


# ---------------------------------------------------------------------------
# Availability and the interpreter
# ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def is_triton_available() -> bool:
    r"""Whether Triton is installed (the kernels also need a CUDA device,
    or Triton's interpreter for CPU tensors: see :func:`interpreting`)."""
    try:
        return (
            triton is not None
            and importlib.util.find_spec('triton') is not None
        )
    except ValueError:  # sys.modules['triton'] is None: blocked.
        return False


def interpreting() -> bool:
    r"""Whether Triton itself runs interpreted in this process
    (:obj:`TRITON_INTERPRET=1` was set when it was first imported): then
    the kernels run under the interpreter on every device."""
    if triton is None:
        return False
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.sum, InterpretedFunction)


def interpreter_enabled() -> bool:
    r"""Whether CPU tensors may run the kernels under Triton's interpreter
    (slow; for tests): Triton runs interpreted in this process
    (:obj:`TRITON_INTERPRET=1` was set before it was first imported; set
    later, it changes nothing: Triton's own library is compiled or
    interpreted for the whole process)."""
    return interpreting()


def _patch_interpreter_index() -> None:
    r"""Triton 3.6's interpreter turns a loop bound into an integer with
    :obj:`int(array)` of a one-element array, which numpy 2.4 refuses
    (and numpy 1.25 to 2.3 warns of; triton-lang/triton#9171, fixed
    upstream by #9172): the kernels' :obj:`range()` over bounds read from
    memory needs that fix, applied here to the interpreter's tensor
    patching (it reads the element explicitly, right on every numpy)."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, 'apnet_pyg_index_fix', False):
        return

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(
            tensor,
            '__index__',
            lambda self: int(self.handle.data.reshape(-1)[0]),
        )

    patch_lang_tensor.apnet_pyg_index_fix = True
    interpreter._patch_lang_tensor = patch_lang_tensor


def _load_kernels(interpret: bool):
    r"""The kernels module, jitted in the mode of Triton's own library
    (:obj:`tl.sum`, :obj:`tl.max`): :func:`triton.jit` reads
    :obj:`TRITON_INTERPRET` when it decorates, so the knob is set to that
    mode for the import alone, whatever the environment says now."""
    with triton.knobs.runtime.scope():
        triton.knobs.runtime.interpret = interpret
        if interpret:
            _patch_interpreter_index()
        return importlib.import_module(__package__ + '.kernels')


if triton is not None:
    kernels = _load_kernels(interpreting())
else:  # pragma: no cover - exercised in a subprocess
    kernels = None


# ---------------------------------------------------------------------------
# Launch configuration
# ---------------------------------------------------------------------------
def _next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def feature_block(width: int) -> int:
    r"""The tile of a feature row: the next power of two, at least 16
    (masked beyond :obj:`width`)."""
    return max(16, _next_power_of_2(max(width, 1)))


def degree_bucket(num_entries: int, num_rows: int) -> int:
    r"""The mean number of entries a row, as the power of two at or above
    it (1 to 64): the autotuning key of the entry loops."""
    mean = -(-num_entries // max(num_rows, 1))
    return min(64, _next_power_of_2(max(mean, 1)))


def fixed_config(width: int, degree: int) -> Dict[str, int]:
    r"""The configuration of a launch that is not autotuned (few entries,
    deterministic algorithms, CUDA-graph capture of an untimed key, the
    interpreter): :obj:`BLOCK_E` the mean degree's power of two (4 to 16),
    fewer where the rows are wide (at most 8,192 elements a gathered
    :obj:`[BLOCK_E, width]` tile, :obj:`width` the wider tile), and
    about 16 to 32 elements a thread of it."""
    block = min(max(degree, 4), 16, max(1, 8192 // width))
    warps = min(8, max(1, block * width // 512))
    return {'BLOCK_E': block, 'num_warps': warps, 'num_stages': 1}


def _deterministic_configs() -> bool:
    return torch.are_deterministic_algorithms_enabled()


def _capturing(device: torch.device) -> bool:
    return device.type == 'cuda' and torch.cuda.is_current_stream_capturing()


#: The configurations chosen by autotuning, by (kernel, key): reused under
#: CUDA-graph capture (which cannot time), reported by
#: :func:`tuned_configs`.
_TUNED: Dict[Tuple, Dict[str, int]] = {}


def tuned_configs() -> List[Dict[str, object]]:
    r"""The configurations autotuning chose in this process, one per
    kernel and key: the kernel's name, the feature widths, the mean
    degree's power of two, the dtypes of its tensor arguments, and
    :obj:`BLOCK_E`, :obj:`num_warps` and :obj:`num_stages`."""
    return [
        dict(
            kernel=key[0],
            num_x=key[1],
            num_h=key[2],
            degree=key[3],
            dtypes=','.join(key[4]),
            **config,
        )
        for key, config in sorted(_TUNED.items(), key=lambda kv: str(kv[0]))
    ]


def _launch(
    name: str,
    grid: Tuple[int],
    args: Tuple,
    constants: Dict,
    num_entries: int,
    device: torch.device,
) -> None:
    r"""Launches kernel :obj:`name`: autotuned where
    that pays (:data:`TUNE_MIN_ENTRIES`) and is allowed, else with the
    configuration autotuning chose earlier for the same key, else with
    :func:`fixed_config`."""
    kernel = getattr(kernels, name)
    num_x, num_h, degree = args[-3:]
    dtypes = tuple(
        str(arg.dtype).replace('torch.', '')
        for arg in args
        if isinstance(arg, Tensor)
    )
    key = (name, num_x, num_h, degree, dtypes)
    deterministic = _deterministic_configs()
    if (
        not kernels.INTERPRETED
        and num_entries >= TUNE_MIN_ENTRIES
        and not deterministic
        and not _capturing(device)  # Timing cannot be captured.
    ):
        kernel[grid](*args, **constants)
        best = kernel.best_config
        _TUNED[key] = dict(
            best.kwargs, num_warps=best.num_warps, num_stages=best.num_stages
        )
        return
    # Under capture, the configuration tuned for this key, if any.
    config = None if deterministic else _TUNED.get(key)
    if config is None:
        width = max(constants.get('BLOCK_X', 16), constants['BLOCK_H'])
        config = fixed_config(width, degree)
    kernel.fn[grid](*args, **constants, **config)


# ---------------------------------------------------------------------------
# Symmetric patterns
# ---------------------------------------------------------------------------
# Patterns found symmetric or not, by the id of their column array (the
# entry holds weak references, checked, and leaves with the array): one
# comparison (one host synchronisation) per pattern.
_SYMMETRY: Dict[int, Tuple] = {}


def pattern_is_symmetric(
    rowptr: Tensor, col: Tensor, rowptr_t: Tensor, col_t: Tensor
) -> bool:
    r"""Whether the CSR arrays of a matrix equal those of its transpose
    (a symmetric pattern, as :func:`~apnet_pyg.nn.functional.
    edge_index_arrays` builds one: columns ascending in both). Compared
    once per pattern (one host synchronisation), remembered while its
    arrays live, unmodified; under CUDA-graph capture an unseen pattern
    counts as not symmetric (no synchronisation)."""
    if rowptr.numel() != rowptr_t.numel() or col.numel() != col_t.numel():
        return False
    if col is col_t and rowptr is rowptr_t:
        return True
    arrays = (col, col_t, rowptr, rowptr_t)
    versions = tuple(array._version for array in arrays)
    seen = _SYMMETRY.get(id(col))
    if (
        seen is not None
        and all(ref() is array for ref, array in zip(seen[0], arrays))
        and seen[1] == versions
    ):
        return seen[2]
    if _capturing(col.device):
        return False
    symmetric = bool(torch.equal(rowptr, rowptr_t)) and bool(
        torch.equal(col, col_t)
    )
    if seen is None:
        weakref.finalize(col, _SYMMETRY.pop, id(col), None)
    refs = tuple(weakref.ref(array) for array in arrays)
    _SYMMETRY[id(col)] = (refs, versions, symmetric)
    return symmetric


def uses_symmetric_backward(
    same_h: bool, need_h: bool, num_x: int, num_h: int, symmetric: bool
) -> bool:
    r"""Whether the backward pass takes the one-pass symmetric kernel:
    one :math:`\mathbf{h}` on both sides, its gradient wanted, a symmetric
    pattern, and :math:`F \leq H` (it gathers :math:`H + 2F` features an
    entry, the column and row passes :math:`2H + F`)."""
    return same_h and need_h and num_x <= num_h and symmetric


# ---------------------------------------------------------------------------
# Launches (the custom operators' implementations)
# ---------------------------------------------------------------------------
def accumulation_dtype(*tensors: Optional[Tensor]) -> torch.dtype:
    r"""float64 if any of :obj:`tensors` is, else float32."""
    double = any(t is not None and t.dtype == torch.float64 for t in tensors)
    return torch.float64 if double else torch.float32


def _triton_dtype(dtype: torch.dtype):
    import triton.language as tl

    return tl.float64 if dtype == torch.float64 else tl.float32


def _or(tensor: Optional[Tensor], dummy: Tensor) -> Tensor:
    # A pointer argument the kernel never reads (its flag is off).
    return dummy if tensor is None else tensor


def _as_bytes(mask: Optional[Tensor]) -> Optional[Tensor]:
    # A bool tensor read as uint8 (no copy): the kernels compare with 0.
    return None if mask is None else mask.contiguous().view(torch.uint8)


def _stride(tensor: Optional[Tensor]) -> int:
    # Read with its stride: an expanded scalar (stride 0) is not copied.
    return 0 if tensor is None else tensor.stride(0)


def _dropout_args(
    dropout_seed: Optional[Tensor], dropout: float, count: int, dummy: Tensor
) -> Tuple:
    r"""The arguments attention dropout's draws take in every kernel: the
    seed (:obj:`dummy` where there is none, never read), the probability,
    what a kept coefficient is multiplied by (:math:`1 / (1 - p)`, and
    :math:`0` for :math:`p = 1`) and the number of draws before the
    self-loops' (:obj:`count`)."""
    dropout = float(dropout)
    keep_scale = 0.0 if dropout >= 1 else 1.0 / (1.0 - dropout)
    return (_or(dropout_seed, dummy), dropout, keep_scale, count)


def _forward_impl(
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    gamma: Tensor,
    log_weight: Optional[Tensor],
    loop_kept: Optional[Tensor],
    loop_log_weight: Optional[Tensor],
    rowptr: Tensor,
    col: Tensor,
    dropout_seed: Optional[Tensor],
    dropout: float,
) -> Tuple[Tensor, Tensor, Tensor]:
    num_dst, num_x, num_h = rowptr.numel() - 1, x.size(1), h_dst.size(1)
    acc = accumulation_dtype(x, h_dst, h_src)
    out = x.new_empty(num_dst, num_x)
    # The output in the accumulation dtype too, where x's is narrower: the
    # backward pass's D_i = <dL/do_i, o_i> cancels against g_ij, and an o_i
    # rounded to half precision cost the temperature's gradient ~8%.
    store_acc = x.dtype != acc
    out_acc = x.new_empty((num_dst, num_x) if store_acc else (0,), dtype=acc)
    lse = x.new_empty(num_dst, dtype=acc)
    if num_dst == 0:
        return out, lse, out_acc
    x, h_dst = x.contiguous(), h_dst.contiguous()
    h_src = h_dst if h_src is None else h_src.contiguous()
    if log_weight is not None:
        log_weight = log_weight.contiguous()
    block_x, block_h = feature_block(num_x), feature_block(num_h)
    _launch(
        'forward_kernel',
        (num_dst,),
        (
            x,
            h_dst,
            h_src,
            gamma,
            _or(log_weight, gamma),
            _or(_as_bytes(loop_kept), gamma),
            _or(loop_log_weight, gamma),
            _stride(loop_log_weight),
            rowptr,
            col,
            out,
            _or(out_acc if store_acc else None, gamma),
            lse,
            *_dropout_args(dropout_seed, dropout, col.numel(), gamma),
            num_x,
            num_h,
            degree_bucket(col.numel(), num_dst),
        ),
        dict(
            HAS_WEIGHT=log_weight is not None,
            HAS_LOOPS=loop_kept is not None,
            HAS_LOOP_WEIGHT=loop_log_weight is not None,
            HAS_DROPOUT=dropout_seed is not None,
            STORE_ACC=store_acc,
            BLOCK_X=block_x,
            BLOCK_H=block_h,
            ACC=_triton_dtype(acc),
            EPS=NORM_EPS,
        ),
        col.numel(),
        x.device,
    )
    return out, lse, out_acc


def _forward_fake(
    x,
    h_dst,
    h_src,
    gamma,
    log_weight,
    loop_kept,
    loop_log_weight,
    rowptr,
    col,
    dropout_seed,
    dropout,
):
    acc = accumulation_dtype(x, h_dst, h_src)
    num_dst = rowptr.size(0) - 1
    store_acc = x.dtype != acc
    return (
        x.new_empty(num_dst, x.size(1)),
        x.new_empty(num_dst, dtype=acc),
        x.new_empty((num_dst, x.size(1)) if store_acc else (0,), dtype=acc),
    )


def _gradients(
    inputs: Tuple[Optional[Tensor], ...], needed: Tuple[bool, ...], x: Tensor
) -> List[Tensor]:
    r"""Uninitialised, contiguous gradients of the inputs :obj:`needed`;
    the others empty (no two outputs of an operator may alias)."""
    return [
        value.new_empty(value.shape) if need else x.new_empty(0)
        for value, need in zip(inputs, needed)
    ]


def _needed(needs_grad, h_src, log_weight, loop_log_weight) -> Tuple:
    need_x, need_h_dst, need_h_src, need_gamma, need_weight, need_loop = (
        needs_grad
    )
    if h_src is None:  # One tensor on both sides: one gradient.
        need_h_dst, need_h_src = need_h_dst or need_h_src, False
    return (
        need_x,
        need_h_dst,
        need_h_src,
        need_gamma,
        need_weight and log_weight is not None,
        need_loop and loop_log_weight is not None,
    )


def _backward_impl(
    grad_out: Tensor,
    out: Tensor,
    lse: Tensor,
    x: Tensor,
    h_dst: Tensor,
    h_src: Optional[Tensor],
    gamma: Tensor,
    log_weight: Optional[Tensor],
    loop_kept: Optional[Tensor],
    loop_log_weight: Optional[Tensor],
    rowptr: Tensor,
    col: Tensor,
    rowptr_t: Tensor,
    col_t: Tensor,
    perm_t: Tensor,
    dropout_seed: Optional[Tensor],
    dropout: float,
    needs_grad: List[bool],
) -> Tuple[Tensor, ...]:
    needed = _needed(needs_grad, h_src, log_weight, loop_log_weight)
    need_x, need_h_dst, need_h_src, need_gamma, need_weight, need_loop = needed
    same_h = h_src is None
    num_dst, num_src = rowptr.numel() - 1, rowptr_t.numel() - 1
    num_x, num_h = x.size(1), h_dst.size(1)
    acc = accumulation_dtype(x, h_dst, h_src)
    # The kernels index rows as contiguous: inputs made so, and gradients
    # allocated so (not empty_like, which keeps a transposed layout).
    x, h_dst, grad_out = (
        x.contiguous(),
        h_dst.contiguous(),
        grad_out.contiguous(),
    )
    h_src_rows = h_dst if same_h else h_src.contiguous()
    if log_weight is not None:
        log_weight = log_weight.contiguous()
    grads = _gradients(
        (x, h_dst, h_src, gamma, log_weight, loop_log_weight), needed, x
    )
    grad_x, grad_h_dst, grad_h_src = grads[:3]
    # dL/dz_ij: needed by every gradient but x's.
    need_z = any(needed[1:])
    symmetric = uses_symmetric_backward(
        same_h,
        need_h_dst,
        num_x,
        num_h,
        num_dst > 0 and pattern_is_symmetric(rowptr, col, rowptr_t, col_t),
    )
    # dL/dz per entry, in pattern order (also the log weights' gradient),
    # where the weights or the row pass need it.
    store_z = need_weight or (need_h_dst and not symmetric)
    grad_z = lse.new_empty(col.numel() if store_z else 0)
    # Written by the kernels for every row where self-loops are given
    # (0 where one is not kept); zeros without them (unchecked input).
    grad_loop = (lse.new_empty if loop_kept is not None else lse.new_zeros)(
        num_dst if need_loop else 0
    )
    # One partial sum of dL/dgamma a program (every one writes its own).
    gamma_parts = lse.new_empty(num_src if need_z else 0)
    common = dict(
        HAS_WEIGHT=log_weight is not None,
        HAS_LOOPS=loop_kept is not None,
        HAS_LOOP_WEIGHT=loop_log_weight is not None,
        HAS_DROPOUT=dropout_seed is not None,
        ACC=_triton_dtype(acc),
        EPS=NORM_EPS,
    )
    drawn = _dropout_args(dropout_seed, dropout, col.numel(), gamma)
    block_x, block_h = feature_block(num_x), feature_block(num_h)
    loops = _or(_as_bytes(loop_kept), gamma)
    loop_weight = _or(loop_log_weight, gamma)

    delta = lse.new_empty(num_dst if need_z else 0)
    if need_z and num_dst > 0:
        # D_i = <dL/do_i, o_i>, from the output in the accumulation dtype.
        rows = max(1, 4096 // block_x)
        kernels.output_dot_kernel[(triton.cdiv(num_dst, rows),)](
            grad_out,
            out,
            delta,
            num_dst,
            num_x,
            BLOCK_R=rows,
            BLOCK_X=block_x,
            ACC=common['ACC'],
            num_warps=4,
        )

    if symmetric:
        _launch(
            'symmetric_backward_kernel',
            (num_dst,),
            (
                x,
                h_dst,
                gamma,
                _or(log_weight, gamma),
                loops,
                loop_weight,
                _stride(loop_log_weight),
                rowptr,
                col,
                perm_t,
                grad_out,
                lse,
                delta,
                grad_x if need_x else x.new_empty(x.shape),
                grad_h_dst,
                _or(grad_z if store_z else None, gamma),
                _or(grad_loop if need_loop else None, gamma),
                gamma_parts,
                *drawn,
                num_x,
                num_h,
                degree_bucket(col.numel(), num_dst),
            ),
            dict(
                STORE_Z=need_weight,
                STORE_LOOP=need_loop,
                BLOCK_X=block_x,
                BLOCK_H=block_h,
                **common,
            ),
            col.numel(),
            x.device,
        )
    else:
        # Columns: dL/dx, dL/dh_src (for h_src = h_dst, its part of the one
        # gradient, in the accumulation dtype), dL/dz per entry.
        partial = None
        if same_h and need_h_dst:
            partial = (
                grad_h_dst
                if grad_h_dst.dtype == acc
                else h_dst.new_empty(h_dst.shape, dtype=acc)
            )
        column_grad_h = (
            partial if same_h else grad_h_src if need_h_src else None
        )
        need_columns = need_x or need_z
        if need_columns and num_src > 0:
            _launch(
                'column_backward_kernel',
                (num_src,),
                (
                    x,
                    h_dst,
                    h_src_rows,
                    gamma,
                    _or(log_weight, gamma),
                    loops,
                    loop_weight,
                    _stride(loop_log_weight),
                    rowptr_t,
                    col_t,
                    perm_t,
                    grad_out,
                    lse,
                    _or(delta if need_z else None, gamma),
                    _or(grad_x if need_x else None, gamma),
                    _or(column_grad_h, gamma),
                    _or(grad_z if store_z else None, gamma),
                    _or(grad_loop if need_loop else None, gamma),
                    gamma_parts if need_z else gamma,
                    *drawn,
                    num_dst,
                    num_x,
                    num_h,
                    degree_bucket(col_t.numel(), num_src),
                ),
                dict(
                    NEED_X=need_x,
                    NEED_Z=need_z,
                    NEED_H_SRC=column_grad_h is not None,
                    STORE_Z=store_z,
                    STORE_LOOP=need_loop,
                    SAME_H=same_h,
                    BLOCK_X=block_x,
                    BLOCK_H=block_h,
                    **common,
                ),
                col.numel(),
                x.device,
            )
        if need_h_dst and num_dst > 0:
            # Rows: dL/dh_dst from the stored dL/dz (plus the column part).
            _launch(
                'row_backward_kernel',
                (num_dst,),
                (
                    h_dst,
                    h_src_rows,
                    gamma,
                    rowptr,
                    col,
                    grad_z,
                    _or(partial, gamma),
                    grad_h_dst,
                    num_x,
                    num_h,
                    degree_bucket(col.numel(), num_dst),
                ),
                dict(
                    ADD_PARTIAL=partial is not None,
                    BLOCK_H=block_h,
                    ACC=common['ACC'],
                    EPS=NORM_EPS,
                ),
                col.numel(),
                x.device,
            )
    grad_gamma, grad_weight, grad_loop_weight = grads[3:]
    if need_gamma:
        # One partial sum a program, summed here: deterministic.
        grad_gamma = gamma_parts.sum().to(gamma.dtype).reshape(gamma.shape)
    if need_weight:
        grad_weight = grad_z.to(log_weight.dtype)
    if need_loop:
        grad_loop_weight = grad_loop.to(loop_log_weight.dtype)
    return (
        grad_x,
        grad_h_dst,
        grad_h_src,
        grad_gamma,
        grad_weight,
        (grad_loop_weight),
    )


def _backward_fake(
    grad_out,
    out,
    lse,
    x,
    h_dst,
    h_src,
    gamma,
    log_weight,
    loop_kept,
    loop_log_weight,
    rowptr,
    col,
    rowptr_t,
    col_t,
    perm_t,
    dropout_seed,
    dropout,
    needs_grad,
):
    needed = _needed(needs_grad, h_src, log_weight, loop_log_weight)
    return tuple(
        _gradients(
            (x, h_dst, h_src, gamma, log_weight, loop_log_weight), needed, x
        )
    )


def _on_device_of_first(function: Callable) -> Callable:
    r"""Runs :obj:`function` with its first tensor's CUDA device current:
    Triton launches on the current device, which for tensors on
    :obj:`cuda:1` under a current :obj:`cuda:0` is the wrong one."""

    @functools.wraps(function)
    def on_device(*args):
        if args[0].device.type != 'cuda':
            return function(*args)
        with torch.cuda.device(args[0].device):
            return function(*args)

    return on_device


# Under torch.compile (and for meta tensors) one opaque operator each way.
forward_op = custom_kernel(
    'triton_propagate',
    '(Tensor x, Tensor h_dst, Tensor? h_src, Tensor gamma, '
    'Tensor? log_weight, Tensor? loop_kept, Tensor? loop_log_weight, '
    'Tensor rowptr, Tensor col, Tensor? dropout_seed, float dropout) -> '
    '(Tensor, Tensor, Tensor)',
    _forward_fake,
)(_on_device_of_first(_forward_impl))

backward_op = custom_kernel(
    'triton_propagate_backward',
    '(Tensor grad_out, Tensor out, Tensor lse, Tensor x, Tensor h_dst, '
    'Tensor? h_src, Tensor gamma, Tensor? log_weight, Tensor? loop_kept, '
    'Tensor? loop_log_weight, Tensor rowptr, Tensor col, Tensor rowptr_t, '
    'Tensor col_t, Tensor perm_t, Tensor? dropout_seed, float dropout, '
    'bool[] needs_grad) -> '
    '(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)',
    _backward_fake,
)(_on_device_of_first(_backward_impl))


@_on_device_of_first
def dropout_scales(
    dropout_seed: Tensor, dropout: float, count: int, dtype: torch.dtype
) -> Tensor:
    r"""The attention dropout factors the kernels draw from
    :obj:`dropout_seed` for draws :math:`0, \ldots,` :obj:`count`
    :math:`- 1` (the entries, then a self-loop a row): :math:`0` or
    :math:`1 / (1 -` :obj:`dropout` :math:`)`, in :obj:`dtype`."""
    out = torch.empty(count, dtype=dtype, device=dropout_seed.device)
    if count:
        block = 1024
        seed, *drawn = _dropout_args(dropout_seed, dropout, count, out)
        kernels.dropout_scale_kernel[(triton.cdiv(count, block),)](
            seed, out, *drawn, BLOCK=block, ACC=_triton_dtype(dtype)
        )
    return out
