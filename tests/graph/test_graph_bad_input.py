r"""Bad inputs of apnet_pyg.graph (the cosine graph builders and transforms,
WordNet), one row each, and the error each gets; the row and the runner
are in tests/bad_input.py."""

import math

import torch
from torch_geometric.data import Data

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
from tests.helpers.bad_input import (
    ZERO_ROW,
    Case,
    Ctx,
    Table,
    X,
    check_row,
    check_table,
)

CASES = Table()
case = CASES.case

# ---------------------------------------------------------------------------
# Graph builders and transforms
# ---------------------------------------------------------------------------
case(
    'cosine_threshold_graph/x-1d',
    lambda c: cosine_threshold_graph(X[0]),
    ValueError,
    r"'x' must have 2 dimensions",
)
case(
    'cosine_threshold_graph/x-int',
    lambda c: cosine_threshold_graph(X.long()),
    ValueError,
    r"'x' must be a floating-point tensor",
)
case(
    'cosine_threshold_graph/x-nan',
    lambda c: cosine_threshold_graph(X + math.nan),
    ValueError,
    r"'x' contains NaN or infinite values",
)
case(
    'cosine_threshold_graph/x-list',
    lambda c: cosine_threshold_graph(X.tolist()),
    ValueError,
    r"'x' must be a torch.Tensor",
)
case(
    'cosine_threshold_graph/threshold="0.5"',
    lambda c: cosine_threshold_graph(X, '0.5'),
    ValueError,
    r"'threshold' must be a real number \(got str '0.5'\)",
)
case(
    'cosine_threshold_graph/threshold=None',
    lambda c: cosine_threshold_graph(X, None),
    ValueError,
    r"'threshold' must be a real number",
)
case(
    'cosine_threshold_graph/threshold=1.5',
    lambda c: cosine_threshold_graph(X, 1.5),
    ValueError,
    r"'threshold' must lie in \[-1, 1\] \(got 1.5\)",
)
case(
    'cosine_threshold_graph/threshold=nan',
    lambda c: cosine_threshold_graph(X, math.nan),
    ValueError,
    r"'threshold' must be finite",
)
case(
    'cosine_threshold_graph/chunk_size=0',
    lambda c: cosine_threshold_graph(X, chunk_size=0),
    ValueError,
    r"'chunk_size' must be a positive integer or None \(got 0\)",
)
case(
    'cosine_threshold_graph/chunk_size=-1',
    lambda c: cosine_threshold_graph(X, chunk_size=-1),
    ValueError,
    r"'chunk_size' must be a positive integer or None \(got -1\)",
)
case(
    'cosine_threshold_graph/chunk_size=2.5',
    lambda c: cosine_threshold_graph(X, chunk_size=2.5),
    ValueError,
    r"'chunk_size' must be a positive integer or None \(got float 2.5\)",
)
case(
    'cosine_threshold_graph/batch-wrong-length',
    lambda c: cosine_threshold_graph(X, batch=torch.zeros(4, dtype=int)),
    ValueError,
    r"'batch' must have shape \[5\]",
)
case(
    'cosine_threshold_graph/batch-float',
    lambda c: cosine_threshold_graph(X, batch=torch.zeros(5)),
    ValueError,
    r"'batch' must hold integer graph indices",
)
case(
    'cosine_threshold_graph/batch-negative',
    lambda c: cosine_threshold_graph(X, batch=-torch.ones(5, dtype=int)),
    ValueError,
    r"'batch' holds negative graph indices",
)
case(
    'cosine_threshold_graph/loop="yes"',
    lambda c: cosine_threshold_graph(X, loop='yes'),
    ValueError,
    r"'loop' must be True or False",
)
# tests/graph/test_cosine.py has k=0 and k=2.5.
case(
    'cosine_knn_graph/k="3"',
    lambda c: cosine_knn_graph(X, '3'),
    ValueError,
    r"'k' must be a positive integer \(got str '3'\)",
)
case(
    'cosine_knn_graph/flow="up"',
    lambda c: cosine_knn_graph(X, 2, flow='up'),
    ValueError,
    r"'flow' must be 'source_to_target' or 'target_to_source'",
)
case(
    'cosine_knn_graph/zero-row',
    lambda c: cosine_knn_graph(ZERO_ROW, 1),
    ValueError,
    r"'x' has 1 all-zero rows \(e.g. row 1\)",
)
case(
    'cosine_knn_graph/zero-row-in-batch',
    lambda c: cosine_knn_graph(ZERO_ROW, 1, batch=torch.tensor([1, 0, 0])),
    ValueError,
    r"'x' has 1 all-zero rows \(e.g. row 1\)",
)
case(
    'cosine_knn_graph/chunk_size=-3',
    lambda c: cosine_knn_graph(X, 2, chunk_size=-3),
    ValueError,
    r"'chunk_size' must be a positive integer or None \(got -3\)",
)
case(
    'cosine_knn_graph/x-inf',
    lambda c: cosine_knn_graph(X + math.inf, 2),
    ValueError,
    r"'x' contains NaN or infinite values",
)
case(
    'cosine_knn_graph/batch-2d',
    lambda c: cosine_knn_graph(X, 2, batch=torch.zeros(5, 1, dtype=int)),
    ValueError,
    r"'batch' must have shape \[5\]",
)
case(
    'CosineThresholdGraph/threshold="0.5"',
    lambda c: CosineThresholdGraph('0.5'),
    ValueError,
    r"'threshold' must be a real number",
)
case(
    'CosineThresholdGraph/threshold=2',
    lambda c: CosineThresholdGraph(2.0),
    ValueError,
    r"'threshold' must lie in \[-1, 1\]",
)
case(
    'CosineThresholdGraph/attr-missing',
    lambda c: CosineThresholdGraph(attr='pos')(Data(x=X)),
    ValueError,
    r"The data object has no node attribute 'pos'",
)
case(
    'CosineThresholdGraph/attr=""',
    lambda c: CosineThresholdGraph(attr=''),
    ValueError,
    r"'attr' must be the name of a node attribute",
)
case(
    'CosineKNNGraph/k=0',
    lambda c: CosineKNNGraph(k=0),
    ValueError,
    r"'k' must be a positive integer",
)
case(
    'CosineKNNGraph/flow="x"',
    lambda c: CosineKNNGraph(flow='x'),
    ValueError,
    r"'flow' must be 'source_to_target' or",
)
case(
    'CosineKNNGraph/force_undirected="yes"',
    lambda c: CosineKNNGraph(force_undirected='yes'),
    ValueError,
    r"'force_undirected' must be True or False",
)
case(
    'CosineKNNGraph/no-x',
    lambda c: CosineKNNGraph()(Data(pos=X)),
    ValueError,
    r"The data object has no node attribute 'x'",
)
case(
    'CosineKNNGraph/attr=3',
    lambda c: CosineKNNGraph(attr=3),
    ValueError,
    r"'attr' must be the name of a node attribute \(got 3\)",
)

# WordNet
case(
    'wordnet_graph/classes-a-string',
    lambda c: wordnet_graph('zebra'),
    ValueError,
    r"'classes' must be a sequence of class names, got the "
    r"single string 'zebra'",
)
case(
    'wordnet_graph/classes-not-strings',
    lambda c: wordnet_graph([1, 2]),
    ValueError,
    r"'classes' must contain strings only",
)
case(
    'wordnet_graph/classes-duplicates',
    lambda c: wordnet_graph(['dog', 'cat', 'dog']),
    ValueError,
    r"'classes' contains duplicate names: 'dog'",
)
case(
    'wordnet_graph/max_hops=0',
    lambda c: wordnet_graph(['dog'], 0),
    ValueError,
    r"'max_hops' must be a positive integer or None",
)
case(
    'wordnet_graph/max_hops=1.5',
    lambda c: wordnet_graph(['dog'], 1.5),
    ValueError,
    r"'max_hops' must be a positive integer or None, got 1.5",
)
case(
    'wordnet_graph/unknown-class',
    lambda c: wordnet_graph(['dog', 'xyzzy_plugh']),
    ValueError,
    r"Could not map 1 of 2 classes of 'classes'.*'xyzzy_plugh'",
)
case(
    'wordnet_graph/mapping-a-dataset-name',
    lambda c: wordnet_graph(['seal'], mapping='AWA2'),
    ValueError,
    r"'mapping' must be a dict.*dataset_wordnet_mapping",
)
case(
    'resolve_synsets/mapping-not-strings',
    lambda c: resolve_synsets(['seal'], {'seal': 9}),
    ValueError,
    r"'mapping' must map strings to strings",
)
for spec, message in [
    ('seal.v.01', r"'seal.v.01' is not a noun synset"),
    ('n99999999', r'no noun synset at offset 99999999'),
    ('v01234567', r"'v01234567' is not a noun offset"),
    ('nothing.n.99', r"no WordNet synset named 'nothing.n.99'"),
]:
    case(
        f'resolve_synsets/mapped-to-{spec}',
        lambda c, spec=spec: resolve_synsets(['x'], {'x': spec}),
        ValueError,
        rf"'x' \(mapped to '{spec}'\): {message}",
    )
case(
    'resolve_synsets/empty-name',
    lambda c: resolve_synsets(['']),
    ValueError,
    r"'classes'.*'': empty name",
)
case(
    'resolve_synsets/many-unknown-on-one-line',
    lambda c: resolve_synsets([f'xyzzy{i}' for i in range(12)]),
    ValueError,
    r"Could not map 12 of 12 classes of 'classes'.*; and 2 more",
)
case(
    'load_wordnet/missing-directory',
    lambda c: load_wordnet(
        c.tmp / 'nothing', c.tmp / 'cache', search_nltk_data=False
    ),
    WordNetNotFoundError,
    r"WordNet 3.0 was not found: '.*nothing' lacks data.noun",
)


def test_the_table():
    check_table(CASES)


@CASES.parametrize()
def test_bad_input(row: Case, bad_input_ctx: Ctx, capsys):
    check_row(row, bad_input_ctx, capsys)
