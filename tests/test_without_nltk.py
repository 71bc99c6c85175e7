"""The operators and the cosine graphs work where nltk is not installed
(as on a CUDA machine that brings only torch and PyG); reading WordNet
then says what to install."""

import subprocess
import sys

SCRIPT = r"""
import sys
sys.modules['nltk'] = None  # "import nltk" now raises ImportError.
import torch
from apnet_pyg.graph import cosine_threshold_graph, load_wordnet
from apnet_pyg.nn import APNet, APNetConv
x = torch.randn(5, 8)
edge_index = cosine_threshold_graph(x, 0.0)
assert APNetConv(8, proj_channels=4)(x, edge_index).shape == (5, 8)
try:
    load_wordnet()
except ImportError as error:
    print(error)
"""


def test_operators_import_and_run_without_nltk():
    result = subprocess.run(
        [sys.executable, '-c', SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        'WordNet is read through nltk, which is not '
        'installed: pip install nltk\n'
    )
