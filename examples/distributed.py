r"""APNetConv beyond one GPU: data-parallel mini-batch training with
:class:`~torch.nn.parallel.DistributedDataParallel` (DDP) and PyG's
:class:`~torch_geometric.loader.NeighborLoader`.

The PyG multi-GPU pattern: every process (rank) holds a replica of the
model and the whole graph, takes its shard of the training nodes (a
shuffled split in the manner of
:class:`~torch.utils.data.DistributedSampler`: equal shards, padded by
repeating a few nodes, so that every rank runs the same number of steps),
samples neighbourhoods of its mini-batches with a :class:`NeighborLoader`
over that shard, and DDP all-reduces (averages) the gradients, so that
every replica takes the same optimiser step. The model: dropout 0.5,
Linear(F, 16), ReLU, one ``APNetConv(16, num_steps=1, teleport=None)`` per
sampled hop, dropout 0.5, Linear(16, C); Adam (lr 0.01, weight decay 5e-4).
After the last epoch the ranks compare their parameters (they must be
bitwise identical) and rank 0 evaluates the validation and test accuracy on
the full graph (no model selection: the last epoch is reported). Rank 0
prints the loss of every epoch (the mean over all ranks' mini-batches).
Nothing is saved unless ``--result`` names a JSON file.

Launch with ``torchrun`` (one process per GPU with NCCL; on CPU with
Gloo), or let the script start the processes itself (``--nprocs``)::

    torchrun --standalone --nproc_per_node=4 examples/distributed.py \
        --dataset Cora --backend nccl
    torchrun --standalone --nproc_per_node=2 examples/distributed.py \
        --dataset Cora --backend gloo
    python examples/distributed.py --synthetic --nprocs 2 --backend gloo

With NCCL, rank ``r`` trains on ``cuda:LOCAL_RANK``; with Gloo, on the
CPU. The Planetoid datasets (Cora, CiteSeer, PubMed) are read offline from
their raw files (``--raw``, by default ``../shared/data/planetoid`` next to
the repository; ``DIR/Cora/raw/ind.cora.*``), as
``examples/planetoid.py`` reads them; ``--synthetic`` trains on a small
generated graph instead (4 classes of 60 nodes, a stochastic block model
with class-dependent features).

Neighbour sampling: PyG 2.8's :class:`NeighborLoader` samples with
``pyg-lib`` or ``torch-sparse`` and has no pure-PyTorch fallback (without
them it raises an :class:`ImportError`). When neither is installed, the
script passes it :class:`TorchNeighborSampler`, a PyG
:class:`~torch_geometric.sampler.NeighborSampler` whose sampling step is
written in PyTorch (uniform, without replacement, directional, as PyG's
default); the loader, its batches (``n_id``, ``e_id``, ``batch_size``,
``num_sampled_nodes``) and the training loop are PyG's. ``--sampler``
chooses explicitly.

Errors (bad flags, missing files, no CUDA device for NCCL) end with one
line, ``--debug`` shows the traceback.
"""

import argparse
import hashlib
import json
import math
import os
import os.path as osp
import shutil
import sys
import tempfile
import time
import warnings
from functools import partial
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch_geometric.transforms as T
import torch_geometric.typing
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler import NeighborSampler, SamplerOutput

from apnet_pyg.data.planetoid import raw_folder, read_raw_planetoid
from apnet_pyg.files import atomic_write_text, check_output_file
from apnet_pyg.nn import APNetConv
from apnet_pyg.scripting import run_script

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
DEFAULT_RAW = osp.join(ROOT, '..', 'shared', 'data', 'planetoid')
DATASETS = ('Cora', 'CiteSeer', 'PubMed')
SAMPLERS = ('auto', 'torch', 'pyg')
# The environment torchrun gives every process it starts.
TORCHRUN_VARIABLES = (
    'RANK',
    'LOCAL_RANK',
    'WORLD_SIZE',
    'MASTER_ADDR',
    'MASTER_PORT',
)


# Data ----------------------------------------------------------------------


def load_planetoid(raw: str, name: str) -> Data:
    r"""The Planetoid dataset :obj:`name` (public split, row-normalised
    features), read from the raw files in :obj:`raw/name/raw`."""
    folder = raw_folder(raw, name)
    if not osp.isdir(folder):
        raise FileNotFoundError(
            f'--raw: no raw Planetoid {name} files under {folder}; pass '
            f'--raw DIR (DIR/{name}/raw/ind.{name.lower()}.*) or '
            f'--synthetic'
        )
    try:
        data = read_raw_planetoid(raw, name)
    except (OSError, ValueError) as error:  # The message names the file.
        raise type(error)(
            f'--raw: {error}; copy the raw Planetoid {name} '
            f'files into {folder} again'
        ) from None
    return T.NormalizeFeatures()(data)


def synthetic_graph(
    seed: int = 0,
    num_classes: int = 4,
    nodes_per_class: int = 60,
    num_features: int = 16,
    p_in: float = 0.1,
    p_out: float = 0.01,
) -> Data:
    r"""A small undirected stochastic block model: an edge within a class
    with probability :obj:`p_in`, across classes :obj:`p_out`; features
    are a class mean plus noise of the same scale (so that the neighbours
    help); 10 training and 10 validation nodes per class, the rest test."""
    generator = torch.Generator().manual_seed(seed)
    y = torch.arange(num_classes).repeat_interleave(nodes_per_class)
    num_nodes = y.numel()
    probability = torch.where(
        y.view(-1, 1) == y.view(1, -1), torch.tensor(p_in), torch.tensor(p_out)
    )
    draw = torch.rand(num_nodes, num_nodes, generator=generator)
    upper = torch.triu(draw < probability, diagonal=1)
    source, target = (upper | upper.t()).nonzero().t()
    means = torch.randn(num_classes, num_features, generator=generator)
    x = means[y] + torch.randn(num_nodes, num_features, generator=generator)
    masks = {}
    order = torch.randperm(nodes_per_class, generator=generator)
    for name, part in (
        ('train', order[:10]),
        ('val', order[10:20]),
        ('test', order[20:]),
    ):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[
            (
                torch.arange(num_classes).view(-1, 1) * nodes_per_class
                + part.view(1, -1)
            ).view(-1)
        ] = True
        masks[f'{name}_mask'] = mask
    return Data(x=x, y=y, edge_index=torch.stack([source, target]), **masks)


def shard_nodes(
    nodes: Tensor, rank: int, world_size: int, seed: int
) -> Tensor:
    r"""The nodes of :obj:`rank` among :obj:`world_size`: :obj:`nodes`
    shuffled with :obj:`seed` (the same on every rank), padded by
    repeating its first ones to a multiple of :obj:`world_size` and taken
    with stride :obj:`world_size`, as
    :class:`~torch.utils.data.DistributedSampler` splits a dataset. Every
    rank gets :math:`\lceil n / W \rceil` distinct nodes and every node is
    on some rank."""
    if nodes.numel() == 0:
        raise ValueError('there are no training nodes to shard')
    generator = torch.Generator().manual_seed(seed)
    nodes = nodes[torch.randperm(nodes.numel(), generator=generator)]
    total = math.ceil(nodes.numel() / world_size) * world_size
    repeats = math.ceil(total / nodes.numel())
    return nodes.repeat(repeats)[:total][rank::world_size]


# Sampling ------------------------------------------------------------------


class TorchNeighborSampler(NeighborSampler):
    r"""PyG's :class:`~torch_geometric.sampler.NeighborSampler` with its
    sampling step written in PyTorch, for a :class:`NeighborLoader` where
    neither ``pyg-lib`` nor ``torch-sparse`` is installed (PyG samples
    with one of them). Homogeneous graphs; uniform sampling without
    replacement of at most :obj:`num_neighbors[h]` incoming edges of every
    node reached at hop :obj:`h` (:obj:`-1`: all of them), directional
    (the edges point from the sampled neighbours to the nodes they were
    sampled for), as PyG's default.

    The output is PyG's :class:`~torch_geometric.sampler.SamplerOutput`:
    the seeds are the first nodes, then the nodes new at each hop (in
    ascending global index); the edge ids index the sampler's CSC order
    (the loader maps them back with :obj:`perm`). Random numbers come from
    :func:`torch.rand` (the global generator: a seeded run repeats)."""

    def __init__(self, data: Data, num_neighbors: List[int]):
        if not isinstance(data, Data):
            raise ValueError(
                f'TorchNeighborSampler samples a homogeneous '
                f"'Data' graph (got {type(data).__name__})"
            )
        with warnings.catch_warnings():
            # PyG's notice that it samples slowly without pyg-lib: here
            # this class samples.
            warnings.filterwarnings(
                'ignore', '.*without a .pyg-lib. installation is deprecated'
            )
            super().__init__(data, num_neighbors=num_neighbors)

    def _sample(
        self, seed: Tensor, seed_time: Optional[Tensor] = None, **kwargs
    ) -> SamplerOutput:
        if isinstance(seed, dict) or seed_time is not None:
            raise ValueError(
                'TorchNeighborSampler samples homogeneous '
                'graphs without time attributes only'
            )
        seed = seed.to(torch.long)
        if seed.unique().numel() != seed.numel():
            raise ValueError(
                'TorchNeighborSampler needs distinct seed '
                'nodes in a mini-batch'
            )
        colptr, row = self.colptr, self.row
        local = torch.full((self.num_nodes,), -1, dtype=torch.long)
        local[seed] = torch.arange(seed.numel())
        nodes, rows, cols, edges = [seed], [], [], []
        num_sampled_nodes, num_sampled_edges = [seed.numel()], []
        frontier, num_local = seed, seed.numel()
        for fanout in self.num_neighbors.get_mapped_values():
            start = colptr[frontier]
            degree = colptr[frontier + 1] - start
            owner = torch.arange(frontier.numel()).repeat_interleave(degree)
            first = degree.cumsum(0) - degree  # Where each group starts.
            offset = torch.arange(owner.numel()) - first[owner]
            edge = start[owner] + offset
            if fanout >= 0 and bool((degree > fanout).any()):
                # A random order within each node's edges: sort by random
                # keys, then (stably) by owner; keep the first `fanout`.
                order = torch.rand(edge.numel()).argsort()
                order = order[owner[order].argsort(stable=True)]
                # Still grouped by owner in the same group sizes: the
                # offsets are the positions within each group.
                keep = offset < fanout
                edge, owner = edge[order][keep], owner[keep]
            source = row[edge]
            new = source[local[source] < 0].unique()
            local[new] = torch.arange(num_local, num_local + new.numel())
            num_local += new.numel()
            rows.append(local[source])
            cols.append(local[frontier][owner])
            edges.append(edge)
            nodes.append(new)
            num_sampled_nodes.append(new.numel())
            num_sampled_edges.append(edge.numel())
            frontier = new
        empty = seed.new_empty(0)
        return SamplerOutput(
            node=torch.cat(nodes),
            row=torch.cat(rows or [empty]),
            col=torch.cat(cols or [empty]),
            edge=torch.cat(edges or [empty]),
            batch=None,
            num_sampled_nodes=num_sampled_nodes,
            num_sampled_edges=num_sampled_edges,
        )


def pyg_can_sample() -> bool:
    r"""Whether PyG's own neighbour sampling is available."""
    return (
        torch_geometric.typing.WITH_PYG_LIB
        or torch_geometric.typing.WITH_TORCH_SPARSE
    )


def make_loader(
    data: Data,
    nodes: Tensor,
    num_neighbors: List[int],
    batch_size: int,
    sampler: str = 'auto',
    shuffle: bool = True,
) -> NeighborLoader:
    r"""A :class:`NeighborLoader` over the seed :obj:`nodes`; it samples
    with PyG's sampler (:obj:`"pyg"`), :class:`TorchNeighborSampler`
    (:obj:`"torch"`), or the first where PyG can sample (:obj:`"auto"`)."""
    neighbor_sampler = None
    if sampler == 'torch' or (sampler == 'auto' and not pyg_can_sample()):
        neighbor_sampler = TorchNeighborSampler(data, num_neighbors)
    return NeighborLoader(
        data,
        num_neighbors=num_neighbors,
        input_nodes=nodes,
        batch_size=batch_size,
        shuffle=shuffle,
        neighbor_sampler=neighbor_sampler,
    )


# Model ---------------------------------------------------------------------


class Net(torch.nn.Module):
    r"""Dropout, Linear, ReLU, :obj:`num_layers` :class:`APNetConv` layers
    (one propagation step each: one per sampled hop), dropout, Linear;
    returns logits."""

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        num_layers: int,
    ):
        super().__init__()
        self.lin1 = torch.nn.Linear(in_channels, hidden_channels)
        self.convs = torch.nn.ModuleList(
            [
                APNetConv(hidden_channels, num_steps=1, teleport=None)
                for _ in range(num_layers)
            ]
        )
        self.lin2 = torch.nn.Linear(hidden_channels, out_channels)

    def reset_parameters(self):
        self.lin1.reset_parameters()
        for conv in self.convs:
            conv.reset_parameters()
        self.lin2.reset_parameters()

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = F.dropout(x, p=0.5, training=self.training)
        x = F.relu(self.lin1(x))
        for conv in self.convs:
            x = conv(x, edge_index)
        x = F.dropout(x, p=0.5, training=self.training)
        return self.lin2(x)


# Training ------------------------------------------------------------------


def replica_state(module: torch.nn.Module) -> Tensor:
    r"""All parameters and buffers of :obj:`module`, flattened into one
    vector (what must be equal on every rank)."""
    tensors = list(module.parameters()) + list(module.buffers())
    return torch.cat([t.detach().reshape(-1).double() for t in tensors])


def digest(tensor: Tensor) -> str:
    r"""A short SHA-256 of the bytes of :obj:`tensor`."""
    data = tensor.detach().cpu().contiguous().numpy().tobytes()
    return hashlib.sha256(data).hexdigest()[:16]


def compare_replicas(states: Sequence[Tensor]) -> Dict[str, Any]:
    r"""Each rank's :func:`digest` and the largest absolute difference of
    any rank's state from rank 0's; :obj:`identical` if all are bitwise
    equal."""
    first = states[0].cpu()
    return {
        'digests': [digest(state) for state in states],
        'max_abs_diff': max(
            float((s.cpu() - first).abs().max()) for s in states
        ),
        'identical': all(torch.equal(s.cpu(), first) for s in states),
    }


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, data: Data, device: torch.device
) -> Dict[str, float]:
    r"""Accuracy on the training, validation and test nodes, full graph
    (every neighbour, no sampling)."""
    model.eval()
    pred = model(data.x.to(device), data.edge_index.to(device))
    pred = pred.argmax(dim=-1).cpu()
    return {
        f'{name}_acc': float((pred[mask] == data.y[mask]).float().mean())
        for name, mask in (
            ('train', data.train_mask),
            ('val', data.val_mask),
            ('test', data.test_mask),
        )
    }


def worker(
    rank: int,
    world_size: int,
    args: argparse.Namespace,
    data: Data,
    init_method: str = 'env://',
    local_rank: Optional[int] = None,
) -> Optional[Dict[str, Any]]:
    r"""Trains on rank :obj:`rank` of :obj:`world_size`; returns the
    results on rank 0 (and writes them to :obj:`args.result` if set),
    :obj:`None` elsewhere."""
    local_rank = rank if local_rank is None else local_rank
    if args.backend == 'nccl':
        device = torch.device('cuda', local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device('cpu')
        if world_size > 1 and 'OMP_NUM_THREADS' not in os.environ:
            # Share the cores, as torchrun does (OMP_NUM_THREADS=1).
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    dist.init_process_group(
        args.backend,
        init_method=init_method,
        rank=rank,
        world_size=world_size,
        device_id=device if device.type == 'cuda' else None,
    )
    try:
        return train(rank, world_size, args, data, device)
    finally:
        dist.destroy_process_group()


def train(
    rank: int,
    world_size: int,
    args: argparse.Namespace,
    data: Data,
    device: torch.device,
) -> Optional[Dict[str, Any]]:
    r"""The training loop of one rank in an initialised process group
    (see :func:`worker`)."""
    # Flushed: torchrun passes the output on through a pipe.
    log = partial(print, flush=True) if rank == 0 else (lambda *_: None)
    shard = shard_nodes(
        data.train_mask.nonzero().view(-1), rank, world_size, args.seed
    )
    loader = make_loader(
        data, shard, args.num_neighbors, args.batch_size, args.sampler
    )
    torch.manual_seed(args.seed)  # The same initial model on every rank.
    model = Net(
        data.num_features,
        args.hidden_channels,
        int(data.y.max()) + 1,
        len(args.num_neighbors),
    ).to(device)
    model = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == 'cuda' else None
    )
    optimizer = torch.optim.Adam(
        model.parameters(), lr=args.lr, weight_decay=5e-4
    )
    torch.manual_seed(args.seed + rank)  # Own batches, own dropout.
    sampler = (
        'TorchNeighborSampler'
        if isinstance(loader.node_sampler, TorchNeighborSampler)
        else 'PyG'
    )
    log(
        f'{world_size} process(es), backend {args.backend}, device '
        f'{device.type}; {data.num_nodes} nodes, '
        f'{int(data.train_mask.sum())} training nodes, {shard.numel()} per '
        f'rank in batches of {args.batch_size}; sampler {sampler}, '
        f'neighbours {args.num_neighbors}'
    )

    losses = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        start = time.perf_counter()
        total = torch.zeros(2, dtype=torch.float64, device=device)
        for batch in loader:
            batch = batch.to(device)
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()  # DDP averages the gradients over the ranks.
            optimizer.step()
            total += torch.stack(
                [
                    loss.detach().double() * batch.batch_size,
                    total.new_tensor(batch.batch_size),
                ]
            )
        dist.all_reduce(total)
        losses.append(float(total[0] / total[1]))
        log(
            f'epoch {epoch}/{args.epochs}: loss={losses[-1]:.4f} '
            f'({time.perf_counter() - start:.2f} s)'
        )

    state = replica_state(model.module)
    states = [torch.empty_like(state) for _ in range(world_size)]
    dist.all_gather(states, state)
    replicas = compare_replicas(states)  # On every rank: all stop if not.
    if not replicas['identical']:
        raise RuntimeError(
            f"the replicas' parameters differ after "
            f'training (largest difference '
            f'{replicas["max_abs_diff"]:.3g}; digests '
            f'{" ".join(replicas["digests"])})'
        )
    if rank != 0:
        dist.barrier()  # Wait for rank 0's evaluation.
        return None
    log(
        f'replicas identical on all {world_size} ranks (parameters '
        f'{replicas["digests"][0]})'
    )
    accuracy = evaluate(model.module, data, device)
    dist.barrier()
    log(
        f'accuracy (last epoch, full graph): train '
        f'{100 * accuracy["train_acc"]:.1f}, validation '
        f'{100 * accuracy["val_acc"]:.1f}, test '
        f'{100 * accuracy["test_acc"]:.1f}'
    )
    result = {
        'world_size': world_size,
        'backend': args.backend,
        'sampler': sampler,
        'nodes_per_rank': shard.numel(),
        'losses': losses,
        'replicas': replicas,
        **accuracy,
    }
    if args.result:
        atomic_write_text(json.dumps(result, indent=1) + '\n', args.result)
    return result


# Launching -----------------------------------------------------------------


def launched_by_torchrun() -> bool:
    return all(name in os.environ for name in TORCHRUN_VARIABLES)


def check_arguments(
    args: argparse.Namespace, world_size: int, local_world_size: int
) -> None:
    r"""Refuses bad flags with a one-line error before any data is read or
    process started."""
    for flag in ('epochs', 'batch_size', 'hidden_channels', 'nprocs'):
        value = getattr(args, flag)
        if value < 1:
            raise ValueError(
                f'--{flag.replace("_", "-")} must be a '
                f'positive integer (got {value})'
            )
    if not math.isfinite(args.lr) or args.lr <= 0:
        raise ValueError(
            f'--lr must be a positive finite number (got {args.lr})'
        )
    if any(n == 0 or n < -1 for n in args.num_neighbors):
        raise ValueError(
            f'--num-neighbors must be positive integers or -1 '
            f'(all neighbours), one per hop (got '
            f'{" ".join(map(str, args.num_neighbors))})'
        )
    if args.sampler == 'pyg' and not pyg_can_sample():
        raise ValueError(
            "--sampler pyg needs 'pyg-lib' or 'torch-sparse', "
            'neither is installed; use --sampler torch'
        )
    if launched_by_torchrun() and args.nprocs != 1:
        raise ValueError(
            '--nprocs is for a launch without torchrun; '
            'torchrun starts --nproc_per_node processes'
        )
    if args.backend == 'nccl':
        if not (torch.cuda.is_available() and dist.is_nccl_available()):
            raise ValueError(
                '--backend nccl needs CUDA and NCCL, which '
                'this torch does not have here; use --backend '
                'gloo (CPU)'
            )
        if local_world_size > torch.cuda.device_count():
            raise ValueError(
                f'--backend nccl needs a GPU per process on a '
                f'machine: {local_world_size} processes, '
                f'{torch.cuda.device_count()} GPU(s); start '
                f'fewer processes'
            )
    elif not dist.is_gloo_available():
        raise ValueError('--backend gloo: this torch has no Gloo')
    if args.result is not None:
        check_output_file(args.result, '--result', 'a JSON file name')


def launch(
    args: argparse.Namespace,
    data: Data,
    nprocs: int,
    start_method: str = 'spawn',
) -> None:
    r"""Starts :obj:`nprocs` processes running :func:`worker` (they meet
    through a file in a temporary folder: no port to choose) and waits for
    them; an error in one ends all, with its last line."""
    folder = tempfile.mkdtemp(prefix='apnet-ddp-')
    init_method = 'file://' + osp.join(folder, 'store')
    try:
        torch.multiprocessing.start_processes(
            worker,
            args=(nprocs, args, data, init_method),
            nprocs=nprocs,
            start_method=start_method,
        )
    except torch.multiprocessing.ProcessRaisedException as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        raise RuntimeError(f'rank {error.error_index}: {lines[-1]}') from error
    except torch.multiprocessing.ProcessExitedException as error:
        raise RuntimeError(f'rank {error.error_index}: {error}') from error
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        '--dataset',
        choices=DATASETS,
        default='Cora',
        help='Planetoid dataset (default: Cora)',
    )
    source.add_argument(
        '--synthetic',
        action='store_true',
        help='train on a small generated graph instead',
    )
    parser.add_argument(
        '--raw', default=DEFAULT_RAW, help='folder holding NAME/raw/ind.name.*'
    )
    parser.add_argument(
        '--backend',
        choices=('nccl', 'gloo'),
        default=None,
        help='nccl (a GPU per process) or '
        'gloo (CPU); default: nccl where CUDA is '
        'available',
    )
    parser.add_argument(
        '--nprocs',
        type=int,
        default=1,
        help='processes to start without torchrun (default: 1)',
    )
    parser.add_argument('--epochs', type=int, default=200, help='default: 200')
    parser.add_argument(
        '--batch-size',
        type=int,
        default=32,
        help='seed nodes per mini-batch and rank (default: 32)',
    )
    parser.add_argument(
        '--num-neighbors',
        type=int,
        nargs='+',
        default=[10, 10],
        help='neighbours sampled per '
        'node at each hop, -1 for all; one APNetConv '
        'layer per hop (default: 10 10)',
    )
    parser.add_argument(
        '--hidden-channels', type=int, default=16, help='default: 16'
    )
    parser.add_argument('--lr', type=float, default=0.01, help='default: 0.01')
    parser.add_argument(
        '--sampler',
        choices=SAMPLERS,
        default='auto',
        help="PyG's (needs pyg-lib or torch-sparse), "
        'the pure-PyTorch TorchNeighborSampler, or auto: '
        "PyG's where it can sample",
    )
    parser.add_argument('--seed', type=int, default=0, help='default: 0')
    parser.add_argument(
        '--result',
        default=None,
        help='also write the losses, replica digests and '
        'accuracies to this JSON file (rank 0)',
    )
    args = parser.parse_args(argv)
    if args.backend is None:
        args.backend = 'nccl' if torch.cuda.is_available() else 'gloo'
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    torchrun = launched_by_torchrun()
    rank = int(os.environ['RANK']) if torchrun else 0
    try:
        args = parse_arguments(argv)
        if torchrun:
            world_size = int(os.environ['WORLD_SIZE'])
            local_world_size = int(
                os.environ.get('LOCAL_WORLD_SIZE', world_size)
            )
        else:
            world_size = local_world_size = args.nprocs
        check_arguments(args, world_size, local_world_size)
        data = (
            synthetic_graph(args.seed)
            if args.synthetic
            else load_planetoid(args.raw, args.dataset)
        )
    except (Exception, SystemExit) as error:
        # Rank 0 prints the same error (or help); one copy is enough.
        if rank != 0:
            raise SystemExit(
                0 if isinstance(error, SystemExit) and not error.code else 1
            ) from None
        raise
    if torchrun:
        worker(
            rank,
            world_size,
            args,
            data,
            local_rank=int(os.environ['LOCAL_RANK']),
        )
    elif args.nprocs > 1:
        launch(args, data, args.nprocs)
    else:  # One process: the same code path, a group of one.
        folder = tempfile.mkdtemp(prefix='apnet-ddp-')
        try:
            worker(0, 1, args, data, 'file://' + osp.join(folder, 'store'))
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(run_script(main))
