r"""The repository's scripts (examples/ and experiments/) as modules, for
their tests, and a small Planetoid-like graph to run them on."""

import importlib.util
import os.path as osp

ROOT = osp.join(osp.dirname(__file__), '..', '..')
EXAMPLES = osp.join(ROOT, 'examples')
EXPERIMENTS = osp.join(ROOT, 'experiments')


def script_path(name):
    r"""The path of script :obj:`name` (:obj:`examples/name.py` or
    :obj:`experiments/name.py`)."""
    for folder in (EXAMPLES, EXPERIMENTS):
        path = osp.join(folder, f'{name}.py')
        if osp.exists(path):
            return path
    raise FileNotFoundError(
        f'no script {name}.py in examples/ or experiments/'
    )


def load_script(name):
    r"""Script :obj:`name` as a module (its :obj:`main` not run)."""
    spec = importlib.util.spec_from_file_location(name, script_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train_tiny_run(tiny_root, run_dir, epochs, episodes):
    r"""Trains the tiny dataset's run into :obj:`run_dir` through
    :obj:`apnet-zsl train` (the fast recipe, 4-way episodes, no model
    selection), for the scripts that read a finished run."""
    from apnet_pyg.zsl.cli import main

    argv = ['train', '--dataset', 'TINY', '--root', str(tiny_root)]
    argv += ['--out', str(run_dir), '--recipe', 'fast']
    argv += ['--epochs', str(epochs), '--iterations-per-epoch', str(episodes)]
    argv += ['--n-way', '4', '--model-selection', 'none', '--no-progress']
    assert main(argv) == 0
    return run_dir


def tiny_planetoid(num_nodes=60, seed=0):
    r"""A small random citation-like graph with Planetoid's masks."""
    import torch
    from torch_geometric.data import Data

    generator = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (num_nodes,), generator=generator)
    x = (torch.rand(num_nodes, 20, generator=generator) < 0.2).float()
    x[torch.arange(num_nodes), y] = 1.0  # A feature that carries the class.
    edge_index = torch.randint(
        0, num_nodes, (2, 4 * num_nodes), generator=generator
    )
    masks = torch.zeros(3, num_nodes, dtype=torch.bool)
    masks[0, :20], masks[1, 20:40], masks[2, 40:] = True, True, True
    return Data(
        x=x / x.sum(-1, keepdim=True),
        y=y,
        edge_index=edge_index,
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
    )
