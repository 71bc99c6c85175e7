import pytest

from apnet_pyg.data import read_zero_shot_nodes
from tests.helpers.zero_shot_nodes import write_layout


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    r"""A small dataset in DGPN's layout (7 classes of 12 nodes), read:
    :obj:`(root, nodes)`."""
    root = tmp_path_factory.mktemp('nodes')
    write_layout(root)
    return root, read_zero_shot_nodes(root, 'tiny')
