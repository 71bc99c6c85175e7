r"""Data: the xlsa17 benchmark reader, its simulator and episode samplers;
the offline reader of raw Planetoid files; the reader of zero-shot node
classification data in DGPN's layout."""

from apnet_pyg.data.planetoid import read_raw_planetoid
from apnet_pyg.data.sampler import Episode, EpisodeSampler, MinibatchSampler
from apnet_pyg.data.simulator import default_options, simulate_xlsa17
from apnet_pyg.data.xlsa17 import ZSLDataset, load_xlsa17, packaged_root
from apnet_pyg.data.zero_shot_nodes import (
    ClassSplit,
    ZeroShotNodes,
    read_zero_shot_nodes,
)

__all__ = [
    'ZSLDataset',
    'load_xlsa17',
    'packaged_root',
    'simulate_xlsa17',
    'default_options',
    'Episode',
    'EpisodeSampler',
    'MinibatchSampler',
    'read_raw_planetoid',
    'read_zero_shot_nodes',
    'ZeroShotNodes',
    'ClassSplit',
]
