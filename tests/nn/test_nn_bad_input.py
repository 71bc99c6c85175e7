r"""Bad inputs of apnet_pyg.nn (APNetConv, DenseAPNetConv, the functional
operators, the models), one row each, and the error each gets; the row and
the runner are in tests/bad_input.py."""

import math

import torch
from torch_geometric import EdgeIndex
from torch_geometric.utils import to_torch_csr_tensor

from apnet_pyg.nn import APNetConv, DenseAPNetConv
from apnet_pyg.nn.functional import (
    csr_arrays,
    edge_cosine,
    edge_index_arrays,
    sddmm,
    softmax_spmm,
    spmm,
)
from apnet_pyg.nn.models import APNet, CentroidEncoder, RelationHead, kmeans
from tests.helpers.bad_input import (
    ADJ,
    BIPARTITE,
    DX,
    EDGES,
    PATTERN,
    RECT,
    WEIGHT,
    X_DST,
    X_SRC,
    Case,
    Ctx,
    Table,
    X,
    check_row,
    check_table,
)

CASES = Table()
case = CASES.case


def conv(**kwargs) -> APNetConv:
    return APNetConv(6, proj_channels=4, **kwargs)


def dense(**kwargs) -> DenseAPNetConv:
    return DenseAPNetConv(6, proj_channels=4, **kwargs)


def meta(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to('meta')


# ---------------------------------------------------------------------------
# Operators: APNetConv's constructor
# ---------------------------------------------------------------------------
IN_CHANNELS = r"'in_channels' must be a positive integer, or -1"
case(
    'APNetConv/in_channels=0',
    lambda c: APNetConv(0),
    ValueError,
    IN_CHANNELS + r'.*got int 0',
)
case(
    'APNetConv/in_channels=-2',
    lambda c: APNetConv(-2),
    ValueError,
    IN_CHANNELS,
)
case(
    'APNetConv/in_channels=2.5',
    lambda c: APNetConv(2.5),
    ValueError,
    IN_CHANNELS + r'.*float 2.5',
)
case(
    'APNetConv/in_channels="6"',
    lambda c: APNetConv('6'),
    ValueError,
    IN_CHANNELS + r".*str '6'",
)
case(
    'APNetConv/in_channels=True',
    lambda c: APNetConv(True),
    ValueError,
    IN_CHANNELS + r'.*bool',
)
case(
    'APNetConv/in_channels=(6,0)',
    lambda c: APNetConv((6, 0)),
    ValueError,
    r"'in_channels\[1\]' must be a positive integer",
)
case(
    'APNetConv/in_channels=(6,)',
    lambda c: APNetConv((6,)),
    ValueError,
    IN_CHANNELS + r'.*tuple',
)
case(
    'APNetConv/proj_channels=0',
    lambda c: APNetConv(6, proj_channels=0),
    ValueError,
    r"'proj_channels' must be a positive integer or None",
)
case(
    'APNetConv/proj_channels=2.5',
    lambda c: APNetConv(6, proj_channels=2.5),
    ValueError,
    r"'proj_channels' must be a positive integer or None .*float",
)
case(
    'APNetConv/proj_channels="16"',
    lambda c: APNetConv(6, proj_channels='16'),
    ValueError,
    r"'proj_channels' must be a positive integer or None .*str",
)
case(
    'APNetConv/temperature=-1',
    lambda c: conv(temperature=-1.0),
    ValueError,
    r"'temperature' must be at least 0 .*least similar",
)
case(
    'APNetConv/temperature=nan',
    lambda c: conv(temperature=math.nan),
    ValueError,
    r"'temperature' must be finite",
)
case(
    'APNetConv/temperature=inf',
    lambda c: conv(temperature=math.inf),
    ValueError,
    r"'temperature' must be finite",
)
case(
    'APNetConv/temperature=1e39',
    lambda c: conv(temperature=1e39),
    ValueError,
    r"'temperature' must be at most 3.4\d*e\+38",
)
case(
    'APNetConv/temperature="10"',
    lambda c: conv(temperature='10'),
    ValueError,
    r"'temperature' must be a real number \(got str '10'\)",
)
case(
    'APNetConv/temperature=None',
    lambda c: conv(temperature=None),
    ValueError,
    r"'temperature' must be a real number",
)
case(
    'APNetConv/temperature=True',
    lambda c: conv(temperature=True),
    ValueError,
    r"'temperature' must be a real number \(got bool",
)
case(
    'APNetConv/num_steps=0',
    lambda c: conv(num_steps=0),
    ValueError,
    r"'num_steps' must be a positive integer",
)
case(
    'APNetConv/num_steps=1.5',
    lambda c: conv(num_steps=1.5),
    ValueError,
    r"'num_steps' must be a positive integer .*float",
)
case(
    'APNetConv/proj_init="orthogonal"',
    lambda c: conv(proj_init='orthogonal'),
    ValueError,
    r"'proj_init' must be one of \('glorot', 'identity'\)",
)
case(
    'APNetConv/learn_temperature="yes"',
    lambda c: conv(learn_temperature='yes'),
    ValueError,
    r"'learn_temperature' must be True or False",
)
case(
    'APNetConv/add_self_loops="no"',
    lambda c: conv(add_self_loops='no'),
    ValueError,
    r"'add_self_loops' must be True or False \(got str 'no'\)",
)
case(
    'APNetConv/kernel="fused"',
    lambda c: conv(kernel='fused'),
    ValueError,
    r"'kernel' must be one of auto, sparse, triton, message_passing "
    r"\(got 'fused'\)",
)
case(
    'APNetConv/cached="yes"',
    lambda c: conv(cached='yes'),
    ValueError,
    r"'cached' must be True or False",
)
case(
    'APNetConv/aggr="mean"',
    lambda c: conv(aggr='mean'),
    ValueError,
    r"cannot honour the MessagePassing argument aggr='mean'; pass "
    r"kernel='message_passing'",
)
case(
    'APNetConv/node_dim=1',
    lambda c: conv(node_dim=1),
    ValueError,
    r"argument node_dim=1; pass kernel='message_passing'",
)
case(
    'APNetConv/decomposed_layers=2',
    lambda c: conv(decomposed_layers=2),
    ValueError,
    r"argument decomposed_layers=2; pass kernel='message_passing'",
)

# ---------------------------------------------------------------------------
# Operators: APNetConv's forward
# ---------------------------------------------------------------------------
case(
    'APNetConv/x-3d',
    lambda c: conv()(X[None], EDGES),
    ValueError,
    r"'x' must have 2 dimensions",
)
case(
    'APNetConv/x-wrong-channels',
    lambda c: conv()(X[:, :5], EDGES),
    ValueError,
    r"'x' must have 6 features",
)
case(
    'APNetConv/x-long',
    lambda c: conv()(X.long(), EDGES),
    ValueError,
    r"'x' must be a floating-point tensor",
)
case(
    'APNetConv/x-list',
    lambda c: conv()(X.tolist(), EDGES),
    ValueError,
    r"'x' must be a tensor or a pair \(x_src, x_dst\)",
)
case(
    'APNetConv/x-float64-layer-float32',
    lambda c: conv()(X.double(), EDGES),
    ValueError,
    r"'x' has dtype torch.float64 but the layer's parameters "
    r'torch.float32',
)
case(
    'APNetConv/x-float16-layer-float32',
    lambda c: conv()(X.half(), EDGES),
    ValueError,
    r"'x' has dtype torch.float16 but the layer's parameters",
)
case(
    'APNetConv/edge_index-1d',
    lambda c: conv()(X, EDGES[0]),
    ValueError,
    r"'edge_index' must have shape \[2, num_edges\]",
)
case(
    'APNetConv/edge_index-3-rows',
    lambda c: conv()(X, torch.cat([EDGES, EDGES[:1]])),
    ValueError,
    r"'edge_index' must have shape \[2, num_edges\]",
)
case(
    'APNetConv/edge_index-float',
    lambda c: conv()(X, EDGES.float()),
    ValueError,
    r"'edge_index' must hold int64 or int32 indices",
)
case(
    'APNetConv/edge_index-bool',
    lambda c: conv()(X, EDGES.bool()),
    ValueError,
    r"'edge_index' must hold int64 or int32 indices",
)
# uint8 indices reached the kernels (NaN on the fused path).
case(
    'APNetConv/edge_index-uint8',
    lambda c: conv()(X, EDGES.to(torch.uint8)),
    ValueError,
    r"'edge_index' must hold int64 or int32 indices \(got dtype "
    r'torch.uint8\)',
)
case(
    'APNetConv/sparse-adjacency-integer-values',
    lambda c: conv()(
        X,
        torch.sparse_coo_tensor(
            EDGES.flip(0), torch.full((EDGES.size(1),), 5), (5, 5)
        ),
    ),
    ValueError,
    r"'edge_index', a sparse adjacency, holds integer values "
    r'\(torch.int64\)',
)
case(
    'APNetConv/edge_index-list',
    lambda c: conv()(X, EDGES.tolist()),
    ValueError,
    r"'edge_index' must be a torch.Tensor",
)
case(
    'APNetConv/edge_index-out-of-range',
    lambda c: conv()(X, torch.tensor([[0], [5]])),
    RuntimeError,
    r"'edge_index' holds node indices outside \[0, 4\] for 5 nodes",
)
case(
    'APNetConv/edge_index-negative',
    lambda c: conv()(X, torch.tensor([[-1], [2]])),
    RuntimeError,
    r"'edge_index' holds node indices outside \[0, 4\]",
)
case(
    'APNetConv/edge_index-out-of-range-debug',
    lambda c: conv()(X, torch.tensor([[0], [7]])),
    ValueError,
    r"'edge_index' holds node indices in \[7, 7\], outside \[0, 4\]",
    debug=True,
)
case(
    'APNetConv/edge_index-other-device',
    lambda c: conv()(meta(X), EDGES),
    ValueError,
    r"'edge_index' is on cpu but 'x' on meta",
)
case(
    'APNetConv/edge_weight-short',
    lambda c: conv()(X, EDGES, WEIGHT[:-1]),
    ValueError,
    r"'edge_weight' must have shape \[6\] \(one weight per "
    r'edge',
)
case(
    'APNetConv/edge_weight-2d',
    lambda c: conv()(X, EDGES, WEIGHT[None]),
    ValueError,
    r"'edge_weight' must have shape \[6\]",
)
case(
    'APNetConv/edge_weight-long',
    lambda c: conv()(X, EDGES, torch.ones(6, dtype=torch.long)),
    ValueError,
    r"'edge_weight' must be a floating-point tensor",
)
case(
    'APNetConv/edge_weight-list',
    lambda c: conv()(X, EDGES, WEIGHT.tolist()),
    ValueError,
    r"'edge_weight' must be a torch.Tensor",
)
case(
    'APNetConv/edge_weight-other-device',
    lambda c: conv().to('meta')(meta(X), meta(EDGES), WEIGHT),
    ValueError,
    r"'edge_weight' is on cpu but 'x' on meta",
)
case(
    'APNetConv/edge_weight-zero-debug',
    lambda c: conv()(X, EDGES, WEIGHT * 0),
    ValueError,
    r"'edge_weight' must be strictly positive",
    debug=True,
)
case(
    'APNetConv/edge_weight-negative-debug',
    lambda c: conv()(X, EDGES, -WEIGHT),
    ValueError,
    r"'edge_weight' must be strictly positive",
    debug=True,
)
case(
    'APNetConv/edge_weight-inf-debug',
    lambda c: conv()(X, EDGES, WEIGHT + math.inf),
    ValueError,
    r"'edge_weight' contains NaN or infinite values",
    debug=True,
)
case(
    'APNetConv/x-nan-debug',
    lambda c: conv()(X + math.nan, EDGES),
    ValueError,
    r"'x' contains NaN or infinite values",
    debug=True,
)
case(
    'APNetConv/size-mismatch',
    lambda c: conv()(X, EDGES, size=(5, 6)),
    ValueError,
    r"'size' must be \(num_source_nodes, num_target_nodes\) = "
    r'\(5, 5\)',
)
case(
    'APNetConv/meta-attention-with-self-loops',
    lambda c: conv().to('meta')(
        meta(X), meta(EDGES), return_attention_weights=True
    ),
    ValueError,
    r'return_attention_weights on meta tensors.*pass '
    r'add_self_loops=False',
)
case(
    'APNetConv/sparse-adj-target_to_source',
    lambda c: conv(flow='target_to_source')(
        X, to_torch_csr_tensor(EDGES, size=(5, 5))
    ),
    ValueError,
    r"'edge_index' is a sparse adjacency.*needs flow='source_to_target'",
)
case(
    'APNetConv/sparse-adj-and-edge_weight',
    lambda c: conv()(X, to_torch_csr_tensor(EDGES, size=(5, 5)), WEIGHT),
    ValueError,
    r'either as the values of the sparse adjacency or as '
    r"'edge_weight'",
)
case(
    'APNetConv/sparse-adj-wrong-shape',
    lambda c: conv()(X, to_torch_csr_tensor(EDGES, size=(6, 6))),
    ValueError,
    r"'edge_index', a sparse adjacency adj_t, must have shape "
    r'\[5, 5\]',
)
case(
    'APNetConv/EdgeIndex-wrong-sparse-size',
    lambda c: conv()(X, EdgeIndex(EDGES, sparse_size=(7, 7))),
    ValueError,
    r"'edge_index' \(an EdgeIndex\) has sparse size \(7, 7\), more nodes "
    r"than 'x'",
)
case(
    'APNetConv/bipartite-target-to-source',
    lambda c: APNetConv(
        (6, 4),
        3,
        learn_step_weights=False,
        teleport=None,
        flow='target_to_source',
    )((X_SRC, X_DST), BIPARTITE.flip(0)),
    ValueError,
    r"A bipartite 'x' needs flow='source_to_target'.*flip edge_index",
)
case(
    'APNetConv/bipartite-layer-single-x',
    lambda c: APNetConv((6, 4), 3)(X, EDGES),
    ValueError,
    r'has one projection per side.*needs x=\(x_src, x_dst\)',
)
case(
    'APNetConv/bipartite-x_dst-None',
    lambda c: conv()((X_SRC, None), BIPARTITE),
    ValueError,
    r"'x' must be a tensor or a pair \(x_src, x_dst\).*x_dst cannot be "
    r'None',
)
case(
    'APNetConv/bipartite-x-triple',
    lambda c: conv()((X_SRC, X_SRC, X_SRC), BIPARTITE),
    ValueError,
    r"'x' must be a tensor or a pair \(x_src, x_dst\)",
)
case(
    'APNetConv/bipartite-x[1]-wrong-channels',
    lambda c: APNetConv((6, 5), 3)((X_SRC, X_DST), BIPARTITE),
    ValueError,
    r"'x\[1\]' must have 5 features",
)
case(
    'APNetConv/bipartite-identity-different-widths',
    lambda c: APNetConv(-1, proj_channels=None)((X_SRC, X_DST), BIPARTITE),
    ValueError,
    r'proj_channels=None.*x\[0\] and x\[1\]',
)
case(
    'APNetConv/bipartite-x[1]-other-device',
    lambda c: APNetConv((6, 4), 3)((X_SRC, meta(X_DST)), BIPARTITE),
    ValueError,
    r"'x\[1\]' is on meta but 'x\[0\]' on cpu",
)
case(
    'APNetConv/bipartite-x[0]-float64',
    lambda c: APNetConv((6, 4), 3)((X_SRC.double(), X_DST), BIPARTITE),
    ValueError,
    r"'x\[0\]' has dtype torch.float64 but the layer's",
)
case(
    'APNetConv/bipartite-x[1]-nan-debug',
    lambda c: APNetConv((6, 4), 3, learn_step_weights=False, teleport=None)(
        (X_SRC, X_DST + math.nan), BIPARTITE
    ),
    ValueError,
    r"'x\[1\]' contains NaN or infinite values",
    debug=True,
)
case(
    'APNetConv/bipartite-step-weights-widths',
    lambda c: APNetConv((6, 4), 3)((X_SRC, X_DST), BIPARTITE),
    ValueError,
    r'With step weights \(teleport=0.2\) the output mixes in the input '
    r'x\[1\].*same number of features \(got 6 and 4\).*pass '
    r'teleport=None, learn_step_weights=False',
)
case(
    'APNetConv/learn_step_weights-not-bool',
    lambda c: APNetConv(6, learn_step_weights='yes'),
    ValueError,
    r"'learn_step_weights' must be",
)
case(
    'APNetConv/teleport-above-one',
    lambda c: APNetConv(6, teleport=1.5),
    ValueError,
    r"'teleport' must lie in \[0, 1\] \(got 1.5\)",
)
case(
    'DenseAPNetConv/teleport-not-number',
    lambda c: DenseAPNetConv(6, teleport='half'),
    ValueError,
    r"'teleport' must be a real number",
)

# ---------------------------------------------------------------------------
# Operators: DenseAPNetConv
# ---------------------------------------------------------------------------
case(
    'DenseAPNetConv/in_channels-pair',
    lambda c: DenseAPNetConv((6, 6)),
    ValueError,
    r"takes one node set, so 'in_channels' must be an int",
)
case(
    'DenseAPNetConv/in_channels=0',
    lambda c: DenseAPNetConv(0),
    ValueError,
    IN_CHANNELS,
)
case(
    'DenseAPNetConv/temperature=-1',
    lambda c: dense(temperature=-1),
    ValueError,
    r"'temperature' must be at least 0",
)
case(
    'DenseAPNetConv/temperature="10"',
    lambda c: dense(temperature='10'),
    ValueError,
    r"'temperature' must be a real number",
)
case(
    'DenseAPNetConv/x-4d',
    lambda c: dense()(DX[None], ADJ),
    ValueError,
    r"'x' must have 3 dimensions",
)
case(
    'DenseAPNetConv/x-wrong-channels',
    lambda c: dense()(DX[..., :4], ADJ),
    ValueError,
    r"'x' must have 6 features",
)
case(
    'DenseAPNetConv/x-int',
    lambda c: dense()(DX.int(), ADJ),
    ValueError,
    r"'x' must be a floating-point tensor",
)
case(
    'DenseAPNetConv/x-float64-layer-float32',
    lambda c: dense()(DX.double(), ADJ),
    ValueError,
    r"'x' has dtype torch.float64 but the layer's parameters",
)
case(
    'DenseAPNetConv/adj-wrong-shape',
    lambda c: dense()(DX, ADJ[:, :4]),
    ValueError,
    r"'adj' must have shape \[2, 5, 5\] or \[5, 5\]",
)
case(
    'DenseAPNetConv/adj-batch-mismatch',
    lambda c: dense()(DX, torch.cat([ADJ, ADJ[:1]])),
    ValueError,
    r"'adj' must have shape \[2, 5, 5\]",
)
case(
    'DenseAPNetConv/adj-list',
    lambda c: dense()(DX, ADJ.tolist()),
    ValueError,
    r"'adj' must be a torch.Tensor",
)
case(
    'DenseAPNetConv/adj-complex',
    lambda c: dense()(DX, ADJ.to(torch.complex64)),
    ValueError,
    r"'adj' must hold real weights or booleans",
)
case(
    'DenseAPNetConv/adj-other-device',
    lambda c: dense()(DX, meta(ADJ)),
    ValueError,
    r"'adj' is on meta but 'x' on cpu",
)
# tests/nn/dense/test_dense_apnet_conv.py has the debug-mode value checks
# (negative 'adj', NaN 'x').
case(
    'DenseAPNetConv/mask-wrong-shape',
    lambda c: dense()(DX, ADJ, mask=torch.ones(2, 4, dtype=torch.bool)),
    ValueError,
    r"'mask' must have shape \[2, 5\]",
)
case(
    'DenseAPNetConv/mask-list',
    lambda c: dense()(DX, ADJ, mask=[[True] * 5] * 2),
    ValueError,
    r"'mask' must be a torch.Tensor",
)
case(
    'DenseAPNetConv/mask-other-device',
    lambda c: dense()(DX, ADJ, mask=meta(torch.ones(2, 5))),
    ValueError,
    r"'mask' is on meta but 'x' on cpu",
)
case(
    'DenseAPNetConv/mask-0.5',
    lambda c: dense()(DX, ADJ, mask=torch.full((2, 5), 0.5)),
    ValueError,
    r"'mask' must be a boolean \(or 0/1 integer\) tensor",
)
case(
    'DenseAPNetConv/mask-2-debug',
    lambda c: dense()(DX, ADJ, mask=torch.full((2, 5), 2)),
    ValueError,
    r"'mask' must hold only 0 and 1 \(got 2\)",
    debug=True,
)

# ---------------------------------------------------------------------------
# Operators: apnet_pyg.nn.functional
# ---------------------------------------------------------------------------
case(
    'edge_index_arrays/float',
    lambda c: edge_index_arrays(EDGES.float(), (5, 5)),
    ValueError,
    r"'edge_index' must be a \[2, nnz\] tensor of integer",
)
case(
    'edge_index_arrays/1d',
    lambda c: edge_index_arrays(EDGES[0], (5, 5)),
    ValueError,
    r"'edge_index' must be a \[2, nnz\] tensor of integer",
)
case(
    'edge_index_arrays/dim-2',
    lambda c: edge_index_arrays(EDGES, (5, 5), 2),
    ValueError,
    r"'dim' must be 0 or 1",
)
case(
    'edge_index_arrays/size-not-a-pair',
    lambda c: edge_index_arrays(EDGES, 5),
    ValueError,
    r"'size' must be a pair \(num_rows, num_cols\)",
)
case(
    'edge_index_arrays/size-negative',
    lambda c: edge_index_arrays(EDGES, (5, -1)),
    ValueError,
    r"'size\[1\]' must be at least 0",
)
case(
    'edge_index_arrays/index-out-of-range',
    lambda c: edge_index_arrays(EDGES, (5, 3)),
    RuntimeError,
    r"'edge_index' holds indices outside the size \(5, 3\)",
)
case(
    'csr_arrays/unsorted',
    lambda c: csr_arrays(EdgeIndex(EDGES, sparse_size=(5, 5))),
    ValueError,
    r"'edge_index' must be a sorted EdgeIndex",
)
case(
    'spmm/pattern-not-a-pattern',
    lambda c: spmm(EDGES, WEIGHT, X),
    ValueError,
    r"'edge_index' must be an EdgeIndex sorted by row",
)
case(
    'spmm/edge-index-without-size',
    lambda c: spmm(
        EdgeIndex(EDGES[:, [0, 5, 1, 2, 3, 4]], sort_order='row'), WEIGHT, X
    ),
    ValueError,
    r"'edge_index' \(an EdgeIndex\) has no sparse size",
)
case(
    'spmm/values-wrong-length',
    lambda c: spmm(PATTERN, WEIGHT[:4], X),
    ValueError,
    r"'values' must have 6 rows, the pattern's number of "
    r'entries',
)
case(
    'spmm/x-wrong-rows',
    lambda c: spmm(PATTERN, WEIGHT, X[:4]),
    ValueError,
    r"'x' must have 5 rows, the pattern's number of columns",
)
case(
    'spmm/x-1d',
    lambda c: spmm(PATTERN, WEIGHT, X[0]),
    ValueError,
    r"'x' must have 2 dimensions",
)
case(
    'spmm/dtype-mismatch',
    lambda c: spmm(PATTERN, WEIGHT.double(), X),
    ValueError,
    r"'values' has dtype torch.float64 but 'x' torch.float32",
)
case(
    'spmm/x-other-device',
    lambda c: spmm(PATTERN, WEIGHT, meta(X)),
    ValueError,
    r"'x' is on meta but 'pattern' on cpu",
)
case(
    'sddmm/a-wrong-rows',
    lambda c: sddmm(RECT, X[:4], X[:4]),
    ValueError,
    r"'a' must have 3 rows, the pattern's number of rows",
)
case(
    'sddmm/b-wrong-width',
    lambda c: sddmm(RECT, X[:3], X[:4, :5]),
    ValueError,
    r"'b' and 'a' must have the same number of features",
)
case(
    'edge_cosine/b-None-rectangular',
    lambda c: edge_cosine(RECT, X[:3]),
    ValueError,
    r"b=None \(b = a\) needs a square pattern.*pass 'b'",
)
case(
    'edge_cosine/a-int',
    lambda c: edge_cosine(PATTERN, X.long()),
    ValueError,
    r"'a' must be a floating-point tensor",
)
case(
    'softmax_spmm/logits-wrong-length',
    lambda c: softmax_spmm(PATTERN, WEIGHT[:5], X),
    ValueError,
    r"'logits' must have 6 rows, the pattern's number of entries",
)
case(
    'softmax_spmm/loop_logits-wrong-length',
    lambda c: softmax_spmm(PATTERN, WEIGHT, X, WEIGHT[:4]),
    ValueError,
    r"'loop_logits' must have 5 rows, the pattern's number of rows",
)
case(
    'softmax_spmm/loop_logits-more-rows-than-columns',
    lambda c: softmax_spmm(RECT.t(), WEIGHT[:3], X[:3], X[:4, 0]),
    ValueError,
    r"'loop_logits' needs a pattern with no more rows than "
    r'columns',
)
case(
    'softmax_spmm/scale-wrong-length',
    lambda c: softmax_spmm(PATTERN, WEIGHT, X, None, WEIGHT[:5]),
    ValueError,
    r"'scale' must have 6 rows, the pattern's number of entries",
)
case(
    'softmax_spmm/loop_scale-without-loop_logits',
    lambda c: softmax_spmm(PATTERN, WEIGHT, X, None, None, WEIGHT[:5]),
    ValueError,
    r"'loop_scale' scales the self-loops of 'loop_logits': pass both",
)
case(
    'softmax_spmm/loop_scale-wrong-length',
    lambda c: softmax_spmm(PATTERN, WEIGHT, X, WEIGHT[:5], None, WEIGHT[:4]),
    ValueError,
    r"'loop_scale' must have 5 rows, the pattern's number of rows",
)

# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------
case(
    'CentroidEncoder/attribute_dim=0',
    lambda c: CentroidEncoder(0),
    ValueError,
    r"'attribute_dim' must be a positive integer \(got 0\)",
)
case(
    'CentroidEncoder/attribute_dim=2.5',
    lambda c: CentroidEncoder(2.5),
    ValueError,
    r"'attribute_dim' must be a positive integer \(got float",
)
case(
    'CentroidEncoder/out_channels=-1',
    lambda c: CentroidEncoder(4, out_channels=-1),
    ValueError,
    r"'out_channels' must be a positive integer \(got -1\)",
)
case(
    'CentroidEncoder/num_centroids=0',
    lambda c: CentroidEncoder(4, num_centroids=0),
    ValueError,
    r"'num_centroids' must be a positive integer",
)
case(
    'CentroidEncoder/attributes-wrong-width',
    lambda c: CentroidEncoder(4, 8)(torch.randn(3, 5)),
    ValueError,
    r"'attributes' must have 4 features",
)
case(
    'CentroidEncoder/attributes-1d',
    lambda c: CentroidEncoder(4, 8)(torch.randn(4)),
    ValueError,
    r"'attributes' must have 2 dimensions",
)
case(
    'CentroidEncoder/attributes-nan',
    lambda c: CentroidEncoder(4, 8)(torch.full((3, 4), math.nan)),
    ValueError,
    r"'attributes' contains NaN",
)
case(
    'CentroidEncoder/fit_centroids-fewer-classes-than-centroids',
    lambda c: CentroidEncoder(4, 8, 3).fit_centroids(torch.randn(2, 4)),
    ValueError,
    r"'k' must lie in \[1, 2\] for 2 points \(got 3\)",
)
case(
    'CentroidEncoder/fit_centroids-wrong-width',
    lambda c: CentroidEncoder(4, 8).fit_centroids(torch.randn(5, 3)),
    ValueError,
    r"'seen_attributes' must have 4 features",
)
case(
    'CentroidEncoder/standardize_-one-class',
    lambda c: CentroidEncoder(4, 8).standardize_(torch.randn(1, 4)),
    ValueError,
    r"'seen_attributes' needs at least 2 classes",
)
case(
    'kmeans/k=0',
    lambda c: kmeans(X, 0),
    ValueError,
    r"'k' must lie in \[1, 5\]",
)
case(
    'kmeans/k-above-points',
    lambda c: kmeans(X, 6),
    ValueError,
    r"'k' must lie in \[1, 5\] for 5 points \(got 6\)",
)
case(
    'kmeans/k=2.5',
    lambda c: kmeans(X, 2.5),
    ValueError,
    r"'k' must be an integer \(got float 2.5\)",
)
# tests/nn/models/test_centroid_encoder.py has num_init=0.
case(
    'kmeans/num_iterations=0',
    lambda c: kmeans(X, 2, num_iterations=0),
    ValueError,
    r"'num_iterations' must be a positive integer",
)
case(
    'kmeans/x-nan',
    lambda c: kmeans(X + math.nan, 2),
    ValueError,
    r"'x' contains NaN",
)
case(
    'kmeans/generator-a-seed',
    lambda c: kmeans(X, 2, generator=0),
    ValueError,
    r"'generator' must be a torch.Generator or None",
)
case(
    'RelationHead/score="softmax"',
    lambda c: RelationHead(4, 6, score='softmax'),
    ValueError,
    r"'score' must be one of sigmoid, linear \(got 'softmax'\)",
)
case(
    'RelationHead/class_channels=0',
    lambda c: RelationHead(0, 6),
    ValueError,
    r"'class_channels' must be a positive integer \(got 0\)",
)
case(
    'RelationHead/hidden_channels=-1',
    lambda c: RelationHead(4, 6, hidden_channels=-1),
    ValueError,
    r"'hidden_channels' must be a positive integer \(got -1\)",
)
case(
    'RelationHead/image_channels=2.5',
    lambda c: RelationHead(4, 2.5),
    ValueError,
    r"'image_channels' must be a positive integer",
)
case(
    'RelationHead/class_vectors-wrong-width',
    lambda c: RelationHead(4, 6, 8)(torch.randn(3, 5), X),
    ValueError,
    r"'class_vectors' must have 4 features",
)
case(
    'RelationHead/images-wrong-width',
    lambda c: RelationHead(4, 6, 8)(torch.randn(3, 4), X[:, :5]),
    ValueError,
    r"'images' must have 6 features",
)
case(
    'RelationHead/images-nan',
    lambda c: RelationHead(4, 6, 8)(torch.randn(3, 4), X + math.nan),
    ValueError,
    r"'images' contains NaN",
)
case(
    'RelationHead/block_size=-1',
    lambda c: RelationHead(4, 6, 8)(torch.randn(3, 4), X, block_size=-1),
    ValueError,
    r"'block_size' must be a positive integer or None",
)
case(
    'APNet/graph="gcn"',
    lambda c: APNet(4, 6, 8, 8, graph='gcn'),
    ValueError,
    r"'graph' must be one of learned, wordnet, knn, none \(got "
    r"'gcn'\)",
)
case(
    'APNet/knn_k=0',
    lambda c: APNet(4, 6, 8, 8, graph='knn', knn_k=0),
    ValueError,
    r"'knn_k' must be a positive integer",
)
case(
    'APNet/wordnet-without-class_prior',
    lambda c: APNet(4, 6, 8, 8, graph='wordnet'),
    ValueError,
    r"graph='wordnet' needs 'class_prior'",
)
case(
    'APNet/class_prior-not-square',
    lambda c: APNet(4, 6, 8, 8, graph='wordnet', class_prior=torch.ones(3, 4)),
    ValueError,
    r"'class_prior' must be a square \[C, C\] matrix",
)
case(
    'APNet/class_prior-a-list',
    lambda c: APNet(4, 6, 8, 8, graph='wordnet', class_prior=[[0, 1], [1, 0]]),
    ValueError,
    r"'class_prior' must be a torch.Tensor \(got list\)",
)
case(
    'APNet/class_prior-negative',
    lambda c: APNet(
        4, 6, 8, 8, graph='wordnet', class_prior=-torch.ones(3, 3)
    ),
    ValueError,
    r"'class_prior' must hold finite, non-negative weights",
)
case(
    'APNet/threshold=2',
    lambda c: APNet(4, 6, 8, 8, threshold=2.0),
    ValueError,
    r"'threshold' must lie in \[-1, 1\]",
)
case(
    'APNet/propagation_temperature=-1',
    lambda c: APNet(4, 6, 8, 8, propagation_temperature=-1.0),
    ValueError,
    r"'propagation_temperature' must be at least 0",
)
case(
    'APNet/logit_scale=0',
    lambda c: APNet(4, 6, 8, 8, logit_scale=0.0),
    ValueError,
    r"'logit_scale' must be positive \(got 0\)",
)
case(
    'APNet/logit_scale="30"',
    lambda c: APNet(4, 6, 8, 8, logit_scale='30'),
    ValueError,
    r"'logit_scale' must be a real number",
)
case(
    'APNet/class_vectors-wordnet-without-classes',
    lambda c: APNet(
        4,
        6,
        8,
        8,
        proj_channels=4,
        graph='wordnet',
        class_prior=torch.ones(3, 3),
    ).class_vectors(torch.randn(3, 4)),
    ValueError,
    r"graph='wordnet' needs 'classes'",
)
case(
    'APNet/classes-wrong-count',
    lambda c: APNet(
        4,
        6,
        8,
        8,
        proj_channels=4,
        graph='wordnet',
        class_prior=torch.ones(3, 3),
    ).class_vectors(torch.randn(3, 4), torch.tensor([0, 1])),
    ValueError,
    r"'classes' must hold one index per class vector \(got 2 for 3\)",
)
case(
    'APNet/class_graph-of-graph-none',
    lambda c: APNet(4, 6, 8, 8, graph='none').class_graph(torch.randn(3, 8)),
    ValueError,
    r"graph='none' builds no class graph",
)
case(
    'APNet/images-wrong-width',
    lambda c: APNet(4, 6, 8, 8, proj_channels=4)(X[:, :5], torch.randn(3, 4)),
    ValueError,
    r"'images' must have 6 features",
)


def test_the_table():
    check_table(CASES)


@CASES.parametrize()
def test_bad_input(row: Case, bad_input_ctx: Ctx, capsys):
    check_row(row, bad_input_ctx, capsys)
