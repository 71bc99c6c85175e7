r"""examples/drop_in.py: APNetConv in a model on the WordNet noun graph."""

import torch

from tests.helpers.scripts import load_script


def test_drop_in_example_model():

    drop_in = load_script('drop_in')
    model = drop_in.Net(8, 16, 3)
    x, edge_index = torch.randn(5, 8), torch.tensor([[0, 1, 2], [1, 2, 3]])
    assert model(x, edge_index).size() == (5, 3)
    assert drop_in.Net(8, 16, 3, propagate=False).conv is None


def test_drop_in_example_runs(capsys):
    drop_in = load_script('drop_in')
    drop_in.main(['--epochs', '1'])
    assert 'MLP + APNetConv: test accuracy' in capsys.readouterr().out
