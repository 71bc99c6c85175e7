r"""Every bad input we know of, and the error it gets: one row per input.

Each row (:class:`Case`) is an id, a call, the exception type (or, for the
command line, the exit status) and a regular expression the message must
match, which names the argument, flag or file at fault. Every message must
be one line; the command line prints exactly one line, ``error: ...``
(status 1), or argparse's usage error (status 2) for a malformed flag.
Nothing may pass silently or with a wrong answer: each row here was a
crash, an unclear message or a silent wrong answer before its fix, or is
a clear error that must stay one.

Adding a row is one line in :data:`CASES`; the inputs come from the lazy
:class:`Ctx` (a temporary folder, the tiny simulated dataset, a tiny
trained run, broken copies of each).
"""
import dataclasses
import json
import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Union

import numpy as np
import pytest
import scipy.sparse
import torch

import torch_geometric
from torch_geometric import EdgeIndex
from torch_geometric.data import Data
from torch_geometric.utils import to_torch_csr_tensor

from apnet_pyg.data import EpisodeSampler, MinibatchSampler, load_xlsa17
from apnet_pyg.data.simulator import simulate_dataset, simulate_xlsa17
from apnet_pyg.data.splits import hold_out_per_class, seen_validation_split
from apnet_pyg.data.wordnet_mappings import (
    dataset_wordnet_mapping,
    read_mapping_rows,
    wordnet_coverage,
)
from apnet_pyg.graph import (
    CosineKNNGraph,
    CosineThresholdGraph,
    cosine_knn_graph,
    cosine_threshold_graph,
    load_wordnet,
    resolve_synsets,
    wordnet_graph,
)
from apnet_pyg.graph.wordnet_corpus import WordNetNotFoundError
from apnet_pyg.nn import APNetConv, DenseAPNetConv
from apnet_pyg.nn.functional import (
    edge_cosine,
    sddmm,
    csr_arrays,
    edge_index_arrays,
    softmax_spmm,
    spmm,
)
from apnet_pyg.nn.models import APNet, CentroidEncoder, RelationHead, kmeans
from apnet_pyg.zsl import (
    TrainConfig,
    evaluate,
    harmonic_mean,
    load_model,
    per_class_accuracy,
    run,
    train_model,
)
from apnet_pyg.zsl.baselines import eszsl_metrics, sae_metrics
from apnet_pyg.zsl.cli import main
from apnet_pyg.zsl.eszsl import (
    attribute_map,
    fit_eszsl,
    fit_eszsl_validated,
    predict_eszsl,
)
from apnet_pyg.zsl.evaluate import (
    GZSLScores,
    best_calibration,
    evaluate_predictions,
    evaluate_scores,
    validate,
    zsl_accuracy,
)
from apnet_pyg.zsl.sae import fit_sae, fit_sae_validated, predict_sae
from apnet_pyg.zsl.train import (
    TrainingDiverged,
    build_model,
    check_config_fits,
    load_checkpoint,
)

# tests/xlsa17_toy.py: tests/ is on sys.path, as conftest.py's folder.
from xlsa17_toy import NAMES, index_list, names_cell, write_dataset

# A tiny run: small enough that building and training it takes a second.
SMALL = TrainConfig(class_channels=8, hidden_channels=8, proj_channels=4,
                    num_centroids=2, n_way=4, epochs=1, lr_decay_epoch=None,
                    iterations_per_epoch=2, lr=1e-3, model_selection='none')
SMALL_FLAGS = ['--class-channels', '8', '--hidden-channels', '8',
               '--proj-channels', '4', '--num-centroids', '2', '--n-way',
               '4', '--epochs', '1', '--iterations-per-epoch', '2',
               '--model-selection', 'none', '--no-progress']


@pytest.fixture(scope='session')
def tiny_data(tiny_root):
    return load_xlsa17(tiny_root, 'TINY', attributes='percent')


@pytest.fixture(scope='session')
def tiny_run(tiny_root, tiny_data, tmp_path_factory):
    r"""One trained run, shared by every evaluate, plot and load_model
    row (read only: rows that break a file break a copy)."""
    out = tmp_path_factory.mktemp('bad_input_run') / 'run'
    run(tiny_data, SMALL, out, progress=False, data_root=str(tiny_root))
    return out


class Ctx:
    r"""The inputs of the rows, built when a row asks for them."""
    def __init__(self, request, tmp_path: Path):
        self._request = request
        self.tmp = tmp_path

    def fixture(self, name: str):
        return self._request.getfixturevalue(name)

    @property
    def tiny_root(self) -> Path:
        return self.fixture('tiny_root')

    @property
    def data(self):
        return self.fixture('tiny_data')

    @property
    def class_side(self):
        return load_xlsa17(self.tiny_root, 'TINY', load_features=False)

    @property
    def run(self) -> Path:
        return self.fixture('tiny_run')

    def run_copy(self) -> Path:
        return Path(shutil.copytree(self.run, self.tmp / 'run'))

    def run_without(self, name: str) -> Path:
        run_dir = self.run_copy()
        (run_dir / name).unlink()
        return run_dir

    def metrics(self) -> dict:
        r"""The trained run's metrics.json."""
        return json.loads((self.run / 'metrics.json').read_text())

    def run_with(self, name: str, content) -> Path:
        r"""A copy of the trained run with :obj:`name` replaced."""
        run_dir = self.run_copy()
        write(run_dir / name, content)
        return run_dir

    def toy(self, **changes) -> Path:
        r"""The root of the toy dataset 'TOY' (see xlsa17_toy.py)."""
        write_dataset(self.tmp, **changes)
        return self.tmp

    def toy_without(self, name: str, **changes) -> Path:
        root = self.toy(**changes)
        (root / 'TOY' / name).unlink()
        return root

    def toy_with(self, name: str, content, **changes) -> Path:
        r"""The toy dataset with the file :obj:`name` replaced (or made a
        directory, for :data:`DIRECTORY`)."""
        root = self.toy(**changes)
        write(root / 'TOY' / name, content)
        return root

    def train(self, *flags: str, out: Union[str, Path, None] = None,
              root: Union[str, Path, None] = None) -> List[str]:
        r"""An :obj:`apnet-zsl train` command line of the tiny run."""
        root = self.tiny_root if root is None else root
        out = self.tmp / 'run' if out is None else out
        return ['train', '--dataset', 'TINY', '--root', str(root), '--out',
                str(out)] + SMALL_FLAGS + list(flags)

    def checkpoint_run(self, content) -> Path:
        r"""A run directory holding only :obj:`content` as checkpoint.pt."""
        out = self.tmp / 'run'
        out.mkdir()
        write(out / 'checkpoint.pt', content)
        return out

    def pipeline_out(self) -> Path:
        r"""A pipeline folder whose data is the tiny simulated dataset."""
        out = self.tmp / 'demo'
        (out / 'data').mkdir(parents=True)
        (out / 'data' / 'TINY').symlink_to(self.tiny_root / 'TINY')
        return out


DIRECTORY = object()  # write(): make a directory instead of a file.


def write(path: Path, content) -> Path:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    if content is DIRECTORY:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:  # A Python object: torch.save.
        torch.save(content, path)
    return path


@pytest.fixture
def ctx(request, tmp_path):
    return Ctx(request, tmp_path)


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[Ctx], Any]  # The call, or the command line (argv).
    error: Union[type, int]  # Exception type, or the CLI's exit status.
    match: str  # Regular expression the message matches.
    debug: bool = False  # Run under torch_geometric.debug().

    @property
    def cli(self) -> bool:
        return isinstance(self.error, int)


CASES: List[Case] = []


def case(id: str, call: Callable[[Ctx], Any], error: type, match: str,
         debug: bool = False) -> None:
    CASES.append(Case(id, call, error, match, debug))


def cli(id: str, argv: Callable[[Ctx], List[str]], match: str,
        status: int = 1) -> None:
    CASES.append(Case(id, argv, status, match))


# Shared tensors (never modified by a call).
g = torch.Generator().manual_seed(0)
X = torch.randn(5, 6, generator=g)
EDGES = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])
WEIGHT = torch.rand(6, generator=g) + 0.1
X_SRC, X_DST = torch.randn(4, 6, generator=g), torch.randn(3, 4, generator=g)
BIPARTITE = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 0]])
DX = torch.randn(2, 5, 6, generator=g)
ADJ = torch.rand(2, 5, 5, generator=g) < 0.5
PATTERN, _ = edge_index_arrays(EDGES.flip(0), (5, 5))
RECT, _ = edge_index_arrays(torch.tensor([[0, 1, 2], [0, 1, 3]]), (3, 4))
LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
ZERO_ROW = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.5, 0.5]])
CORRUPT = b'\x80\x03corrupt bytes, not a pickle or a zip archive'


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
case('APNetConv/in_channels=0', lambda c: APNetConv(0), ValueError,
     IN_CHANNELS + r".*got int 0")
case('APNetConv/in_channels=-2', lambda c: APNetConv(-2), ValueError,
     IN_CHANNELS)
case('APNetConv/in_channels=2.5', lambda c: APNetConv(2.5), ValueError,
     IN_CHANNELS + r".*float 2.5")
case('APNetConv/in_channels="6"', lambda c: APNetConv('6'), ValueError,
     IN_CHANNELS + r".*str '6'")
case('APNetConv/in_channels=True', lambda c: APNetConv(True), ValueError,
     IN_CHANNELS + r".*bool")
case('APNetConv/in_channels=(6,0)', lambda c: APNetConv((6, 0)), ValueError,
     r"'in_channels\[1\]' must be a positive integer")
case('APNetConv/in_channels=(6,)', lambda c: APNetConv((6, )), ValueError,
     IN_CHANNELS + r".*tuple")
case('APNetConv/proj_channels=0', lambda c: APNetConv(6, proj_channels=0),
     ValueError, r"'proj_channels' must be a positive integer or None")
case('APNetConv/proj_channels=2.5',
     lambda c: APNetConv(6, proj_channels=2.5), ValueError,
     r"'proj_channels' must be a positive integer or None .*float")
case('APNetConv/proj_channels="16"',
     lambda c: APNetConv(6, proj_channels='16'), ValueError,
     r"'proj_channels' must be a positive integer or None .*str")
case('APNetConv/temperature=-1', lambda c: conv(temperature=-1.0),
     ValueError, r"'temperature' must be at least 0 .*least similar")
case('APNetConv/temperature=nan', lambda c: conv(temperature=math.nan),
     ValueError, r"'temperature' must be finite")
case('APNetConv/temperature=inf', lambda c: conv(temperature=math.inf),
     ValueError, r"'temperature' must be finite")
case('APNetConv/temperature=1e39', lambda c: conv(temperature=1e39),
     ValueError, r"'temperature' must be at most 3.4\d*e\+38")
case('APNetConv/temperature="10"', lambda c: conv(temperature='10'),
     ValueError, r"'temperature' must be a real number \(got str '10'\)")
case('APNetConv/temperature=None', lambda c: conv(temperature=None),
     ValueError, r"'temperature' must be a real number")
case('APNetConv/temperature=True', lambda c: conv(temperature=True),
     ValueError, r"'temperature' must be a real number \(got bool")
case('APNetConv/num_steps=0', lambda c: conv(num_steps=0), ValueError,
     r"'num_steps' must be a positive integer")
case('APNetConv/num_steps=1.5', lambda c: conv(num_steps=1.5), ValueError,
     r"'num_steps' must be a positive integer .*float")
case('APNetConv/proj_init="orthogonal"',
     lambda c: conv(proj_init='orthogonal'), ValueError,
     r"'proj_init' must be one of \('glorot', 'identity'\)")
case('APNetConv/learn_temperature="yes"',
     lambda c: conv(learn_temperature='yes'), ValueError,
     r"'learn_temperature' must be True or False")
case('APNetConv/add_self_loops="no"', lambda c: conv(add_self_loops='no'),
     ValueError, r"'add_self_loops' must be True or False \(got str 'no'\)")
case('APNetConv/fused=None', lambda c: conv(fused=None), ValueError,
     r"'fused' must be True or False")
case('APNetConv/aggr="mean"', lambda c: conv(aggr='mean'), ValueError,
     r"cannot honour the MessagePassing argument aggr='mean'; pass "
     r"fused=False")
case('APNetConv/node_dim=1', lambda c: conv(node_dim=1), ValueError,
     r"argument node_dim=1; pass fused=False")
case('APNetConv/decomposed_layers=2', lambda c: conv(decomposed_layers=2),
     ValueError, r"argument decomposed_layers=2; pass fused=False")

# ---------------------------------------------------------------------------
# Operators: APNetConv's forward
# ---------------------------------------------------------------------------
case('APNetConv/x-3d', lambda c: conv()(X[None], EDGES), ValueError,
     r"'x' must have 2 dimensions")
case('APNetConv/x-wrong-channels', lambda c: conv()(X[:, :5], EDGES),
     ValueError, r"'x' must have 6 features")
case('APNetConv/x-long', lambda c: conv()(X.long(), EDGES), ValueError,
     r"'x' must be a floating-point tensor")
case('APNetConv/x-list', lambda c: conv()(X.tolist(), EDGES), ValueError,
     r"'x' must be a tensor or a pair \(x_src, x_dst\)")
case('APNetConv/x-float64-layer-float32',
     lambda c: conv()(X.double(), EDGES), ValueError,
     r"'x' has dtype torch.float64 but the layer's parameters "
     r"torch.float32")
case('APNetConv/x-float16-layer-float32', lambda c: conv()(X.half(), EDGES),
     ValueError, r"'x' has dtype torch.float16 but the layer's parameters")
case('APNetConv/edge_index-1d', lambda c: conv()(X, EDGES[0]), ValueError,
     r"'edge_index' must have shape \[2, num_edges\]")
case('APNetConv/edge_index-3-rows',
     lambda c: conv()(X, torch.cat([EDGES, EDGES[:1]])), ValueError,
     r"'edge_index' must have shape \[2, num_edges\]")
case('APNetConv/edge_index-float', lambda c: conv()(X, EDGES.float()),
     ValueError, r"'edge_index' must hold int64 or int32 indices")
case('APNetConv/edge_index-bool', lambda c: conv()(X, EDGES.bool()),
     ValueError, r"'edge_index' must hold int64 or int32 indices")
# uint8 indices reached the kernels (NaN on the fused path).
case('APNetConv/edge_index-uint8', lambda c: conv()(X, EDGES.to(torch.uint8)),
     ValueError, r"'edge_index' must hold int64 or int32 indices \(got dtype "
     r"torch.uint8\)")
case('APNetConv/sparse-adjacency-integer-values',
     lambda c: conv()(X, torch.sparse_coo_tensor(
         EDGES.flip(0), torch.full((EDGES.size(1), ), 5), (5, 5))),
     ValueError, r"'edge_index', a sparse adjacency, holds integer values "
     r"\(torch.int64\)")
case('APNetConv/edge_index-list', lambda c: conv()(X, EDGES.tolist()),
     ValueError, r"'edge_index' must be a torch.Tensor")
case('APNetConv/edge_index-out-of-range',
     lambda c: conv()(X, torch.tensor([[0], [5]])), RuntimeError,
     r"'edge_index' holds node indices outside \[0, 4\] for 5 nodes")
case('APNetConv/edge_index-negative',
     lambda c: conv()(X, torch.tensor([[-1], [2]])), RuntimeError,
     r"'edge_index' holds node indices outside \[0, 4\]")
case('APNetConv/edge_index-out-of-range-debug',
     lambda c: conv()(X, torch.tensor([[0], [7]])), ValueError,
     r"'edge_index' holds node indices in \[7, 7\], outside \[0, 4\]",
     debug=True)
case('APNetConv/edge_index-other-device', lambda c: conv()(meta(X), EDGES),
     ValueError, r"'edge_index' is on cpu but 'x' on meta")
case('APNetConv/edge_weight-short', lambda c: conv()(X, EDGES, WEIGHT[:-1]),
     ValueError, r"'edge_weight' must have shape \[6\] \(one weight per "
     r"edge")
case('APNetConv/edge_weight-2d', lambda c: conv()(X, EDGES, WEIGHT[None]),
     ValueError, r"'edge_weight' must have shape \[6\]")
case('APNetConv/edge_weight-long',
     lambda c: conv()(X, EDGES, torch.ones(6, dtype=torch.long)),
     ValueError, r"'edge_weight' must be a floating-point tensor")
case('APNetConv/edge_weight-list',
     lambda c: conv()(X, EDGES, WEIGHT.tolist()), ValueError,
     r"'edge_weight' must be a torch.Tensor")
case('APNetConv/edge_weight-other-device',
     lambda c: conv().to('meta')(meta(X), meta(EDGES), WEIGHT), ValueError,
     r"'edge_weight' is on cpu but 'x' on meta")
case('APNetConv/edge_weight-zero-debug',
     lambda c: conv()(X, EDGES, WEIGHT * 0), ValueError,
     r"'edge_weight' must be strictly positive", debug=True)
case('APNetConv/edge_weight-negative-debug',
     lambda c: conv()(X, EDGES, -WEIGHT), ValueError,
     r"'edge_weight' must be strictly positive", debug=True)
case('APNetConv/edge_weight-inf-debug',
     lambda c: conv()(X, EDGES, WEIGHT + math.inf), ValueError,
     r"'edge_weight' contains NaN or infinite values", debug=True)
case('APNetConv/x-nan-debug', lambda c: conv()(X + math.nan, EDGES),
     ValueError, r"'x' contains NaN or infinite values", debug=True)
case('APNetConv/size-mismatch', lambda c: conv()(X, EDGES, size=(5, 6)),
     ValueError, r"'size' must be \(num_source_nodes, num_target_nodes\) = "
     r"\(5, 5\)")
case('APNetConv/meta-attention-with-self-loops',
     lambda c: conv().to('meta')(meta(X), meta(EDGES),
                                 return_attention_weights=True),
     ValueError, r"return_attention_weights on meta tensors.*pass "
     r"add_self_loops=False")
case('APNetConv/sparse-adj-target_to_source',
     lambda c: conv(flow='target_to_source')(
         X, to_torch_csr_tensor(EDGES, size=(5, 5))), ValueError,
     r"'edge_index' is a sparse adjacency.*needs flow='source_to_target'")
case('APNetConv/sparse-adj-and-edge_weight',
     lambda c: conv()(X, to_torch_csr_tensor(EDGES, size=(5, 5)), WEIGHT),
     ValueError, r"either as the values of the sparse adjacency or as "
     r"'edge_weight'")
case('APNetConv/sparse-adj-wrong-shape',
     lambda c: conv()(X, to_torch_csr_tensor(EDGES, size=(6, 6))),
     ValueError, r"'edge_index', a sparse adjacency adj_t, must have shape "
     r"\[5, 5\]")
case('APNetConv/EdgeIndex-wrong-sparse-size',
     lambda c: conv()(X, EdgeIndex(EDGES, sparse_size=(7, 7))), ValueError,
     r"'edge_index' \(an EdgeIndex\) has sparse size \(7, 7\), more nodes "
     r"than 'x'")
case('APNetConv/bipartite-target-to-source',
     lambda c: APNetConv((6, 4), 3, flow='target_to_source')(
         (X_SRC, X_DST), BIPARTITE.flip(0)), ValueError,
     r"A bipartite 'x' needs flow='source_to_target'.*flip edge_index")
case('APNetConv/bipartite-layer-single-x',
     lambda c: APNetConv((6, 4), 3)(X, EDGES), ValueError,
     r"has one projection per side.*needs x=\(x_src, x_dst\)")
case('APNetConv/bipartite-x_dst-None',
     lambda c: conv()((X_SRC, None), BIPARTITE), ValueError,
     r"'x' must be a tensor or a pair \(x_src, x_dst\).*x_dst cannot be "
     r"None")
case('APNetConv/bipartite-x-triple',
     lambda c: conv()((X_SRC, X_SRC, X_SRC), BIPARTITE), ValueError,
     r"'x' must be a tensor or a pair \(x_src, x_dst\)")
case('APNetConv/bipartite-x[1]-wrong-channels',
     lambda c: APNetConv((6, 5), 3)((X_SRC, X_DST), BIPARTITE), ValueError,
     r"'x\[1\]' must have 5 features")
case('APNetConv/bipartite-identity-different-widths',
     lambda c: APNetConv(-1, proj_channels=None)((X_SRC, X_DST), BIPARTITE),
     ValueError, r"Without a projection \(proj_channels=None\).*x\[0\] and "
     r"x\[1\].*same number of features")
case('APNetConv/bipartite-x[1]-other-device',
     lambda c: APNetConv((6, 4), 3)((X_SRC, meta(X_DST)), BIPARTITE),
     ValueError, r"'x\[1\]' is on meta but 'x\[0\]' on cpu")
case('APNetConv/bipartite-x[0]-float64',
     lambda c: APNetConv((6, 4), 3)((X_SRC.double(), X_DST), BIPARTITE),
     ValueError, r"'x\[0\]' has dtype torch.float64 but the layer's")
case('APNetConv/bipartite-x[1]-nan-debug',
     lambda c: APNetConv((6, 4), 3)((X_SRC, X_DST + math.nan), BIPARTITE),
     ValueError, r"'x\[1\]' contains NaN or infinite values", debug=True)

# ---------------------------------------------------------------------------
# Operators: DenseAPNetConv
# ---------------------------------------------------------------------------
case('DenseAPNetConv/in_channels-pair', lambda c: DenseAPNetConv((6, 6)),
     ValueError, r"takes one node set, so 'in_channels' must be an int")
case('DenseAPNetConv/in_channels=0', lambda c: DenseAPNetConv(0),
     ValueError, IN_CHANNELS)
case('DenseAPNetConv/temperature=-1', lambda c: dense(temperature=-1),
     ValueError, r"'temperature' must be at least 0")
case('DenseAPNetConv/temperature="10"', lambda c: dense(temperature='10'),
     ValueError, r"'temperature' must be a real number")
case('DenseAPNetConv/x-4d', lambda c: dense()(DX[None], ADJ), ValueError,
     r"'x' must have 3 dimensions")
case('DenseAPNetConv/x-wrong-channels', lambda c: dense()(DX[..., :4], ADJ),
     ValueError, r"'x' must have 6 features")
case('DenseAPNetConv/x-int', lambda c: dense()(DX.int(), ADJ), ValueError,
     r"'x' must be a floating-point tensor")
case('DenseAPNetConv/x-float64-layer-float32',
     lambda c: dense()(DX.double(), ADJ), ValueError,
     r"'x' has dtype torch.float64 but the layer's parameters")
case('DenseAPNetConv/adj-wrong-shape', lambda c: dense()(DX, ADJ[:, :4]),
     ValueError, r"'adj' must have shape \[2, 5, 5\] or \[5, 5\]")
case('DenseAPNetConv/adj-batch-mismatch',
     lambda c: dense()(DX, torch.cat([ADJ, ADJ[:1]])), ValueError,
     r"'adj' must have shape \[2, 5, 5\]")
case('DenseAPNetConv/adj-list', lambda c: dense()(DX, ADJ.tolist()),
     ValueError, r"'adj' must be a torch.Tensor")
case('DenseAPNetConv/adj-complex',
     lambda c: dense()(DX, ADJ.to(torch.complex64)), ValueError,
     r"'adj' must hold real weights or booleans")
case('DenseAPNetConv/adj-other-device', lambda c: dense()(DX, meta(ADJ)),
     ValueError, r"'adj' is on meta but 'x' on cpu")
case('DenseAPNetConv/adj-negative-debug',
     lambda c: dense()(DX, torch.where(ADJ, -1.0, 0.0)), ValueError,
     r"'adj' must be strictly positive", debug=True)
case('DenseAPNetConv/x-nan-debug', lambda c: dense()(DX + math.nan, ADJ),
     ValueError, r"'x' contains NaN or infinite values", debug=True)
case('DenseAPNetConv/mask-wrong-shape',
     lambda c: dense()(DX, ADJ, mask=torch.ones(2, 4, dtype=torch.bool)),
     ValueError, r"'mask' must have shape \[2, 5\]")
case('DenseAPNetConv/mask-list',
     lambda c: dense()(DX, ADJ, mask=[[True] * 5] * 2), ValueError,
     r"'mask' must be a torch.Tensor")
case('DenseAPNetConv/mask-other-device',
     lambda c: dense()(DX, ADJ, mask=meta(torch.ones(2, 5))), ValueError,
     r"'mask' is on meta but 'x' on cpu")
case('DenseAPNetConv/mask-0.5',
     lambda c: dense()(DX, ADJ, mask=torch.full((2, 5), 0.5)), ValueError,
     r"'mask' must be a boolean \(or 0/1 integer\) tensor")
case('DenseAPNetConv/mask-2-debug',
     lambda c: dense()(DX, ADJ, mask=torch.full((2, 5), 2)), ValueError,
     r"'mask' must hold only 0 and 1 \(got 2\)", debug=True)

# ---------------------------------------------------------------------------
# Operators: apnet_pyg.nn.functional
# ---------------------------------------------------------------------------
case('edge_index_arrays/float',
     lambda c: edge_index_arrays(EDGES.float(), (5, 5)),
     ValueError, r"'edge_index' must be a \[2, nnz\] tensor of integer")
case('edge_index_arrays/1d',
     lambda c: edge_index_arrays(EDGES[0], (5, 5)), ValueError,
     r"'edge_index' must be a \[2, nnz\] tensor of integer")
case('edge_index_arrays/dim-2',
     lambda c: edge_index_arrays(EDGES, (5, 5), 2), ValueError,
     r"'dim' must be 0 or 1")
case('edge_index_arrays/size-not-a-pair',
     lambda c: edge_index_arrays(EDGES, 5), ValueError,
     r"'size' must be a pair \(num_rows, num_cols\)")
case('edge_index_arrays/size-negative',
     lambda c: edge_index_arrays(EDGES, (5, -1)), ValueError,
     r"'size\[1\]' must be at least 0")
case('edge_index_arrays/index-out-of-range',
     lambda c: edge_index_arrays(EDGES, (5, 3)), RuntimeError,
     r"'edge_index' holds indices outside the size \(5, 3\)")
case('csr_arrays/unsorted',
     lambda c: csr_arrays(EdgeIndex(EDGES, sparse_size=(5, 5))), ValueError,
     r"'edge_index' must be a sorted EdgeIndex")
case('spmm/pattern-not-a-pattern', lambda c: spmm(EDGES, WEIGHT, X),
     ValueError, r"'edge_index' must be an EdgeIndex sorted by row")
case('spmm/edge-index-without-size',
     lambda c: spmm(EdgeIndex(EDGES[:, [0, 5, 1, 2, 3, 4]], sort_order='row'),
                    WEIGHT, X),
     ValueError, r"'edge_index' \(an EdgeIndex\) has no sparse size")
case('spmm/values-wrong-length', lambda c: spmm(PATTERN, WEIGHT[:4], X),
     ValueError, r"'values' must have 6 rows, the pattern's number of "
     r"entries")
case('spmm/x-wrong-rows', lambda c: spmm(PATTERN, WEIGHT, X[:4]),
     ValueError, r"'x' must have 5 rows, the pattern's number of columns")
case('spmm/x-1d', lambda c: spmm(PATTERN, WEIGHT, X[0]), ValueError,
     r"'x' must have 2 dimensions")
case('spmm/dtype-mismatch', lambda c: spmm(PATTERN, WEIGHT.double(), X),
     ValueError, r"'values' has dtype torch.float64 but 'x' torch.float32")
case('spmm/x-other-device', lambda c: spmm(PATTERN, WEIGHT, meta(X)),
     ValueError, r"'x' is on meta but 'pattern' on cpu")
case('sddmm/a-wrong-rows', lambda c: sddmm(RECT, X[:4], X[:4]), ValueError,
     r"'a' must have 3 rows, the pattern's number of rows")
case('sddmm/b-wrong-width', lambda c: sddmm(RECT, X[:3], X[:4, :5]),
     ValueError, r"'b' and 'a' must have the same number of features")
case('edge_cosine/b-None-rectangular', lambda c: edge_cosine(RECT, X[:3]),
     ValueError, r"b=None \(b = a\) needs a square pattern.*pass 'b'")
case('edge_cosine/a-int', lambda c: edge_cosine(PATTERN, X.long()),
     ValueError, r"'a' must be a floating-point tensor")
case('softmax_spmm/logits-wrong-length',
     lambda c: softmax_spmm(PATTERN, WEIGHT[:5], X), ValueError,
     r"'logits' must have 6 rows, the pattern's number of entries")
case('softmax_spmm/loop_logits-wrong-length',
     lambda c: softmax_spmm(PATTERN, WEIGHT, X, WEIGHT[:4]), ValueError,
     r"'loop_logits' must have 5 rows, the pattern's number of rows")
case('softmax_spmm/loop_logits-more-rows-than-columns',
     lambda c: softmax_spmm(RECT.t(), WEIGHT[:3], X[:3], X[:4, 0]),
     ValueError, r"'loop_logits' needs a pattern with no more rows than "
     r"columns")

# ---------------------------------------------------------------------------
# Graph builders and transforms
# ---------------------------------------------------------------------------
case('cosine_threshold_graph/x-1d', lambda c: cosine_threshold_graph(X[0]),
     ValueError, r"'x' must have 2 dimensions")
case('cosine_threshold_graph/x-int',
     lambda c: cosine_threshold_graph(X.long()), ValueError,
     r"'x' must be a floating-point tensor")
case('cosine_threshold_graph/x-nan',
     lambda c: cosine_threshold_graph(X + math.nan), ValueError,
     r"'x' contains NaN or infinite values")
case('cosine_threshold_graph/x-list',
     lambda c: cosine_threshold_graph(X.tolist()), ValueError,
     r"'x' must be a torch.Tensor")
case('cosine_threshold_graph/threshold="0.5"',
     lambda c: cosine_threshold_graph(X, '0.5'), ValueError,
     r"'threshold' must be a real number \(got str '0.5'\)")
case('cosine_threshold_graph/threshold=None',
     lambda c: cosine_threshold_graph(X, None), ValueError,
     r"'threshold' must be a real number")
case('cosine_threshold_graph/threshold=1.5',
     lambda c: cosine_threshold_graph(X, 1.5), ValueError,
     r"'threshold' must lie in \[-1, 1\] \(got 1.5\)")
case('cosine_threshold_graph/threshold=nan',
     lambda c: cosine_threshold_graph(X, math.nan), ValueError,
     r"'threshold' must be finite")
case('cosine_threshold_graph/chunk_size=0',
     lambda c: cosine_threshold_graph(X, chunk_size=0), ValueError,
     r"'chunk_size' must be a positive integer or None \(got 0\)")
case('cosine_threshold_graph/chunk_size=-1',
     lambda c: cosine_threshold_graph(X, chunk_size=-1), ValueError,
     r"'chunk_size' must be a positive integer or None \(got -1\)")
case('cosine_threshold_graph/chunk_size=2.5',
     lambda c: cosine_threshold_graph(X, chunk_size=2.5), ValueError,
     r"'chunk_size' must be a positive integer or None \(got float 2.5\)")
case('cosine_threshold_graph/batch-wrong-length',
     lambda c: cosine_threshold_graph(X, batch=torch.zeros(4, dtype=int)),
     ValueError, r"'batch' must have shape \[5\]")
case('cosine_threshold_graph/batch-float',
     lambda c: cosine_threshold_graph(X, batch=torch.zeros(5)), ValueError,
     r"'batch' must hold integer graph indices")
case('cosine_threshold_graph/batch-negative',
     lambda c: cosine_threshold_graph(X, batch=-torch.ones(5, dtype=int)),
     ValueError, r"'batch' holds negative graph indices")
case('cosine_threshold_graph/loop="yes"',
     lambda c: cosine_threshold_graph(X, loop='yes'), ValueError,
     r"'loop' must be True or False")
case('cosine_knn_graph/k=0', lambda c: cosine_knn_graph(X, 0), ValueError,
     r"'k' must be a positive integer \(got 0\)")
case('cosine_knn_graph/k=2.5', lambda c: cosine_knn_graph(X, 2.5),
     ValueError, r"'k' must be a positive integer \(got float 2.5\)")
case('cosine_knn_graph/k="3"', lambda c: cosine_knn_graph(X, '3'),
     ValueError, r"'k' must be a positive integer \(got str '3'\)")
case('cosine_knn_graph/flow="up"', lambda c: cosine_knn_graph(X, 2,
                                                              flow='up'),
     ValueError, r"'flow' must be 'source_to_target' or 'target_to_source'")
case('cosine_knn_graph/zero-row', lambda c: cosine_knn_graph(ZERO_ROW, 1),
     ValueError, r"'x' has 1 all-zero rows \(e.g. row 1\): a zero vector "
     r"has no cosine nearest neighbours")
case('cosine_knn_graph/zero-row-in-batch',
     lambda c: cosine_knn_graph(ZERO_ROW, 1, batch=torch.tensor([1, 0, 0])),
     ValueError, r"'x' has 1 all-zero rows \(e.g. row 1\)")
case('cosine_knn_graph/chunk_size=-3',
     lambda c: cosine_knn_graph(X, 2, chunk_size=-3), ValueError,
     r"'chunk_size' must be a positive integer or None \(got -3\)")
case('cosine_knn_graph/x-inf', lambda c: cosine_knn_graph(X + math.inf, 2),
     ValueError, r"'x' contains NaN or infinite values")
case('cosine_knn_graph/batch-2d',
     lambda c: cosine_knn_graph(X, 2, batch=torch.zeros(5, 1, dtype=int)),
     ValueError, r"'batch' must have shape \[5\]")
case('CosineThresholdGraph/threshold="0.5"',
     lambda c: CosineThresholdGraph('0.5'), ValueError,
     r"'threshold' must be a real number")
case('CosineThresholdGraph/threshold=2', lambda c: CosineThresholdGraph(2.0),
     ValueError, r"'threshold' must lie in \[-1, 1\]")
case('CosineThresholdGraph/attr-missing',
     lambda c: CosineThresholdGraph(attr='pos')(Data(x=X)), ValueError,
     r"The data object has no node attribute 'pos'")
case('CosineThresholdGraph/attr=""', lambda c: CosineThresholdGraph(attr=''),
     ValueError, r"'attr' must be the name of a node attribute")
case('CosineKNNGraph/k=0', lambda c: CosineKNNGraph(k=0), ValueError,
     r"'k' must be a positive integer")
case('CosineKNNGraph/flow="x"', lambda c: CosineKNNGraph(flow='x'),
     ValueError, r"'flow' must be 'source_to_target' or")
case('CosineKNNGraph/force_undirected="yes"',
     lambda c: CosineKNNGraph(force_undirected='yes'), ValueError,
     r"'force_undirected' must be True or False")
case('CosineKNNGraph/no-x', lambda c: CosineKNNGraph()(Data(pos=X)),
     ValueError, r"The data object has no node attribute 'x'")
case('CosineKNNGraph/attr=3', lambda c: CosineKNNGraph(attr=3), ValueError,
     r"'attr' must be the name of a node attribute \(got 3\)")

# WordNet
case('wordnet_graph/classes-a-string', lambda c: wordnet_graph('zebra'),
     ValueError, r"'classes' must be a sequence of class names, got the "
     r"single string 'zebra'")
case('wordnet_graph/classes-not-strings', lambda c: wordnet_graph([1, 2]),
     ValueError, r"'classes' must contain strings only")
case('wordnet_graph/classes-duplicates',
     lambda c: wordnet_graph(['dog', 'cat', 'dog']), ValueError,
     r"'classes' contains duplicate names: 'dog'")
case('wordnet_graph/max_hops=0', lambda c: wordnet_graph(['dog'], 0),
     ValueError, r"'max_hops' must be a positive integer or None")
case('wordnet_graph/max_hops=1.5', lambda c: wordnet_graph(['dog'], 1.5),
     ValueError, r"'max_hops' must be a positive integer or None, got 1.5")
case('wordnet_graph/unknown-class',
     lambda c: wordnet_graph(['dog', 'xyzzy_plugh']), ValueError,
     r"Could not map 1 of 2 classes of 'classes'.*'xyzzy_plugh': no "
     r"WordNet noun.*Pass 'mapping=")
case('wordnet_graph/mapping-a-dataset-name',
     lambda c: wordnet_graph(['seal'], mapping='AWA2'), ValueError,
     r"'mapping' must be a dict.*dataset_wordnet_mapping")
case('resolve_synsets/mapping-not-strings',
     lambda c: resolve_synsets(['seal'], {'seal': 9}), ValueError,
     r"'mapping' must map strings to strings")
for spec, message in [
        ('seal.v.01', r"'seal.v.01' is not a noun synset"),
        ('n99999999', r"no noun synset at offset 99999999"),
        ('v01234567', r"'v01234567' is not a noun offset"),
        ('nothing.n.99', r"no WordNet synset named 'nothing.n.99'"),
]:
    case(f'resolve_synsets/mapped-to-{spec}',
         lambda c, spec=spec: resolve_synsets(['x'], {'x': spec}),
         ValueError, rf"'x' \(mapped to '{spec}'\): {message}")
case('resolve_synsets/empty-name', lambda c: resolve_synsets(['']),
     ValueError, r"'classes'.*'': empty name")
case('resolve_synsets/many-unknown-on-one-line',
     lambda c: resolve_synsets([f'xyzzy{i}' for i in range(12)]), ValueError,
     r"Could not map 12 of 12 classes of 'classes'.*; and 2 more")
case('load_wordnet/missing-directory',
     lambda c: load_wordnet(c.tmp / 'nothing', c.tmp / 'cache',
                            search_nltk_data=False), WordNetNotFoundError,
     r"WordNet 3.0 was not found: '.*nothing' lacks data.noun.*apt-get "
     r"install wordnet-base")


# ---------------------------------------------------------------------------
# Data: load_xlsa17 on broken files (tests/xlsa17_toy.py has the layout)
# ---------------------------------------------------------------------------
def toy_load(root, **kwargs):
    return load_xlsa17(root, 'TOY', **kwargs)


case('load_xlsa17/root-None-with-features',
     lambda c: load_xlsa17(None, 'AWA2'), FileNotFoundError,
     r"'res101.mat' is not shipped. Pass load_features=False")
case('load_xlsa17/attributes="raw"',
     lambda c: toy_load(c.toy(), attributes='raw'), ValueError,
     r"'attributes' must be one of att, original_att, percent")
case('load_xlsa17/dataset=3', lambda c: load_xlsa17(c.toy(), 3), ValueError,
     r"'dataset' must be a dataset folder name")
case('load_xlsa17/load_features="yes"',
     lambda c: toy_load(c.toy(), load_features='yes'), ValueError,
     r"'load_features' must be True or False")
case('load_xlsa17/no-dataset-folder', lambda c: load_xlsa17(c.tmp, 'NOPE'),
     FileNotFoundError, r"No dataset folder 'NOPE' in '.*' \(found: "
     r"nothing\)")
case('load_xlsa17/root-a-file',
     lambda c: load_xlsa17(write(c.tmp / 'root', 'x'), 'TOY'),
     NotADirectoryError, r"The data root '.*root' is a file")
case('load_xlsa17/att_splits.mat-missing',
     lambda c: toy_load(c.toy_without('att_splits.mat')), FileNotFoundError,
     r"Missing file '.*att_splits.mat'")
case('load_xlsa17/att_splits.mat-a-directory',
     lambda c: toy_load(c.toy_with('att_splits.mat', DIRECTORY)),
     IsADirectoryError, r"'.*att_splits.mat' is a directory where a file is "
     r"expected")
case('load_xlsa17/res101.mat-a-directory',
     lambda c: toy_load(c.toy_with('res101.mat', DIRECTORY)),
     IsADirectoryError, r"'.*res101.mat' is a directory where a file is "
     r"expected")
case('load_xlsa17/res101.mat-missing',
     lambda c: toy_load(c.toy_without('res101.mat')), FileNotFoundError,
     r"Missing file '.*res101.mat'")
case('load_xlsa17/att_splits.mat-text',
     lambda c: toy_load(c.toy_with('att_splits.mat', 'hello')), ValueError,
     r"'.*att_splits.mat' is not a MATLAB .mat file")
case('load_xlsa17/res101.mat-random-bytes',
     lambda c: toy_load(c.toy_with('res101.mat', bytes(range(256)) * 4)),
     ValueError, r"res101.mat")
case('load_xlsa17/att_splits.mat-empty',
     lambda c: toy_load(c.toy_with('att_splits.mat', b'')), ValueError,
     r"'.*att_splits.mat' is not a MATLAB .mat file")
case('load_xlsa17/no-att', lambda c: toy_load(c.toy(drop=['att'])),
     ValueError, r"'.*att_splits.mat' has no variable 'att'")
case('load_xlsa17/no-allclasses_names',
     lambda c: toy_load(c.toy(drop=['allclasses_names'])), ValueError,
     r"'.*att_splits.mat' has no variable 'allclasses_names'")
case('load_xlsa17/no-trainval_loc',
     lambda c: toy_load(c.toy(drop=['trainval_loc'])), ValueError,
     r"'.*att_splits.mat' has no variable 'trainval_loc'")
case('load_xlsa17/att-transposed',
     lambda c: toy_load(c.toy(splits={'att': np.ones((5, 7))})), ValueError,
     r"'att' in '.*att_splits.mat' must be A x C.*looks transposed")
case('load_xlsa17/att-nan',
     lambda c: toy_load(c.toy(splits={'att': np.full((7, 5), np.nan)})),
     ValueError, r"'att' in '.*att_splits.mat' contains NaN")
case('load_xlsa17/att-strings',
     lambda c: toy_load(c.toy(splits={'att': names_cell(NAMES)})),
     ValueError, r"'att' in '.*att_splits.mat' must be a numeric array")
case('load_xlsa17/duplicate-class-names',
     lambda c: toy_load(c.toy(splits={'allclasses_names': names_cell(
         NAMES[:4] + NAMES[:1])})), ValueError,
     r"'allclasses_names' in '.*att_splits.mat' contains duplicate names")
case('load_xlsa17/allclasses_names-numbers',
     lambda c: toy_load(c.toy(splits={'allclasses_names': np.ones((5, 1))})),
     ValueError, r"'allclasses_names' in '.*' must be a C x 1 cell array")
case('load_xlsa17/trainval_loc-matrix',
     lambda c: toy_load(c.toy(splits={'trainval_loc': np.ones((3, 2))})),
     ValueError, r"'trainval_loc' in '.*' must be an N x 1 index list")
case('load_xlsa17/trainval_loc-zero',
     lambda c: toy_load(c.toy(splits={'trainval_loc': index_list([0, 1])})),
     ValueError, r"'trainval_loc' in '.*' has 1 indices outside 1..12 "
     r"\(1-based")
case('load_xlsa17/trainval_loc-beyond-images',
     lambda c: toy_load(c.toy(splits={'trainval_loc': index_list([1, 13])})),
     ValueError, r"'trainval_loc' in '.*' has 1 indices outside 1..12")
case('load_xlsa17/trainval_loc-fractions',
     lambda c: toy_load(c.toy(splits={'trainval_loc': np.array(
         [[1.5], [2.0]])})), ValueError,
     r"'trainval_loc' in '.*' must hold integers")
case('load_xlsa17/trainval_loc-duplicates',
     lambda c: toy_load(c.toy(splits={'trainval_loc': index_list([1, 1])})),
     ValueError, r"'trainval_loc' in '.*' contains duplicate indices")
case('load_xlsa17/splits-overlap',
     lambda c: toy_load(c.toy(splits={'test_seen_loc': index_list(
         [7, 8, 1])})), ValueError,
     r"'trainval_loc' and 'test_seen_loc' in '.*' share 1 images")
case('load_xlsa17/no-features', lambda c: toy_load(c.toy(drop=['features'])),
     ValueError, r"'.*res101.mat' has no variable 'features'")
case('load_xlsa17/no-labels', lambda c: toy_load(c.toy(drop=['labels'])),
     ValueError, r"'.*res101.mat' has no variable 'labels'")
case('load_xlsa17/features-transposed',
     lambda c: toy_load(c.toy(features={'features': np.ones((12, 2048))})),
     ValueError, r"'features' in '.*res101.mat' must be 2048 x N.*looks "
     r"transposed")
case('load_xlsa17/features-nan',
     lambda c: toy_load(c.toy(features={
         'features': np.full((2048, 12), np.nan)})),
     ValueError, r"'features' in '.*res101.mat' contain NaN")
case('load_xlsa17/features-all-zero',
     lambda c: toy_load(c.toy(features={'features': np.zeros((2048, 12))})),
     ValueError, r"'features' in '.*res101.mat' are all zero")
case('load_xlsa17/features-sparse',
     lambda c: toy_load(c.toy(features={
         'features': scipy.sparse.csc_matrix(np.ones((2048, 12)))})),
     ValueError, r"'features' in '.*res101.mat' must be a dense numeric "
     r"array \(got .*\): save it as a full matrix")
case('load_xlsa17/labels-out-of-range',
     lambda c: toy_load(c.toy(features={'labels': np.full((12, 1), 6.0)})),
     ValueError, r"'labels' in '.*res101.mat' has 12 values outside 1..5")
case('load_xlsa17/labels-two-columns',
     lambda c: toy_load(c.toy(features={'labels': np.ones((12, 2))})),
     ValueError, r"'labels' in '.*res101.mat' must be N x 1")
case('load_xlsa17/labels-fractions',
     lambda c: toy_load(c.toy(features={'labels': np.full((12, 1), 1.5)})),
     ValueError, r"'labels' in '.*res101.mat' must hold integers")
case('load_xlsa17/class-list-unknown-name',
     lambda c: toy_load(c.toy(lists={'testclasses.txt': ['beaver',
                                                         'unicorn']})),
     ValueError, r"'.*testclasses.txt' lists 1 class names that are not in "
     r"'allclasses_names'")
case('load_xlsa17/class-list-duplicate',
     lambda c: toy_load(c.toy(lists={'testclasses.txt': ['beaver', 'beaver',
                                                         'dalmatian']})),
     ValueError, r"'.*testclasses.txt' lists a class more than once")
case('load_xlsa17/class-list-a-directory',
     lambda c: toy_load(c.toy_with('trainvalclasses.txt', DIRECTORY)),
     IsADirectoryError, r"'.*trainvalclasses.txt' is a directory")
case('load_xlsa17/class-list-binary',
     lambda c: toy_load(c.toy_with('valclasses1.txt', b'\xff\xfe\x00bad')),
     ValueError, r"'.*valclasses1.txt' is not a text file of class names")
case('load_xlsa17/seen-unseen-overlap',
     lambda c: toy_load(c.toy(lists={'testclasses.txt': NAMES[2:]})),
     ValueError, r"Seen and unseen classes overlap in '.*TOY' "
     r"\(trainvalclasses.txt vs testclasses.txt\)")
case('load_xlsa17/val-class-not-seen',
     lambda c: toy_load(c.toy(lists={'valclasses1.txt': ['beaver']})),
     ValueError, r"'.*valclasses1.txt' lists classes that are not seen")
case('load_xlsa17/train-val-overlap',
     lambda c: toy_load(c.toy(lists={'valclasses1.txt': NAMES[1:3]})),
     ValueError, r"'trainclasses1.txt' and 'valclasses1.txt' in '.*' "
     r"overlap")
case('load_xlsa17/class-list-empty',
     lambda c: toy_load(c.toy(lists={'testclasses.txt': []})), ValueError,
     r"'.*testclasses.txt' lists no classes")
case('load_xlsa17/class-in-no-list',
     lambda c: toy_load(c.toy(lists={'trainvalclasses.txt': NAMES[:2],
                                     'trainclasses1.txt': NAMES[:1],
                                     'valclasses1.txt': NAMES[1:2]})),
     ValueError, r"1 classes of 'allclasses_names' are neither seen nor "
     r"unseen in '.*TOY'.*killer\+whale")
case('load_xlsa17/seen-class-in-no-validation-list',
     lambda c: toy_load(c.toy(lists={'trainclasses1.txt': NAMES[:1],
                                     'valclasses1.txt': NAMES[1:2]})),
     ValueError, r"1 seen classes are in neither 'trainclasses1.txt' nor "
     r"'valclasses1.txt'.*killer\+whale")
case('load_xlsa17/train_loc-holds-test_unseen-images',
     lambda c: toy_load(c.toy(splits={'train_loc': index_list([1, 2, 10])})),
     ValueError, r"'train_loc' and 'test_unseen_loc' in '.*' share 1 images "
     r"\(e.g. 1-based \[10\]\)")
case('load_xlsa17/train_loc-val_loc-overlap',
     lambda c: toy_load(c.toy(splits={'val_loc': index_list([5, 6, 1])})),
     ValueError, r"'train_loc' and 'val_loc' in '.*' share 1 images")
case('load_xlsa17/val_loc-empty',
     lambda c: toy_load(c.toy(splits={'val_loc': index_list([])})),
     ValueError, r"'val_loc' in '.*att_splits.mat' is empty")
case('load_xlsa17/labels-of-the-other-side',
     lambda c: toy_load(c.toy(features={'labels': np.array(
         [1, 1, 2, 2, 3, 3, 1, 2, 3, 4, 4, 1.0]).reshape(-1, 1)})),
     ValueError, r"1 images of 'test_unseen_loc' \('.*att_splits.mat'\) "
     r"are labelled in '.*res101.mat' with seen")
case('load_xlsa17/no-class-lists-no-labels',
     lambda c: toy_load(c.toy(lists={'trainvalclasses.txt': None}),
                        load_features=False), FileNotFoundError,
     r"trainvalclasses.txt missing and no labels loaded "
     r"\(load_features=False\)")
case('load_xlsa17/SIMULATED.json-invalid',
     lambda c: toy_load(c.toy_with('SIMULATED.json', '{not json')),
     ValueError, r"'.*SIMULATED.json' is not valid JSON.*simulate the "
     r"dataset again")
case('load_xlsa17/SIMULATED.json-a-directory',
     lambda c: toy_load(c.toy_with('SIMULATED.json', DIRECTORY)),
     IsADirectoryError, r"'.*SIMULATED.json' is a directory")
case('load_xlsa17/SIMULATED.json-a-list',
     lambda c: toy_load(c.toy_with('SIMULATED.json', '[1, 2]')), ValueError,
     r"'.*SIMULATED.json' must hold a JSON object \(got list\)")

# ZSLDataset, samplers, splits, mappings
case('ZSLDataset.loc/unknown-split', lambda c: c.data.loc('validation'),
     ValueError, r"Unknown split 'validation' for 'split'")
case('ZSLDataset.loc/absent-split',
     lambda c: toy_load(c.toy(drop=['train_loc'])).loc('train'), ValueError,
     r"Dataset 'TOY' has no 'train_loc'")
case('ZSLDataset.images_of/no-labels',
     lambda c: c.class_side.images_of([0]), ValueError,
     r"Dataset 'TINY' was loaded without features/labels "
     r"\(load_features=False\)")
case('ZSLDataset.images_of/classes-strings',
     lambda c: c.data.images_of(['zebra']), ValueError,
     r"'classes' must be a tensor or sequence of integer indices")
case('ZSLDataset.images_of/classes-float',
     lambda c: c.data.images_of(torch.tensor([1.5])), ValueError,
     r"'classes' must hold integer indices \(got dtype torch.float32\)")
case('EpisodeSampler/n_way=1',
     lambda c: EpisodeSampler(LABELS, torch.arange(4), n_way=1), ValueError,
     r"'n_way' must be at least 2 \(got 1\)")
case('EpisodeSampler/n_way=2.5',
     lambda c: EpisodeSampler(LABELS, torch.arange(4), n_way=2.5),
     ValueError, r"'n_way' must be an integer \(got float 2.5\)")
case('EpisodeSampler/n_way="30"',
     lambda c: EpisodeSampler(LABELS, torch.arange(4), n_way='30'),
     ValueError, r"'n_way' must be an integer \(got str '30'\)")
case('EpisodeSampler/k_shot=0',
     lambda c: EpisodeSampler(LABELS, torch.arange(4), k_shot=0), ValueError,
     r"'k_shot' must be a positive integer \(got 0\)")
case('EpisodeSampler/one-class',
     lambda c: EpisodeSampler(LABELS, torch.tensor([1])), ValueError,
     r"'classes' must hold at least 2 classes for an episode \(got 1\)")
case('EpisodeSampler/classes-empty',
     lambda c: EpisodeSampler(LABELS, torch.tensor([], dtype=int)),
     ValueError, r"'classes' must hold at least 2 classes for an episode")
case('EpisodeSampler/classes-duplicates',
     lambda c: EpisodeSampler(LABELS, torch.tensor([1, 1, 2])), ValueError,
     r"'classes' contains duplicates")
case('EpisodeSampler/classes-negative',
     lambda c: EpisodeSampler(LABELS, torch.tensor([-1, 2])), ValueError,
     r"'classes' contains negative class indices")
case('EpisodeSampler/classes-unknown',
     lambda c: EpisodeSampler(LABELS, torch.tensor([1, 9])), ValueError,
     r"1 of 'classes' are unknown \(no image with that label in the pool\)")
case('EpisodeSampler/classes-float',
     lambda c: EpisodeSampler(LABELS, torch.tensor([1.0, 2.0])), ValueError,
     r"'classes' must hold integer indices")
case('EpisodeSampler/labels-float',
     lambda c: EpisodeSampler(LABELS + 0.5, torch.tensor([1, 2])),
     ValueError, r"'labels' must hold integer indices")
case('EpisodeSampler/labels-negative',
     lambda c: EpisodeSampler(LABELS - 1, torch.tensor([1, 2])), ValueError,
     r"'labels' contains negative class indices")
case('EpisodeSampler/k_shot-above-images',
     lambda c: EpisodeSampler(LABELS, torch.arange(4), k_shot=3), ValueError,
     r"4 classes have fewer than k_shot=3 images.*allow_replacement=True")
case('EpisodeSampler/pool-out-of-range',
     lambda c: EpisodeSampler(LABELS, torch.tensor([1, 2]),
                              pool=torch.tensor([99])), ValueError,
     r"'pool' must hold image indices in \[0, 8\)")
case('EpisodeSampler/num_episodes=0',
     lambda c: EpisodeSampler(LABELS, torch.arange(4), num_episodes=0),
     ValueError, r"'num_episodes' must be a positive integer or None")
case('EpisodeSampler/generator-a-seed',
     lambda c: EpisodeSampler(LABELS, torch.arange(4), generator=0),
     ValueError, r"'generator' must be a torch.Generator or None \(got int; "
     r"for a seed")
case('EpisodeSampler/allow_replacement="yes"',
     lambda c: EpisodeSampler(LABELS, torch.arange(4),
                              allow_replacement='yes'), ValueError,
     r"'allow_replacement' must be True or False")
case('EpisodeSampler/len-without-num_episodes',
     lambda c: len(EpisodeSampler(LABELS, torch.arange(4))), TypeError,
     r"EpisodeSampler\(num_episodes=None\) is endless: it has no len\(\)")
case('EpisodeSampler/load_state_dict-empty',
     lambda c: EpisodeSampler(LABELS, torch.arange(4)).load_state_dict({}),
     ValueError, r"'state' must be a EpisodeSampler's state_dict\(\)")
case('EpisodeSampler/load_state_dict-bad-generator-state',
     lambda c: EpisodeSampler(LABELS, torch.arange(4)).load_state_dict(
         {'generator': torch.zeros(3, dtype=torch.uint8)}), ValueError,
     r"'state' holds no generator state")
case('MinibatchSampler/batch_size=0',
     lambda c: MinibatchSampler(LABELS, torch.arange(4), 0), ValueError,
     r"'batch_size' must be a positive integer \(got 0\)")
case('MinibatchSampler/batch_size=2.5',
     lambda c: MinibatchSampler(LABELS, torch.arange(4), 2.5), ValueError,
     r"'batch_size' must be a positive integer \(got float 2.5\)")
case('MinibatchSampler/classes-unknown',
     lambda c: MinibatchSampler(LABELS, torch.tensor([7]), 2), ValueError,
     r"1 of 'classes' are unknown")
case('MinibatchSampler/pool-negative',
     lambda c: MinibatchSampler(LABELS, torch.arange(4), 2,
                                pool=torch.tensor([-1])), ValueError,
     r"'pool' must hold image indices in \[0, 8\)")
case('MinibatchSampler/shuffle="yes"',
     lambda c: MinibatchSampler(LABELS, torch.arange(4), 2, shuffle='yes'),
     ValueError, r"'shuffle' must be True or False")
case('MinibatchSampler/load_state_dict-other-sampler',
     lambda c: MinibatchSampler(LABELS, torch.arange(4), 2).load_state_dict(
         MinibatchSampler(LABELS, torch.arange(2), 2).state_dict()
         | {'pass_order': torch.arange(4)}), ValueError,
     r"'state' is the state of a MinibatchSampler over another number of "
     r"images")


def hold_out(images=torch.arange(8), fraction=0.5, generator=None):
    generator = torch.Generator() if generator is None else generator
    return hold_out_per_class(images, LABELS, fraction, generator)


case('hold_out_per_class/fraction=0', lambda c: hold_out(fraction=0.0),
     ValueError, r"'fraction' must lie in \(0, 1\) \(got 0\)")
case('hold_out_per_class/fraction=1.5', lambda c: hold_out(fraction=1.5),
     ValueError, r"'fraction' must lie in \(0, 1\)")
case('hold_out_per_class/fraction="0.2"', lambda c: hold_out(fraction='0.2'),
     ValueError, r"'fraction' must be a real number \(got str '0.2'\)")
case('hold_out_per_class/images-float',
     lambda c: hold_out(torch.arange(8.0)), ValueError,
     r"'images' must hold integer indices")
case('hold_out_per_class/images-out-of-range',
     lambda c: hold_out(torch.arange(9)), ValueError,
     r"'images' must hold indices into 'labels', in \[0, 8\)")
case('hold_out_per_class/generator-a-seed', lambda c: hold_out(generator=0),
     ValueError, r"'generator' must be a torch.Generator")
case('seen_validation_split/no-labels',
     lambda c: seen_validation_split(c.class_side), ValueError,
     r"Dataset 'TINY' was loaded without features/labels")
case('seen_validation_split/no-validation-classes',
     lambda c: seen_validation_split(toy_load(c.toy(lists={
         'valclasses1.txt': None}))), ValueError,
     r"Validation needs the benchmark's validation classes "
     r"\(trainclasses1.txt, valclasses1.txt\)")
case('seen_validation_split/fraction=1',
     lambda c: seen_validation_split(c.data, 1.0), ValueError,
     r"'fraction' must lie in \(0, 1\)")
case('seen_validation_split/seed="a"',
     lambda c: seen_validation_split(c.data, 0.2, 'a'), ValueError,
     r"'seed' must be an integer \(got str 'a'\)")
case('seen_validation_split/data-a-path',
     lambda c: seen_validation_split(str(c.tiny_root)), ValueError,
     r"'data' must be a ZSLDataset \(got str\)")
case('dataset_wordnet_mapping/unknown',
     lambda c: dataset_wordnet_mapping('XYZ'), ValueError,
     r"No WordNet mapping for dataset 'XYZ'; available: AWA1")
case('dataset_wordnet_mapping/not-a-string',
     lambda c: dataset_wordnet_mapping(3), ValueError,
     r"'dataset' must be a string out of")
case('wordnet_coverage/unknown', lambda c: wordnet_coverage('nope'),
     ValueError, r"No WordNet mapping for dataset 'nope'")
case('read_mapping_rows/None', lambda c: read_mapping_rows(None), ValueError,
     r"'dataset' must be a string")

# ---------------------------------------------------------------------------
# The simulator and the closed-form baselines
# ---------------------------------------------------------------------------
def simulate_toy(c: Ctx, **arguments) -> Any:
    r"""Simulates the toy dataset (its class side) in memory."""
    return simulate_dataset('TOY', c.toy(), **arguments)


for option, value, message in [
        ('isotropic_noise', -1.0, r"'isotropic_noise' must be finite and "
         r">= 0 \(got -1.0\)"),
        ('isotropic_noise', math.nan, r"'isotropic_noise' must be finite"),
        ('isotropic_noise', '2', r"'isotropic_noise' must be a real number "
         r"\(got str '2'\)"),
        ('isotropic_noise', True, r"'isotropic_noise' must be a real number "
         r"\(got bool True\)"),
        ('noise_rank', 0, r"'noise_rank' must be a positive integer"),
        ('hidden_dim', 2.5, r"'hidden_dim' must be a positive integer "
         r"\(got 2.5\)"),
        ('shared_temperature', 0.0, r"'shared_temperature' must be > 0 "
         r"\(got 0.0\)"),
        ('scale', 0.0, r"'scale' must be > 0 \(got 0.0\)"),
        ('shared_neighbours', 99, r"'shared_neighbours' must be at most 4, "
         r"the number of other classes of TOY \(got 99\)"),
]:
    case(f'simulate_dataset/{option}={value!r}',
         lambda c, option=option, value=value: simulate_toy(
             c, **{option: value}), ValueError, message)
for name in ['', '..', '../TOY', '/TOY']:
    case(f'simulate_dataset/dataset={name!r}',
         lambda c, name=name: simulate_dataset(name, c.toy()), ValueError,
         r"'dataset' must be a dataset folder name such as 'AWA2'")
case('simulate_dataset/unknown-option', lambda c: simulate_toy(c, noise=1.0),
     TypeError, r"Unknown simulator options: \['noise'\]")
for seed, message in [(-1, r"'seed' must be at least 0 \(got -1\)"),
                      (1.5, r"'seed' must be an integer \(got float 1.5\)"),
                      ('0', r"'seed' must be an integer \(got str '0'\)")]:
    case(f'simulate_dataset/seed={seed!r}',
         lambda c, seed=seed: simulate_toy(c, seed=seed), ValueError, message)
case('simulate_dataset/attributes=nope',
     lambda c: simulate_toy(c, attributes='nope'), ValueError,
     r"'attributes' must be one of att, original_att, percent")
case('simulate_xlsa17/out-under-a-file',
     lambda c: simulate_xlsa17('TOY', write(c.tmp / 'f', 'x'),
                               data_root=c.toy()), NotADirectoryError,
     r"cannot create the output folder '.*TOY' \(Not a directory\): "
     r"choose a folder you can write to")
case('simulate_xlsa17/over-real-features',
     lambda c: simulate_xlsa17('TOY', c.toy(), data_root=c.toy()),
     FileExistsError, r"'.*res101.mat' exists and is not simulated")

# Small closed-form problems: 12 images of classes 0-2 among 5 classes.
BASE_X = torch.randn(12, 6, generator=g)
BASE_Y = torch.arange(3).repeat(4)
BASE_S = torch.randn(5, 4, generator=g)
BASE_C = torch.arange(3)
ALL_12 = torch.arange(12)


def validated(fit: Callable, **changes) -> Any:
    r""":obj:`fit` (ESZSL's or SAE's validated fit) on the small problem,
    trained, validated and refitted on the same images."""
    arguments = dict(features=BASE_X, labels=BASE_Y, attributes=BASE_S,
                     train_classes=BASE_C, train_images=ALL_12,
                     val_classes=BASE_C, val_images=ALL_12,
                     refit_classes=BASE_C, refit_images=ALL_12)
    return fit(**{**arguments, **changes})


for name, fit in [('fit_eszsl', fit_eszsl), ('fit_sae', fit_sae)]:
    case(f'{name}/labels-float',
         lambda c, fit=fit: fit(BASE_X, BASE_Y.float(), BASE_S, BASE_C),
         ValueError, r"'labels' must hold integer indices \(got dtype "
         r"torch.float32\)")
    case(f'{name}/labels-outside-attributes',
         lambda c, fit=fit: fit(BASE_X, BASE_Y + 3, BASE_S, BASE_C + 3),
         ValueError, r"'classes' holds class 5, outside the 5 classes of "
         r"'attributes' \(rows 0 to 4\)")
    case(f'{name}/classes-negative',
         lambda c, fit=fit: fit(BASE_X, BASE_Y, BASE_S, torch.tensor(
             [0, 1, 2, -1])), ValueError, r"'classes' holds class -1")
    case(f'{name}/classes-empty',
         lambda c, fit=fit: fit(BASE_X, BASE_Y, BASE_S, BASE_C[:0]),
         ValueError, r"'classes' is empty: give at least one class")
    case(f'{name}/labels-not-in-classes',
         lambda c, fit=fit: fit(BASE_X, BASE_Y, BASE_S, BASE_C[:2]),
         ValueError, r"'labels' contains classes that are not in 'classes'")
    case(f'{name}/labels-wrong-length',
         lambda c, fit=fit: fit(BASE_X, BASE_Y[:5], BASE_S, BASE_C),
         ValueError, r"'features' must be \[n, d\] and 'labels' \[n\]")
    case(f'{name}/features-nan',
         lambda c, fit=fit: fit(BASE_X * math.nan, BASE_Y, BASE_S, BASE_C),
         ValueError, r"'features' contains NaN or infinite values")
for ridge, value, message in [
        ('gamma', 0.0, r"'gamma' must be > 0 \(got 0\)"),
        ('lam', -1.0, r"'lam' must be > 0 \(got -1\)"),
        ('gamma', math.inf, r"'gamma' must be finite \(got inf\)"),
        ('lam', '1', r"'lam' must be a real number \(got str '1'\)")]:
    case(f'fit_eszsl/{ridge}={value!r}',
         lambda c, ridge=ridge, value=value: fit_eszsl(
             BASE_X, BASE_Y, BASE_S, BASE_C, **{ridge: value}), ValueError,
         message)
case('fit_sae/lam=0', lambda c: fit_sae(BASE_X, BASE_Y, BASE_S, BASE_C,
                                        lam=0.0),
     ValueError, r"'lam' must be > 0 \(got 0\)")
case('fit_sae/lam=nan', lambda c: fit_sae(BASE_X, BASE_Y, BASE_S, BASE_C,
                                          lam=math.nan),
     ValueError, r"'lam' must be finite \(got nan\)")
case('fit_sae/solver=lstsq', lambda c: fit_sae(BASE_X, BASE_Y, BASE_S, BASE_C,
                                               solver='lstsq'),
     ValueError, r"'solver' must be one of \('eigh', 'sylvester'\)")
case('attribute_map/lam=0', lambda c: attribute_map(BASE_S, BASE_C, 0.0),
     ValueError, r"'lam' must be > 0 \(got 0\)")
for name, fit in [('fit_eszsl_validated', fit_eszsl_validated),
                  ('fit_sae_validated', fit_sae_validated)]:
    case(f'{name}/grid-empty', lambda c, fit=fit: validated(fit, grid=()),
         ValueError, r"'grid' is empty: give at least one value")
    case(f'{name}/grid-holds-0',
         lambda c, fit=fit: validated(fit, grid=(1.0, 0.0)), ValueError,
         r"'grid' must hold finite numbers > 0 \(got 0.0\)")
case('fit_sae_validated/spaces-unknown',
     lambda c: validated(fit_sae_validated, spaces=('visual', )), ValueError,
     r"'spaces' must hold entries of \('semantic', 'feature'\) "
     r"\(got 'visual'\)")
V_FIT = fit_eszsl(BASE_X, BASE_Y, BASE_S, BASE_C)
W_FIT = fit_sae(BASE_X, BASE_Y, BASE_S, BASE_C)
for name, predict, weight in [('predict_eszsl', predict_eszsl, V_FIT),
                              ('predict_sae', predict_sae, W_FIT)]:
    letter = 'v' if predict is predict_eszsl else 'w'
    case(f'{name}/features-other-width',
         lambda c, predict=predict, weight=weight: predict(
             weight, BASE_X[:, :3], BASE_S, BASE_C), ValueError,
         rf"'{letter}' \(\d, \d\) was fitted on 6-d features and 4 "
         rf"attributes; got 3-d 'features' and 4 'attributes'")
    case(f'{name}/attributes-other-width',
         lambda c, predict=predict, weight=weight: predict(
             weight, BASE_X, BASE_S[:, :2], BASE_C), ValueError,
         rf"'{letter}' .* got 6-d 'features' and 2 'attributes'")
    case(f'{name}/classes-outside-attributes',
         lambda c, predict=predict, weight=weight: predict(
             weight, BASE_X, BASE_S, torch.tensor([4, 9])), ValueError,
         r"'classes' holds class 9, outside the 5 classes of 'attributes'")
    case(f'{name}/classes-empty',
         lambda c, predict=predict, weight=weight: predict(
             weight, BASE_X, BASE_S, BASE_C[:0]), ValueError,
         r"'classes' is empty: give at least one class")
    case(f'{name}/classes-float',
         lambda c, predict=predict, weight=weight: predict(
             weight, BASE_X, BASE_S, BASE_C.float()), ValueError,
         r"'classes' must hold integer indices \(got dtype torch.float32\)")
case('predict_sae/space=visual',
     lambda c: predict_sae(W_FIT, BASE_X, BASE_S, BASE_C, space='visual'),
     ValueError, r"'space' must be one of \('semantic', 'feature'\)")
case('eszsl_metrics/no-features',
     lambda c: eszsl_metrics(c.class_side), ValueError,
     r"'data' \(TINY\) has no image features: load it with "
     r"load_features=True")
case('sae_metrics/no-features', lambda c: sae_metrics(c.class_side),
     ValueError, r"'data' \(TINY\) has no image features")

# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------
case('CentroidEncoder/attribute_dim=0', lambda c: CentroidEncoder(0),
     ValueError, r"'attribute_dim' must be a positive integer \(got 0\)")
case('CentroidEncoder/attribute_dim=2.5', lambda c: CentroidEncoder(2.5),
     ValueError, r"'attribute_dim' must be a positive integer \(got float")
case('CentroidEncoder/out_channels=-1',
     lambda c: CentroidEncoder(4, out_channels=-1), ValueError,
     r"'out_channels' must be a positive integer \(got -1\)")
case('CentroidEncoder/num_centroids=0',
     lambda c: CentroidEncoder(4, num_centroids=0), ValueError,
     r"'num_centroids' must be a positive integer")
case('CentroidEncoder/attributes-wrong-width',
     lambda c: CentroidEncoder(4, 8)(torch.randn(3, 5)), ValueError,
     r"'attributes' must have 4 features")
case('CentroidEncoder/attributes-1d',
     lambda c: CentroidEncoder(4, 8)(torch.randn(4)), ValueError,
     r"'attributes' must have 2 dimensions")
case('CentroidEncoder/attributes-nan',
     lambda c: CentroidEncoder(4, 8)(torch.full((3, 4), math.nan)),
     ValueError, r"'attributes' contains NaN")
case('CentroidEncoder/fit_centroids-fewer-classes-than-centroids',
     lambda c: CentroidEncoder(4, 8, 3).fit_centroids(torch.randn(2, 4)),
     ValueError, r"'k' must lie in \[1, 2\] for 2 points \(got 3\)")
case('CentroidEncoder/fit_centroids-wrong-width',
     lambda c: CentroidEncoder(4, 8).fit_centroids(torch.randn(5, 3)),
     ValueError, r"'seen_attributes' must have 4 features")
case('CentroidEncoder/standardize_-one-class',
     lambda c: CentroidEncoder(4, 8).standardize_(torch.randn(1, 4)),
     ValueError, r"'seen_attributes' needs at least 2 classes")
case('kmeans/k=0', lambda c: kmeans(X, 0), ValueError,
     r"'k' must lie in \[1, 5\]")
case('kmeans/k-above-points', lambda c: kmeans(X, 6), ValueError,
     r"'k' must lie in \[1, 5\] for 5 points \(got 6\)")
case('kmeans/k=2.5', lambda c: kmeans(X, 2.5), ValueError,
     r"'k' must be an integer \(got float 2.5\)")
case('kmeans/num_init=0', lambda c: kmeans(X, 2, num_init=0), ValueError,
     r"'num_init' must be a positive integer")
case('kmeans/num_iterations=0', lambda c: kmeans(X, 2, num_iterations=0),
     ValueError, r"'num_iterations' must be a positive integer")
case('kmeans/x-nan', lambda c: kmeans(X + math.nan, 2), ValueError,
     r"'x' contains NaN")
case('kmeans/generator-a-seed', lambda c: kmeans(X, 2, generator=0),
     ValueError, r"'generator' must be a torch.Generator or None")
case('RelationHead/score="softmax"', lambda c: RelationHead(4, 6,
                                                            score='softmax'),
     ValueError, r"'score' must be one of sigmoid, linear \(got 'softmax'\)")
case('RelationHead/class_channels=0', lambda c: RelationHead(0, 6),
     ValueError, r"'class_channels' must be a positive integer \(got 0\)")
case('RelationHead/hidden_channels=-1',
     lambda c: RelationHead(4, 6, hidden_channels=-1), ValueError,
     r"'hidden_channels' must be a positive integer \(got -1\)")
case('RelationHead/image_channels=2.5', lambda c: RelationHead(4, 2.5),
     ValueError, r"'image_channels' must be a positive integer")
case('RelationHead/class_vectors-wrong-width',
     lambda c: RelationHead(4, 6, 8)(torch.randn(3, 5), X), ValueError,
     r"'class_vectors' must have 4 features")
case('RelationHead/images-wrong-width',
     lambda c: RelationHead(4, 6, 8)(torch.randn(3, 4), X[:, :5]),
     ValueError, r"'images' must have 6 features")
case('RelationHead/images-nan',
     lambda c: RelationHead(4, 6, 8)(torch.randn(3, 4), X + math.nan),
     ValueError, r"'images' contains NaN")
case('RelationHead/block_size=-1',
     lambda c: RelationHead(4, 6, 8)(torch.randn(3, 4), X, block_size=-1),
     ValueError, r"'block_size' must be a positive integer or None")
case('APNet/graph="knn"', lambda c: APNet(4, 6, 8, 8, graph='knn'),
     ValueError, r"'graph' must be one of learned, wordnet, none \(got "
     r"'knn'\)")
case('APNet/wordnet-without-class_prior',
     lambda c: APNet(4, 6, 8, 8, graph='wordnet'), ValueError,
     r"graph='wordnet' needs 'class_prior'")
case('APNet/class_prior-not-square',
     lambda c: APNet(4, 6, 8, 8, graph='wordnet',
                     class_prior=torch.ones(3, 4)), ValueError,
     r"'class_prior' must be a square \[C, C\] matrix")
case('APNet/class_prior-a-list',
     lambda c: APNet(4, 6, 8, 8, graph='wordnet',
                     class_prior=[[0, 1], [1, 0]]), ValueError,
     r"'class_prior' must be a torch.Tensor \(got list\)")
case('APNet/class_prior-negative',
     lambda c: APNet(4, 6, 8, 8, graph='wordnet',
                     class_prior=-torch.ones(3, 3)), ValueError,
     r"'class_prior' must hold finite, non-negative weights")
case('APNet/threshold=2', lambda c: APNet(4, 6, 8, 8, threshold=2.0),
     ValueError, r"'threshold' must lie in \[-1, 1\]")
case('APNet/propagation_temperature=-1',
     lambda c: APNet(4, 6, 8, 8, propagation_temperature=-1.0), ValueError,
     r"'propagation_temperature' must be at least 0")
case('APNet/logit_scale=0', lambda c: APNet(4, 6, 8, 8, logit_scale=0.0),
     ValueError, r"'logit_scale' must be positive \(got 0\)")
case('APNet/logit_scale="30"', lambda c: APNet(4, 6, 8, 8, logit_scale='30'),
     ValueError, r"'logit_scale' must be a real number")
case('APNet/class_vectors-wordnet-without-classes',
     lambda c: APNet(4, 6, 8, 8, proj_channels=4, graph='wordnet',
                     class_prior=torch.ones(3, 3)).class_vectors(
                         torch.randn(3, 4)), ValueError,
     r"graph='wordnet' needs 'classes'")
case('APNet/classes-wrong-count',
     lambda c: APNet(4, 6, 8, 8, proj_channels=4, graph='wordnet',
                     class_prior=torch.ones(3, 3)).class_vectors(
                         torch.randn(3, 4), torch.tensor([0, 1])), ValueError,
     r"'classes' must hold one index per class vector \(got 2 for 3\)")
case('APNet/class_graph-of-graph-none',
     lambda c: APNet(4, 6, 8, 8, graph='none').class_graph(
         torch.randn(3, 8)), ValueError,
     r"graph='none' builds no class graph")
case('APNet/images-wrong-width',
     lambda c: APNet(4, 6, 8, 8, proj_channels=4)(X[:, :5], torch.randn(
         3, 4)), ValueError, r"'images' must have 6 features")

# ---------------------------------------------------------------------------
# Zero-shot learning: configuration, metrics, evaluation, training
# ---------------------------------------------------------------------------
for name, value, message in [
        ('graph', 'knn', r"must be one of learned, wordnet, none"),
        ('training', 'online', r"must be one of episodic, minibatch"),
        ('epochs', 0, r"must be positive \(got 0\)"),
        ('epochs', '3', r"must be an integer \(got str '3'\)"),
        ('n_way', 1, r"must be at least 2"),
        ('n_way', 2.5, r"must be an integer \(got float 2.5\)"),
        ('k_shot', 0, r"must be positive"),
        ('num_centroids', 0, r"must be positive"),
        ('class_channels', -8, r"must be positive"),
        ('lr_decay_epoch', 0, r"must be positive or None"),
        ('lr_decay_epoch', 2.5, r"must be an integer or None"),
        ('iterations_per_epoch', 0, r"must be positive or None"),
        ('seen_val_fraction', 1.0, r"must lie in \(0, 1\)"),
        ('seen_val_fraction', '0.2', r"must be a finite number"),
        ('logit_scale', 0.0, r"must be positive"),
        ('logit_scale', -1.0, r"must be positive"),
        ('logit_scale', math.inf, r"must be a finite number"),
        ('lr', -1.0, r"must be positive"),
        ('lr', math.nan, r"must be a finite number"),
        ('weight_decay', -1e-4, r"must be at least 0"),
        ('lr_decay', 0.0, r"must be positive"),
        ('threshold', 2.0, r"must lie in \[-1, 1\]"),
        ('propagation_temperature', -1.0, r"must be at least 0"),
        ('propagation_temperature', 1e39, r"must be at most 3.40282e\+38 "
         r"\(got 1e\+39\)"),
        ('seed', 'a', r"must be an integer"),
        # seed + 1 seeds the sampler: 2^64 - 1 overflowed torch.manual_seed.
        ('seed', 2**64 - 1, r"must lie in \[0, 2\^32 - 1\]"),
        ('report_test_selected', 'yes', r"must be True or False"),
]:
    case(f'TrainConfig/{name}={value!r}',
         lambda c, name=name, value=value: TrainConfig(**{name: value}),
         ValueError, f"'{name}' {message}")
case('TrainConfig.from_dict/unknown-key',
     lambda c: TrainConfig.from_dict({'graph': 'learned', 'depth': 3}),
     ValueError, r"Unknown configuration keys: 'depth'")
case('per_class_accuracy/lengths-differ',
     lambda c: per_class_accuracy(torch.tensor([0, 1]), torch.tensor([0])),
     ValueError, r"'pred' and 'target' must have the same number of "
     r"elements")
case('per_class_accuracy/no-class-present',
     lambda c: per_class_accuracy(LABELS, LABELS, torch.tensor([7])),
     ValueError, r"None of 'classes' has a sample in 'target'")
case('per_class_accuracy/empty',
     lambda c: per_class_accuracy(torch.tensor([], dtype=int),
                                  torch.tensor([], dtype=int)), ValueError,
     r"'classes' is empty")
case('per_class_accuracy/target-negative',
     lambda c: per_class_accuracy(LABELS, LABELS - 1), ValueError,
     r"'target' contains negative class indices")
case('per_class_accuracy/pred-float',
     lambda c: per_class_accuracy(LABELS + 0.5, LABELS), ValueError,
     r"'pred' must hold integer indices")
case('harmonic_mean/nan', lambda c: harmonic_mean(math.nan, 50.0),
     ValueError, r"'seen' must be finite")
case('harmonic_mean/negative', lambda c: harmonic_mean(50.0, -1.0),
     ValueError, r"'unseen' must be at least 0")
case('harmonic_mean/string', lambda c: harmonic_mean('50', 50.0), ValueError,
     r"'seen' must be a real number \(got str '50'\)")
case('evaluate/no-features',
     lambda c: evaluate(load_model(c.run, 'zsl'), c.class_side), ValueError,
     r"Evaluation needs image features: load the dataset with "
     r"load_features=True")
case('evaluate/calibration="best"',
     lambda c: evaluate(load_model(c.run, 'zsl'), c.data, 'best'),
     ValueError, r"'calibration' must be a finite number chosen on "
     r"validation data, or None \(got 'best'\)")
case('best_calibration/no-unseen-images',
     lambda c: best_calibration(GZSLScores(
         lambda images, classes: torch.zeros(images.numel(), classes.numel()),
         LABELS, torch.arange(4), torch.tensor([], dtype=int),
         torch.tensor([0, 1]), torch.tensor([2, 3]))), ValueError,
     r"'task' needs images of seen and of unseen classes")
case('zsl_accuracy/no-images',
     lambda c: zsl_accuracy(
         lambda images, classes: torch.zeros(images.numel(), classes.numel()),
         LABELS, torch.tensor([], dtype=int), torch.tensor([2, 3])),
     ValueError, r"None of 'classes' has a sample in 'target'")
case('zsl_accuracy/no-classes',  # Was an IndexError (argmax over none).
     lambda c: zsl_accuracy(
         lambda images, classes: torch.zeros(images.numel(), classes.numel()),
         LABELS, torch.arange(4), torch.tensor([], dtype=int)),
     ValueError, r"'classes' is empty: pass the candidate classes")
case('GZSLScores/no-unseen-classes',
     lambda c: GZSLScores(
         lambda images, classes: torch.zeros(images.numel(), classes.numel()),
         LABELS, torch.arange(4), torch.arange(4, 8), torch.tensor([0, 1]),
         torch.tensor([], dtype=int)), ValueError,
     r"'unseen_classes' is empty: GZSL classifies images among the seen and "
     r"the unseen classes; pass at least one of each")
case('evaluate_scores/no-unseen-classes',
     lambda c: evaluate_scores(
         dataclasses.replace(c.data, unseen_classes=torch.tensor(
             [], dtype=int)),
         lambda images, classes: torch.zeros(images.numel(), classes.numel())),
     ValueError, r"'data.unseen_classes' is empty: the test protocol needs "
     r"unseen and seen classes")
case('validate/no-validation-classes',
     lambda c: validate(c.data, seen_validation_split(c.data)._replace(
         val_classes=torch.tensor([], dtype=int)),
         lambda images, classes: torch.zeros(images.numel(), classes.numel())),
     ValueError, r"'split.val_classes' is empty: .*seen_validation_split")
for what, predict, message in [
        ('outside-the-candidates',
         lambda images, classes: torch.full((images.numel(), ), 99),
         r"'predict_classes' returned 99, not one of the \d+ candidate "
         r"classes it was given"),
        ('one-per-call', lambda images, classes: classes[:1],
         r"'predict_classes' must return one class per image \(\d+; got 1 "
         r"predictions\)"),
        ('None', lambda images, classes: None,
         r"'predict_classes' must return one class per image \(\d+; got "
         r"NoneType\)")]:
    case(f'evaluate_predictions/{what}',
         lambda c, predict=predict: evaluate_predictions(c.data, predict),
         ValueError, message)
case('train_model/no-features',
     lambda c: train_model(None, c.class_side, torch.arange(4),
                           torch.arange(4), SMALL), ValueError,
     r"Training needs image features: load the dataset with "
     r"load_features=True")
case('train_model/resume-without-checkpoint',
     lambda c: train_model(build_model(SMALL, c.data, c.data.seen_classes),
                           c.data, c.data.trainval_loc, c.data.seen_classes,
                           SMALL, resume=True, progress=False),
     FileNotFoundError, r"no checkpoint to resume from at 'None': start "
     r"without --resume")
case('train_model/diverged',
     lambda c: train_model(diverging_model(c), c.data, c.data.trainval_loc,
                           c.data.seen_classes, SMALL, progress=False),
     TrainingDiverged, r"training diverged in epoch 1, step 1: the loss is "
     r"nan; lower the learning rate \(lr=0.001\)")
case('load_checkpoint/missing',
     lambda c: load_checkpoint(c.tmp / 'checkpoint.pt', SMALL),
     FileNotFoundError, r"no checkpoint to resume from at "
     r"'.*checkpoint.pt'")
case('load_checkpoint/random-bytes',
     lambda c: load_checkpoint(write(c.tmp / 'c.pt', CORRUPT), SMALL),
     ValueError, r"'.*c.pt' is not a readable apnet-zsl checkpoint.*delete "
     r"it to start over")
case('load_checkpoint/empty',
     lambda c: load_checkpoint(write(c.tmp / 'c.pt', b''), SMALL),
     ValueError, r"'.*c.pt' is not a readable apnet-zsl checkpoint")
case('load_checkpoint/foreign',
     lambda c: load_checkpoint(write(c.tmp / 'c.pt', [1, 2]), SMALL),
     ValueError, r"'.*c.pt' is not an apnet-zsl checkpoint \(it lacks")
case('load_checkpoint/other-configuration',
     lambda c: load_checkpoint(write(c.tmp / 'c.pt', checkpoint_of(
         SMALL.replace(lr=0.5))), SMALL), ValueError,
     r"'.*c.pt' was written with another configuration \(differs in: lr\)")
case('run/out-a-file',
     lambda c: run(c.data, SMALL, write(c.tmp / 'out', 'x'), progress=False),
     NotADirectoryError, r"the run directory '.*out' is a file: choose "
     r"another --out")
case('run/k_shot-beyond-a-class',
     lambda c: run(c.data, SMALL.replace(k_shot=1000), c.tmp,
                   progress=False),
     ValueError, r"k_shot=1000 \(--k-shot\) exceeds the \d+ training "
     r"images of class '.*', the fewest among the classes trained on: use "
     r"k_shot <= \d+")
case('run/resume-and-overwrite',
     lambda c: run(c.data, SMALL, c.tmp, resume=True, overwrite=True,
                   progress=False),
     ValueError, r"--resume continues the run in --out and --overwrite "
     r"starts it over: pass one of them")
case('run/out-empty',
     lambda c: run(c.data, SMALL, '', progress=False),
     ValueError, r"the run directory \(--out\) is empty: name a folder")
case('run/resume-nothing',
     lambda c: run(c.data, SMALL, c.tmp, resume=True, progress=False),
     FileNotFoundError, r"nothing to resume in '.*' .*start without "
     r"--resume")
case('run/resume-finished',
     lambda c: run(c.data, SMALL, c.run_copy(), resume=True, progress=False),
     FileExistsError, r"'.*run' holds a finished run \(metrics.json\): "
     r"nothing to resume")
case('run/finished-without-overwrite',
     lambda c: run(c.data, SMALL, c.run_copy(), progress=False),
     FileExistsError, r"'.*run' holds a finished run: choose another --out, "
     r"or pass --overwrite")
case('run/interrupted-without-resume',
     lambda c: run(c.data, SMALL, c.checkpoint_run(b'x'), progress=False),
     FileExistsError, r"holds an interrupted run \(continue it with "
     r"--resume\)")
case('run/n_way-above-seen-classes',
     lambda c: run(c.data, SMALL.replace(n_way=7), c.tmp, progress=False),
     ValueError, r"n_way=7 exceeds the 6 seen classes of TINY: use n_way "
     r"<= 6")
case('check_config_fits/validation-without-val-classes',
     lambda c: check_config_fits(SMALL.replace(model_selection='validation'),
                                 toy_load(c.toy(lists={
                                     'valclasses1.txt': None}))),
     ValueError, r"model_selection='validation' needs the benchmark's "
     r"validation classes .*or use model_selection='none'")
case('load_model/no-metrics.json', lambda c: load_model(c.tmp),
     FileNotFoundError, r"No metrics.json in '.*': is it a finished "
     r"'apnet-zsl train' run")
case('load_model/metrics.json-corrupt',
     lambda c: load_model(c.run_with('metrics.json', '{"models": ')),
     ValueError, r"'.*metrics.json' is not the metrics.json of an apnet-zsl "
     r"run \(JSONDecodeError.*train the run again")
case('load_model/metrics.json-without-models',
     lambda c: load_model(c.run_with('metrics.json', '{"dataset": "TINY"}')),
     ValueError, r"'.*metrics.json' is not the metrics.json of an apnet-zsl "
     r"run \(KeyError")
case('load_model/metrics.json-binary',
     lambda c: load_model(c.run_with('metrics.json', CORRUPT)), ValueError,
     r"'.*metrics.json' is not the metrics.json of an apnet-zsl run")
case('load_model/unknown-row', lambda c: load_model(c.run, 'best'),
     ValueError, r"Run '.*' has no model for row 'best' \(it has: zsl, "
     r"gzsl\)")
case('load_model/model-file-missing',
     lambda c: load_model(c.run_without('model-epoch1.pt')),
     FileNotFoundError, r"No trained model at '.*model-epoch1.pt': train the "
     r"run again")
case('load_model/model-file-random-bytes',
     lambda c: load_model(c.run_with('model-epoch1.pt', CORRUPT)),
     ValueError, r"'.*model-epoch1.pt' is not a readable apnet-zsl model "
     r"\(\w+\); train the run again \('apnet-zsl train ... --overwrite'\)")
case('load_model/model-file-empty',
     lambda c: load_model(c.run_with('model-epoch1.pt', b'')), ValueError,
     r"'.*model-epoch1.pt' is not a readable apnet-zsl model")
case('load_model/model-file-a-tensor',
     lambda c: load_model(c.run_with('model-epoch1.pt', torch.ones(3))),
     ValueError, r"'.*model-epoch1.pt' is not an apnet-zsl model \(it lacks "
     r"config, dataset")
case('load_model/model-file-a-checkpoint',
     lambda c: load_model(c.run_with('model-epoch1.pt',
                                     checkpoint_of(SMALL))), ValueError,
     r"'.*model-epoch1.pt' is not an apnet-zsl model")
case('load_model/model-weights-of-another-size',
     lambda c: load_model(c.run_with('model-epoch1.pt', saved_model(
         c, attribute_dim=17))), ValueError,
     r"'.*model-epoch1.pt' holds no model of its configuration "
     r"\(RuntimeError: Error\(s\) in loading state_dict for APNet")
case('load_model/model-config-unknown-key',
     lambda c: load_model(c.run_with('model-epoch1.pt', saved_model(
         c, config={**SMALL.to_dict(), 'depth': 3}))), ValueError,
     r"'.*model-epoch1.pt' holds no model of its configuration "
     r"\(ValueError: Unknown configuration keys: 'depth'\)")
case('load_model/model-config-bad-value',
     lambda c: load_model(c.run_with('model-epoch1.pt', saved_model(
         c, config={**SMALL.to_dict(), 'epochs': 0}))), ValueError,
     r"'.*model-epoch1.pt' holds no model of its configuration "
     r"\(ValueError: 'epochs' must be positive")


def checkpoint_of(config: TrainConfig) -> dict:
    return {'epoch': 1, 'config': config.to_dict(), 'model': {},
            'optimizer': {}, 'scheduler': {}, 'sampler': {}, 'history': []}


def saved_model(c: Ctx, **changes) -> dict:
    saved = torch.load(c.run / 'model-epoch1.pt', weights_only=True)
    return {**saved, **changes}


def diverging_model(c: Ctx) -> APNet:
    model = build_model(SMALL, c.data, c.data.seen_classes)
    with torch.no_grad():  # What a learning rate far too high leads to.
        model.head.lin_out.bias.fill_(math.nan)
    return model


# ---------------------------------------------------------------------------
# The command line: one line 'error: ...' (status 1), or argparse's usage
# error (status 2) for a malformed flag
# ---------------------------------------------------------------------------
USAGE = r"apnet-zsl( \w+)?: error: "
cli('cli/no-command', lambda c: [], USAGE + r"the following arguments are "
    r"required: command", status=2)
cli('cli/unknown-command', lambda c: ['fit'], USAGE + r"argument command: "
    r"invalid choice: 'fit'", status=2)
cli('cli/train-without-dataset',
    lambda c: ['train', '--root', str(c.tmp), '--out', str(c.tmp)],
    USAGE + r"the following arguments are required: --dataset", status=2)
cli('cli/evaluate-without-run', lambda c: ['evaluate'],
    USAGE + r"the following arguments are required: --run", status=2)
# A flag's value: malformed (argparse, status 2) or out of range (status 1).
for flag, value, status, message in [
        ('--graph', 'knn', 2, r"invalid choice: 'knn'"),
        ('--epochs', 'abc', 2, r"invalid int value: 'abc'"),
        ('--n-way', '1.5', 2, r"invalid int value: '1.5'"),
        ('--lr', 'abc', 2, r"invalid float value: 'abc'"),
        ('--device', 'tpu', 2, r"invalid choice: 'tpu'"),
        ('--recipe', 'slow', 2, r"invalid choice: 'slow'"),
        ('--variant', 'mine', 2, r"invalid choice: 'mine'"),
        ('--seed', 'abc', 2, r"invalid int value: 'abc'"),
        ('--lr-decay-epoch', 'soon', 2, r"invalid _optional_int value"),
        ('--epochs', '0', 1, r"'epochs' must be positive \(got 0\)"),
        ('--epochs', '-5', 1, r"'epochs' must be positive"),
        ('--n-way', '1', 1, r"'n_way' must be at least 2"),
        ('--k-shot', '0', 1, r"'k_shot' must be positive"),
        ('--num-centroids', '0', 1, r"'num_centroids' must be positive"),
        ('--class-channels', '0', 1, r"'class_channels' must be positive"),
        ('--logit-scale', '0', 1, r"'logit_scale' must be positive"),
        ('--logit-scale', 'nan', 1, r"'logit_scale' must be a finite number"),
        ('--lr', '-1', 1, r"'lr' must be positive"),
        ('--lr', 'inf', 1, r"'lr' must be a finite number"),
        ('--weight-decay', '-1', 1, r"'weight_decay' must be at least 0"),
        ('--lr-decay', '0', 1, r"'lr_decay' must be positive"),
        ('--threshold', '2', 1, r"'threshold' must lie in \[-1, 1\]"),
        ('--propagation-temperature', '-1', 1,
         r"'propagation_temperature' must be at least 0"),
        ('--seen-val-fraction', '1', 1, r"'seen_val_fraction' must lie in "
         r"\(0, 1\)"),
        ('--lr-decay-epoch', '0', 1, r"'lr_decay_epoch' must be positive or "
         r"None"),
        ('--iterations-per-epoch', '0', 1, r"'iterations_per_epoch' must be "
         r"positive or None"),
]:
    if status == 2:
        message = USAGE + f"argument {flag}: {message}"
    cli(f'cli/train{flag}={value}',
        lambda c, flag=flag, value=value: c.train(flag, value), message,
        status)
cli('cli/train--n-way-above-seen-classes', lambda c: c.train('--n-way', '7'),
    r"n_way=7 exceeds the 6 seen classes of TINY: use n_way <= 6")
cli('cli/train--dataset-missing',
    lambda c: c.train(root=c.tmp) + ['--dataset', 'NOPE'],
    r"No dataset folder 'NOPE' in '.*' \(found: nothing\)")
cli('cli/train--root-a-file', lambda c: c.train(root=write(c.tmp / 'r',
                                                           'x')),
    r"The data root '.*r' is a file: pass the folder holding <DATASET>/")
cli('cli/train--out-a-file', lambda c: c.train(out=write(c.tmp / 'o', 'x')),
    r"the run directory '.*o' is a file: choose another --out")
cli('cli/train--out-under-a-file',
    lambda c: c.train(out=write(c.tmp / 'o', 'x') / 'run'),
    r"cannot create the output folder '.*run' \(Not a directory\): choose "
    r"a folder you can write to")
cli('cli/tune--out-under-a-file',
    lambda c: ['tune', '--dataset', 'TINY', '--root', str(c.tiny_root),
               '--out', str(write(c.tmp / 'o', 'x') / 'grid'), '--grid',
               'lr=1e-3'] + SMALL_FLAGS[:-3],
    r"cannot create the output folder '.*lr=0.001' \(Not a directory\)")
cli('cli/simulate--out-under-a-file',
    lambda c: ['simulate', '--dataset', 'TOY', '--data-root', str(c.toy()),
               '--out', str(write(c.tmp / 'o', 'x'))],
    r"cannot create the output folder '.*TOY' \(Not a directory\)")
cli('cli/baselines--seed-negative',
    lambda c: ['baselines', '--dataset', 'TINY', '--root', str(c.tiny_root),
               '--seed', '-1'],
    r"'seed' must lie in \[0, 2\^32 - 1\] \(got -1\)")
cli('cli/baselines--seen-val-fraction-1',
    lambda c: ['baselines', '--dataset', 'TINY', '--root', str(c.tiny_root),
               '--seen-val-fraction', '1'],
    r"'seen_val_fraction' must lie in \(0, 1\) \(got 1.0\)")
cli('cli/baselines--out-directory',
    lambda c: ['baselines', '--dataset', 'TINY', '--root', str(c.tiny_root),
               '--out', str(c.tmp)],
    r"--out '.*' is a directory: give a JSON file name")
cli('cli/baselines-no-features',
    lambda c: ['baselines', '--dataset', 'TINY', '--root', str(c.tmp)],
    r"No dataset folder 'TINY' in")
cli('cli/compare--out-under-a-file',
    lambda c: ['compare', '--runs', str(c.run), '--out',
               str(write(c.tmp / 'o', 'x') / 'table.md')],
    r"the output folder '.*o' is a file: choose another folder")
cli('cli/train--resume-nothing', lambda c: c.train('--resume'),
    r"nothing to resume in '.*run'.*start without --resume")
cli('cli/train-into-finished-run', lambda c: c.train(out=c.run_copy()),
    r"'.*run' holds a finished run: choose another --out, or pass "
    r"--overwrite")
cli('cli/train--resume-finished-run',
    lambda c: c.train('--resume', out=c.run_copy()),
    r"'.*run' holds a finished run \(metrics.json\): nothing to resume")
cli('cli/train-into-interrupted-run',
    lambda c: c.train(out=c.checkpoint_run(b'x')),
    r"holds an interrupted run \(continue it with --resume\)")
cli('cli/train--resume-corrupt-checkpoint',
    lambda c: c.train('--resume', out=c.checkpoint_run(CORRUPT)),
    r"'.*checkpoint.pt' is not a readable apnet-zsl checkpoint")
cli('cli/train--resume-empty-checkpoint',
    lambda c: c.train('--resume', out=c.checkpoint_run(b'')),
    r"'.*checkpoint.pt' is not a readable apnet-zsl checkpoint")
cli('cli/train--resume-foreign-checkpoint',
    lambda c: c.train('--resume', out=c.checkpoint_run({'weights': 1})),
    r"'.*checkpoint.pt' is not an apnet-zsl checkpoint \(it lacks")
cli('cli/train--resume-other-configuration',
    lambda c: c.train('--resume', out=c.checkpoint_run(
        checkpoint_of(SMALL.replace(lr=0.5)))),
    r"'.*checkpoint.pt' was written with another configuration "
    r"\(differs in: lr, lr_decay_epoch\); run again with the options it was "
    r"written with, or start over in another output folder")
cli('cli/evaluate-no-metrics.json', lambda c: ['evaluate', '--run',
                                               str(c.tmp)],
    r"No metrics.json in '.*': is it a finished 'apnet-zsl train' run")
cli('cli/evaluate-run-a-file',
    lambda c: ['evaluate', '--run', str(write(c.tmp / 'f', 'x'))],
    r"No metrics.json in '.*f'")
cli('cli/evaluate-corrupt-metrics.json',
    lambda c: ['evaluate', '--run', str(c.run_with('metrics.json', '{'))],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(JSONDecodeError.*train the run again")
cli('cli/evaluate-metrics.json-without-config',
    lambda c: ['evaluate', '--run', str(c.run_with('metrics.json', '{}'))],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(KeyError")
cli('cli/evaluate-root-without-dataset',
    lambda c: ['evaluate', '--run', str(c.run), '--root', str(c.tmp)],
    r"No dataset folder 'TINY' in '.*'")
cli('cli/evaluate-corrupt-model',
    lambda c: ['evaluate', '--run', str(c.run_with('model-epoch1.pt',
                                                   CORRUPT))],
    r"'.*model-epoch1.pt' is not a readable apnet-zsl model")
cli('cli/evaluate-foreign-model',
    lambda c: ['evaluate', '--run', str(c.run_with('model-epoch1.pt',
                                                   {'a': 1}))],
    r"'.*model-epoch1.pt' is not an apnet-zsl model")
cli('cli/compare-no-metrics.json',
    lambda c: ['compare', '--runs', str(c.run), str(c.tmp)],
    r"No metrics.json in '.*': is it a finished 'apnet-zsl train' run")
cli('cli/compare-metrics.json-without-figures',
    lambda c: ['compare', '--runs', str(c.run_with('metrics.json', json.dumps(
        {k: v for k, v in c.metrics().items() if k != 'gzsl_h'})))],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(KeyError: 'gzsl_h'\)")
cli('cli/evaluate-unfinished-run',
    lambda c: ['evaluate', '--run', str(c.checkpoint_run(b'x'))],
    r"'.*' holds an unfinished run \(last checkpoint \w+\.pt, no "
    r"metrics.json\): finish it with 'apnet-zsl train ... --out .* "
    r"--resume'")
cli('cli/evaluate-metrics.json-without-row-epochs',
    lambda c: ['evaluate', '--run', str(c.run_with('metrics.json', json.dumps(
        {**c.metrics(), 'epochs': {}})))],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(TypeError: 'epochs' has no epoch for the zsl row\)")
cli('cli/compare-metrics.json-baseline-without-figures',
    lambda c: ['compare', '--runs', str(c.run_with('metrics.json', json.dumps(
        {**c.metrics(), 'baselines': {'ESZSL': {'zsl_acc': 'x'}}})))],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(TypeError: baseline 'ESZSL' lacks a figure\)")
cli('cli/compare-metrics.json-baseline-half-calibrated',
    lambda c: ['compare', '--runs', str(c.run_with('metrics.json', json.dumps(
        {**c.metrics(), 'baselines': {'ESZSL': {
            **dict.fromkeys(('zsl_acc', 'gzsl_unseen', 'gzsl_seen', 'gzsl_h'),
                            1.0), 'gzsl_cal_h': 'oops'}}})))],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run "
    r"\(TypeError: baseline 'ESZSL' lacks a figure\)")
cli('cli/compare-a-run-twice',
    lambda c: ['compare', '--runs', str(c.run), str(c.run) + '/.'],
    r"'run_dirs' \(--runs\) names the run '.*' twice: each run counts once")
cli('cli/compare-a-copy-of-a-run',  # Was averaged as a second seed.
    lambda c: ['compare', '--runs', str(c.run), str(c.run_copy())],
    r"'run_dirs' \(--runs\): '.*' is a copy of the run '.*' \(the same "
    r"metrics.json, timings included\): each run counts once")
cli('cli/compare-simulated-and-real',
    lambda c: ['compare', '--runs', str(c.run), str(c.run_with(
        'metrics.json', json.dumps({**c.metrics(), 'simulated': False})))],
    r"'run_dirs' \(--runs\) mixes simulated and real features for TINY "
    r"\('.*' and '.*'\): compare them separately")
cli('cli/compare--out-a-directory',
    lambda c: ['compare', '--runs', str(c.run), '--out', str(c.tmp)],
    r"--out '.*' is a directory: give a markdown file name")
cli('cli/plot--out-not-png',
    lambda c: ['plot', '--run', str(c.run), '--out', str(c.tmp / 'a.jpg')],
    r"the figure's path '.*a.jpg' must name a .png file")
cli('cli/plot--out-.png',
    lambda c: ['plot', '--run', str(c.run), '--out', str(c.tmp / '.png')],
    r"the figure's path '.*/.png' must name a .png file, e.g. "
    r"'classes.png'")
cli('cli/plot--out-a-directory',
    lambda c: ['plot', '--run', str(c.run), '--out', str(c.tmp)],
    r"the figure's path '.*' is a directory: name a .png file")
cli('cli/plot--out-under-a-file',  # Before the (corrupt) model is read.
    lambda c: ['plot', '--run', str(c.run_with('model-epoch1.pt', b'')),
               '--out', str(write(c.tmp / 'f', 'x') / 'a.png')],
    r"the output folder '.*f' is a file: choose another folder")
cli('cli/plot-corrupt-model',
    lambda c: ['plot', '--run', str(c.run_with('model-epoch1.pt', b'')),
               '--out', str(c.tmp / 'a.png')],
    r"'.*model-epoch1.pt' is not a readable apnet-zsl model")
cli('cli/plot-corrupt-metrics.json',
    lambda c: ['plot', '--run', str(c.run_with('metrics.json', 'nope')),
               '--out', str(c.tmp / 'a.png')],
    r"'.*metrics.json' is not the metrics.json of an apnet-zsl run")
cli('cli/pipeline--epochs=0',
    lambda c: ['pipeline', '--out', str(c.tmp), '--epochs', '0'],
    r"'epochs' must be positive")
cli('cli/pipeline-differently-simulated-data',
    lambda c: ['pipeline', '--dataset', 'TINY', '--out',
               str(c.pipeline_out()), '--isotropic-noise', '3.0'] +
    SMALL_FLAGS, r"'.*TINY' was simulated differently: .*isotropic_noise.*"
    r"choose another --out or delete")
cli('cli/pipeline-data-not-simulated',
    lambda c: ['pipeline', '--dataset', 'TOY', '--out',
               str(write_dataset(c.tmp / 'data').parents[1])] + SMALL_FLAGS,
    r"'.*TOY' holds features that are not simulated \(no SIMULATED.json\)"
    r".*choose another --out")
if not torch.cuda.is_available():
    cli('cli/train--device=cuda-without-cuda',
        lambda c: c.train('--device', 'cuda'),
        r"--device cuda, but torch sees no CUDA device: use --device cpu")
    cli('cli/evaluate--device=cuda-without-cuda',
        lambda c: ['evaluate', '--run', str(c.run), '--device', 'cuda'],
        r"--device cuda, but torch sees no CUDA device")


# ---------------------------------------------------------------------------
# The tests
# ---------------------------------------------------------------------------
def test_the_table_has_every_bad_input():
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids), 'row ids must be unique'
    # Issue 9 counted 207 bad inputs; the table may only grow.
    assert len(CASES) >= 207


def test_every_message_pattern_names_what_is_wrong():
    # An argument in quotes ('x', 'x[1]', 'in_channels'), a flag (--out), a
    # file (.mat, .json, .pt, .txt, .png), a keyword (n_way=7) or the
    # argument argparse names.
    named = re.compile(r"'(\.\*)?[\w\[\]\\.=-]+'|--\w|\.(mat|json|pt|txt|png)|"
                       r"\w+=|\w+\\\[|x\[|x_dst|x\\\[0|"
                       r"argument \w|required: \w")
    for row in CASES:
        assert named.search(row.match), row.id


def one_line(text: str) -> str:
    assert text.strip() and '\n' not in text.strip(), text
    return text.strip()


@pytest.mark.filterwarnings('ignore::apnet_pyg.zsl.train.NotLearningWarning')
@pytest.mark.parametrize('row', CASES, ids=[c.id for c in CASES])
def test_bad_input(row: Case, ctx: Ctx, capsys):
    if row.cli:
        argv = row.call(ctx)
        capsys.readouterr()
        try:
            status = main([str(arg) for arg in argv])
        except SystemExit as exit:  # argparse
            status = exit.code
        err = capsys.readouterr().err
        assert status == row.error, err
        if status == 2:  # Usage, then the one-line message.
            message = one_line(err.strip().splitlines()[-1])
        else:
            message = one_line(err)
            assert message.startswith('error: ') and \
                'Traceback' not in err, err
        assert re.search(row.match, message), message
        return

    with torch_geometric.debug() if row.debug else _no_debug():
        with pytest.raises(row.error) as info:
            row.call(ctx)
    message = one_line(str(info.value))
    assert re.search(row.match, message), message


class _no_debug:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
