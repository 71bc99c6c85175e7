import os
from typing import Optional, Sequence

import numpy as np
import pytest
import scipy.io
import torch
from torch import Tensor

from apnet_pyg.data.simulator import simulate_xlsa17
from apnet_pyg.graph import wordnet_corpus

# On a machine without WordNet (a lent GPU's image: no nltk, no network),
# scripts/device_check.sh sets APNET_PYG_SKIP_WORDNET=1 and the tests that
# read WordNet are skipped, with the reason; anywhere else (CI) a missing
# WordNet fails them.
if os.environ.get('APNET_PYG_SKIP_WORDNET') == '1':
    _load_wordnet = wordnet_corpus._load_wordnet

    def _load_or_skip(*args):
        try:
            return _load_wordnet(*args)
        except (ImportError, wordnet_corpus.WordNetNotFoundError) as error:
            pytest.skip(
                f'WordNet unavailable (APNET_PYG_SKIP_WORDNET=1): {error}'
            )

    wordnet_corpus._load_wordnet = _load_or_skip


def dense_apnet_reference(
    x: Tensor,
    edge_index: Tensor,
    weight: Tensor,
    edge_weight: Optional[Tensor] = None,
    temperature: float = 10.0,
    num_steps: int = 1,
    add_self_loops: bool = True,
    step_weights: Optional[Tensor] = None,
    attention_scales: Optional[Sequence[Tensor]] = None,
) -> Tensor:
    r"""APNet propagation written straight from its equation, with dense
    matrices: :math:`\alpha_{ij} \propto w_{ij} \exp(\gamma \cos(W x_i,
    W x_j))` over the edges :math:`j \to i` (a repeated edge adds its
    weight), then :math:`x'_i = \sum_j \alpha_{ij} x_j`, :obj:`num_steps`
    times; the last step's output, or with :obj:`step_weights`
    :math:`\theta` the sum over the input and every step's output
    :math:`\sum_t \theta_t x^{(t)}`. With :obj:`attention_scales` (one
    :math:`N \times N` matrix a step: what dropout drew, :math:`0` or
    :math:`1 / (1 - p)`), :math:`\alpha` times it. Independent of the
    package's kernels; the tests compare every implementation to it."""
    num_nodes = x.size(0)
    prior = x.new_zeros(num_nodes, num_nodes)
    if edge_weight is None:
        edge_weight = x.new_ones(edge_index.size(1))
    source, target = edge_index
    prior.index_put_(
        (target, source), edge_weight.to(x.dtype), accumulate=True
    )
    if add_self_loops:
        diagonal = prior.diagonal()
        missing = diagonal == 0
        prior = prior + torch.diag(missing.to(x.dtype))
    combined = None if step_weights is None else step_weights[0] * x
    for step in range(1, num_steps + 1):
        h = x if weight is None else x @ weight.t()
        h = h / h.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        scores = torch.exp(temperature * (h @ h.t())) * prior
        denominator = scores.sum(dim=-1, keepdim=True)
        alpha = scores / torch.where(
            denominator > 0, denominator, torch.ones_like(denominator)
        )
        if attention_scales is not None:
            alpha = alpha * attention_scales[step - 1]
        x = alpha @ x
        if combined is not None:
            combined = combined + step_weights[step] * x
    return x if combined is None else combined


@pytest.fixture
def apnet_reference():
    return dense_apnet_reference


def random_graph(
    num_nodes: int, num_edges: int, generator: Optional[torch.Generator] = None
) -> Tensor:
    """A random directed edge_index without self-loops or repeated edges."""
    index = torch.randperm(num_nodes * num_nodes, generator=generator)
    source, target = index // num_nodes, index % num_nodes
    keep = source != target
    edge_index = torch.stack([source[keep], target[keep]])[:, :num_edges]
    return edge_index


@pytest.fixture
def make_random_graph():
    return random_graph


# The CUDA test tier: the 'cuda' parameter carries the `cuda` marker, so
# that `pytest -m cuda` on a CUDA machine runs exactly the CUDA tests, and
# is skipped, with its reason shown (`-ra`), where CUDA is not available.
# The 'cpu' parameter is the test as it ran before: it does not run twice.
CUDA = pytest.param(
    'cuda',
    id='cuda',
    marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(
            not torch.cuda.is_available(), reason='CUDA not available'
        ),
    ],
)


def _device(name: str) -> torch.device:
    # With its index, as a tensor's .device reports it ('cuda:0' is not
    # equal to 'cuda').
    if name == 'cuda':
        return torch.device('cuda', torch.cuda.current_device())
    return torch.device(name)


@pytest.fixture(params=['cpu', CUDA])
def device(request) -> torch.device:
    r"""Every device a test runs on: 'cpu' always, 'cuda' where
    :func:`torch.cuda.is_available`."""
    return _device(request.param)


@pytest.fixture(params=[CUDA])
def cuda_device(request) -> torch.device:
    r"""The CUDA device, for the tests that only mean something there (the
    same result as on CPU, CUDA graphs)."""
    return _device(request.param)


# A tiny class side in the real xlsa17 layout: 10 animal classes (WordNet
# names, so the WordNet graph resolves automatically), 6 seen (4 train + 2
# validation) and 4 unseen, 16 attributes, 400 images.
CLASSES = [
    'zebra',
    'horse',
    'dog',
    'cat',
    'lion',
    'tiger',
    'wolf',
    'fox',
    'sheep',
    'cow',
]
SEEN, TRAIN, VAL = CLASSES[:6], CLASSES[:4], CLASSES[4:6]
UNSEEN = CLASSES[6:]


def write_tiny_class_side(root, name='TINY'):
    folder = root / name
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    original = rng.random((16, len(CLASSES))) * 100
    att = original / np.linalg.norm(original, axis=0, keepdims=True)
    names = np.empty((len(CLASSES), 1), dtype=object)
    for i, class_name in enumerate(CLASSES):
        names[i, 0] = np.array([class_name])

    def loc(start, stop):  # 1-based, as in the real files
        return np.arange(start, stop + 1, dtype=np.uint16)[:, None]

    scipy.io.savemat(
        folder / 'att_splits.mat',
        {
            'att': att,
            'original_att': original,
            'allclasses_names': names,
            'trainval_loc': loc(1, 240),
            'test_seen_loc': loc(241, 300),
            'test_unseen_loc': loc(301, 400),
            'train_loc': loc(1, 160),
            'val_loc': loc(161, 240),
        },
    )
    for filename, listed in [
        ('trainvalclasses.txt', SEEN),
        ('testclasses.txt', UNSEEN),
        ('trainclasses1.txt', TRAIN),
        ('valclasses1.txt', VAL),
    ]:
        (folder / filename).write_text('\n'.join(listed) + '\n')
    return root


@pytest.fixture(scope='session')
def tiny_class_side(tmp_path_factory):
    r"""Root folder of the class side 'TINY' is simulated from."""
    return write_tiny_class_side(tmp_path_factory.mktemp('class_side'))


@pytest.fixture(scope='session')
def tiny_root(tmp_path_factory, tiny_class_side):
    r"""Root folder of a tiny simulated dataset 'TINY' (real layout)."""
    class_side = tiny_class_side
    out = tmp_path_factory.mktemp('simulated')
    # Little image noise: a model of tiny sizes learns it in a few dozen
    # episodes, so that tests of learning and selection can fail.
    simulate_xlsa17(
        'TINY',
        out,
        data_root=class_side,
        seed=0,
        isotropic_noise=2.0,
        lowrank_noise=1.0,
    )
    return out


# --- The bad-input tables (tests/bad_input.py,
# tests/<package>/test_<package>_bad_input.py):
# their fixtures, here so that every table shares one tiny trained run.
@pytest.fixture(scope='session')
def bad_input_data(tiny_root):
    from apnet_pyg.data import load_xlsa17

    return load_xlsa17(tiny_root, 'TINY', attributes='percent')


@pytest.fixture(scope='session')
def bad_input_run(tiny_root, bad_input_data, tmp_path_factory):
    r"""One trained run, shared by every evaluate, plot and load_model
    row (read only: rows that break a file break a copy)."""
    from apnet_pyg.zsl import run
    from tests.helpers.bad_input import SMALL

    out = tmp_path_factory.mktemp('bad_input_run') / 'run'
    run(bad_input_data, SMALL, out, progress=False, data_root=str(tiny_root))
    return out


@pytest.fixture
def bad_input_ctx(request, tmp_path):
    r"""The lazy inputs of a bad-input row (:class:`bad_input.Ctx`)."""
    from tests.helpers.bad_input import Ctx

    return Ctx(request, tmp_path)


# --- end of the bad-input tables' fixtures.


def pytest_collection_modifyitems(config, items):
    # A test skipped for want of CUDA that lacks the `cuda` marker is left
    # out of `pytest -m cuda`, the device check's CUDA tier: refuse it.
    # Only where CUDA is missing is a test skipped for want of it (on a GPU
    # a skip that names CUDA is one for its presence, e.g. a CPU-only
    # error path).
    if torch.cuda.is_available():
        return
    unmarked = [
        item.nodeid
        for item in items
        if item.get_closest_marker('cuda') is None
        and any(
            'cuda' in str(mark.kwargs.get('reason', '')).lower()
            and mark.args
            and mark.args[0] is not False
            for mark in item.iter_markers('skipif')
        )
    ]
    if unmarked:
        raise pytest.UsageError(
            f'{unmarked[0]} is skipped without CUDA but lacks '
            f"@pytest.mark.cuda: add it, so that 'pytest -m cuda' runs it"
        )
