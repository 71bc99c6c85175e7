r"""examples/distributed.py: DDP training of APNetConv with NeighborLoader
mini-batches. Two Gloo processes under torchrun keep identical replicas
and lower the loss; the pure-PyTorch neighbour sampler matches a reference
written from its definition; bad flags end with one line."""

import json
import os
import os.path as osp
import subprocess
import sys
from collections import Counter

import pytest
import torch
import torch.distributed as dist
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import NodeSamplerInput

from apnet_pyg.scripting import run_script
from tests.helpers.planetoid_toy import write_raw_cora
from tests.helpers.scripts import EXAMPLES, load_script

distributed = load_script('distributed')
EXAMPLE = osp.join(EXAMPLES, 'distributed.py')


def small_graph():
    r"""A directed graph with a hub (node 0, in-degree 12), a repeated edge,
    a node without incoming edges (14) and a self-loop (5 -> 5)."""
    generator = torch.Generator().manual_seed(3)
    hub = torch.stack([torch.arange(1, 13), torch.zeros(12, dtype=torch.long)])
    extra = torch.tensor(
        [
            [3, 3, 5, 0, 7, 8, 9, 2, 14, 10, 11, 12, 13],
            [1, 1, 5, 2, 3, 3, 3, 4, 6, 9, 9, 13, 12],
        ]
    )
    edge_index = torch.cat([hub, extra], dim=1)
    edge_index = edge_index[
        :, torch.randperm(edge_index.size(1), generator=generator)
    ]
    return Data(
        x=torch.randn(15, 3, generator=generator),
        edge_index=edge_index,
        num_nodes=15,
    )


def reference_neighbourhood(edge_index, seed, hops):
    r"""Every incoming edge of every node reached, hop by hop, from the
    definition: the seeds first, then each hop's new sources in ascending
    order; per hop the sorted (source, target, edge id) triples."""
    nodes, frontier, layers = list(seed), list(seed), []
    for _ in range(hops):
        triples = sorted(
            (int(s), int(t), e)
            for e, (s, t) in enumerate(edge_index.t().tolist())
            if t in frontier
        )
        frontier = sorted({s for s, _, _ in triples} - set(nodes))
        nodes += frontier
        layers.append(triples)
    return nodes, layers


def sampled_layers(batch, hops):
    r"""The (source, target, edge id) triples of a :class:`NeighborLoader`
    batch in global ids, split by hop and sorted."""
    source, target = batch.n_id[batch.edge_index]
    triples = list(zip(source.tolist(), target.tolist(), batch.e_id.tolist()))
    layers, start = [], 0
    for count in batch.num_sampled_edges[:hops]:
        layers.append(sorted(triples[start : start + int(count)]))
        start += int(count)
    assert start == len(triples)
    return layers


# Neighbour sampling ---------------------------------------------------------


@pytest.mark.skipif(
    distributed.pyg_can_sample(),
    reason='pyg-lib or torch-sparse is installed: PyG samples itself',
)
def test_pyg_neighbor_loader_cannot_sample_without_pyg_lib():
    # Why the example brings its own sampler.
    loader = distributed.make_loader(
        small_graph(), torch.tensor([0]), [2], batch_size=1, sampler='auto'
    )
    assert isinstance(loader.node_sampler, distributed.TorchNeighborSampler)
    with pytest.warns(UserWarning, match='pyg-lib'):
        loader = torch_geometric_loader(small_graph())
    with pytest.raises(ImportError, match='pyg-lib'):
        next(iter(loader))


def torch_geometric_loader(data):
    from torch_geometric.loader import NeighborLoader

    return NeighborLoader(data, num_neighbors=[2], batch_size=1)


@pytest.mark.parametrize('seed', [[0], [3, 9], [14], [5, 12, 0]])
def test_torch_sampler_takes_every_neighbour_with_minus_one(seed):
    data = small_graph()
    loader = distributed.make_loader(
        data,
        torch.tensor(seed),
        [-1, -1],
        batch_size=len(seed),
        sampler='torch',
        shuffle=False,
    )
    batch = next(iter(loader))
    nodes, layers = reference_neighbourhood(data.edge_index, seed, 2)
    assert batch.n_id.tolist() == nodes
    assert batch.batch_size == len(seed)
    assert sampled_layers(batch, 2) == layers
    assert batch.num_sampled_nodes == [len(seed)] + [
        len(nodes_hop)
        for nodes_hop in reference_new_nodes(nodes, seed, layers)
    ]
    # Features follow the nodes; edges point from source to target.
    assert torch.equal(batch.x, data.x[batch.n_id])


def reference_new_nodes(nodes, seed, layers):
    seen, new = set(seed), []
    for triples in layers:
        hop = sorted({s for s, _, _ in triples} - seen)
        seen |= set(hop)
        new.append(hop)
    assert sum(map(len, new)) + len(seed) == len(nodes)
    return new


@pytest.mark.parametrize('fanout', [[1], [3, 2], [5, 5, 5]])
def test_torch_sampler_keeps_at_most_fanout_real_distinct_edges(fanout):
    data = small_graph()
    torch.manual_seed(0)
    loader = distributed.make_loader(
        data, torch.arange(15), fanout, batch_size=4, sampler='torch'
    )
    edges = set(map(tuple, data.edge_index.t().tolist()))
    indegree = Counter(data.edge_index[1].tolist())
    for batch in loader:
        layers = sampled_layers(batch, len(fanout))
        targets = set(batch.n_id[: batch.batch_size].tolist())
        seen = set(batch.n_id[: batch.batch_size].tolist())
        for hop, triples in enumerate(layers):
            per_target = Counter(t for _, t, _ in triples)
            for target in targets:
                assert per_target[target] == min(fanout[hop], indegree[target])
            assert set(per_target) <= targets
            ids = [e for _, _, e in triples]
            assert len(set(ids)) == len(ids)  # Without replacement.
            for source, target, e in triples:
                assert (source, target) in edges
                assert data.edge_index[:, e].tolist() == [source, target]
            targets = {s for s, _, _ in triples} - seen
            seen |= targets


def test_torch_sampler_draws_uniformly_and_repeats_for_a_seed():
    # The hub has 12 neighbours; 3 of them are drawn: each with 1/4.
    sampler = distributed.TorchNeighborSampler(small_graph(), [3])
    request = NodeSamplerInput(input_id=None, node=torch.tensor([0]))
    torch.manual_seed(0)
    counts, draws = Counter(), 2000
    for _ in range(draws):
        out = sampler.sample_from_nodes(request)
        assert out.num_sampled_edges == [3]
        counts.update(out.node[out.row].tolist())
    assert sorted(counts) == list(range(1, 13))
    for count in counts.values():  # Binomial: standard deviation 0.0097.
        assert abs(count / draws - 0.25) < 0.05
    torch.manual_seed(1)
    first = sampler.sample_from_nodes(request)
    torch.manual_seed(1)
    second = sampler.sample_from_nodes(request)
    assert torch.equal(first.node, second.node)
    assert torch.equal(first.edge, second.edge)


@pytest.mark.skipif(
    not distributed.pyg_can_sample(),
    reason="needs pyg-lib or torch-sparse (PyG's own "
    'sampler), which is not installed',
)
def test_torch_sampler_matches_pyg_with_every_neighbour():
    data = small_graph()
    seed = torch.tensor([3, 9, 0])
    batches = [
        next(
            iter(
                distributed.make_loader(
                    data, seed, [-1, -1], 3, sampler=name, shuffle=False
                )
            )
        )
        for name in ('torch', 'pyg')
    ]
    assert set(batches[0].n_id.tolist()) == set(batches[1].n_id.tolist())
    assert sampled_layers(batches[0], 2) == sampled_layers(batches[1], 2)


def test_torch_sampler_refuses_what_it_does_not_sample():
    sampler = distributed.TorchNeighborSampler(small_graph(), [2])
    with pytest.raises(ValueError, match='distinct seed nodes'):
        sampler.sample_from_nodes(
            NodeSamplerInput(input_id=None, node=torch.tensor([1, 1]))
        )
    hetero = HeteroData()
    hetero['a'].num_nodes = 2
    with pytest.raises(ValueError, match="homogeneous 'Data' graph"):
        distributed.TorchNeighborSampler(hetero, [2])


# Sharding and replicas -----------------------------------------------------


@pytest.mark.parametrize(
    'num_nodes, world_size', [(40, 2), (7, 3), (2, 3), (5, 1)]
)
def test_shards_are_equal_and_cover_every_node(num_nodes, world_size):
    nodes = torch.arange(100, 100 + num_nodes)
    shards = [
        distributed.shard_nodes(nodes, rank, world_size, seed=4)
        for rank in range(world_size)
    ]
    size = -(-num_nodes // world_size)
    assert all(shard.numel() == size for shard in shards)
    assert all(shard.unique().numel() == size for shard in shards)
    assert set(torch.cat(shards).tolist()) == set(nodes.tolist())
    # Padding repeats only as many nodes as it must.
    assert (
        torch.cat(shards).numel() - num_nodes == size * world_size - num_nodes
    )
    other = distributed.shard_nodes(nodes, 0, world_size, seed=5)
    assert num_nodes < 3 or not torch.equal(other, shards[0])
    with pytest.raises(ValueError, match='no training nodes'):
        distributed.shard_nodes(nodes[:0], 0, world_size, seed=4)


def test_compare_replicas_sees_a_one_ulp_difference():
    state = torch.randn(50, dtype=torch.float64)
    same = distributed.compare_replicas([state, state.clone()])
    assert same['identical'] and same['max_abs_diff'] == 0
    assert same['digests'][0] == same['digests'][1]
    moved = state.clone()
    moved[7] = torch.nextafter(
        moved[7], torch.tensor(10.0, dtype=torch.float64)
    )
    differ = distributed.compare_replicas([state, state.clone(), moved])
    assert not differ['identical'] and 0 < differ['max_abs_diff'] < 1e-12
    assert differ['digests'][2] != differ['digests'][0]


# Training ------------------------------------------------------------------


def test_two_gloo_processes_under_torchrun(tmp_path):
    result_file = tmp_path / 'result.json'
    env = dict(os.environ, OMP_NUM_THREADS='1')
    run = subprocess.run(
        [
            sys.executable,
            '-m',
            'torch.distributed.run',
            '--standalone',
            '--nproc_per_node=2',
            EXAMPLE,
            '--synthetic',
            '--backend',
            'gloo',
            '--epochs',
            '8',
            '--batch-size',
            '8',
            '--result',
            str(result_file),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(result_file.read_text())
    assert result['world_size'] == 2 and result['backend'] == 'gloo'
    assert result['nodes_per_rank'] == 20  # 40 training nodes, 2 shards.
    # (a) DDP kept the replicas bitwise equal:
    replicas = result['replicas']
    assert replicas['identical'] and replicas['max_abs_diff'] == 0
    assert len(replicas['digests']) == 2
    assert replicas['digests'][0] == replicas['digests'][1]
    # (b) the loss falls:
    losses = result['losses']
    assert len(losses) == 8
    assert sum(losses[-3:]) < sum(losses[:3])
    assert result['val_acc'] > 0.5  # 4 classes: chance is 0.25.
    # Rank 0 alone prints: each epoch once.
    assert run.stdout.count('epoch 8/8: loss=') == 1
    assert run.stdout.count('replicas identical on all 2 ranks') == 1


@pytest.fixture
def one_thread():
    # As torchrun sets OMP_NUM_THREADS=1: tiny matrix products on two
    # threads of a busy machine take 100 times longer.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_one_process(args, data, tmp_path, name):
    store = tmp_path / f'{name}.store'
    return distributed.worker(0, 1, args, data, f'file://{store}')


def test_one_process_training_repeats_for_a_seed(tmp_path, capsys, one_thread):
    data = distributed.synthetic_graph(1)
    args = distributed.parse_arguments(
        [
            '--synthetic',
            '--backend',
            'gloo',
            '--epochs',
            '3',
            '--batch-size',
            '16',
            '--seed',
            '2',
        ]
    )
    first = run_one_process(args, data, tmp_path, 'first')
    second = run_one_process(args, data, tmp_path, 'second')
    assert first['losses'] == second['losses']
    assert first['replicas'] == second['replicas']
    args.seed = 3
    third = run_one_process(args, data, tmp_path, 'third')
    assert third['losses'] != first['losses']
    assert not dist.is_initialized()
    out = capsys.readouterr().out
    assert out.count('epoch 3/3: loss=') == 3


def test_planetoid_files_run_in_one_process(tmp_path, capsys, one_thread):
    write_raw_cora(tmp_path / 'raw')
    result_file = tmp_path / 'result.json'
    assert (
        run_script(
            distributed.main,
            [
                '--raw',
                str(tmp_path / 'raw'),
                '--epochs',
                '2',
                '--backend',
                'gloo',
                '--num-neighbors',
                '-1',
                '--result',
                str(result_file),
            ],
        )
        == 0
    )
    result = json.loads(result_file.read_text())
    assert result['world_size'] == 1 and len(result['losses']) == 2
    assert result['nodes_per_rank'] == 2  # The toy's 2 training nodes.
    assert '504 nodes, 2 training nodes' in capsys.readouterr().out


def test_launch_reports_a_failed_process_in_one_line(monkeypatch):
    calls = []

    def failing_start(fn, args, nprocs, start_method):
        calls.append((fn, args, nprocs, start_method))
        raise torch.multiprocessing.ProcessRaisedException(
            '\n\n-- Process 1 terminated with the following error:\n'
            'Traceback (most recent call last):\n  File "x.py", line 1\n'
            'ValueError: something broke\n',
            1,
            1234,
        )

    monkeypatch.setattr(
        torch.multiprocessing, 'start_processes', failing_start
    )
    args = distributed.parse_arguments(['--synthetic', '--nprocs', '2'])
    with pytest.raises(RuntimeError) as error:
        distributed.launch(args, 'DATA', 2)
    assert str(error.value) == 'rank 1: ValueError: something broke'
    [(fn, fn_args, nprocs, start_method)] = calls
    assert fn is distributed.worker and nprocs == 2
    assert start_method == 'spawn'
    assert fn_args[:3] == (2, args, 'DATA')
    assert fn_args[3].startswith('file://')
    assert not osp.exists(fn_args[3][len('file://') :])  # Cleaned up.


# Bad input -----------------------------------------------------------------


def work_reached(*args, **kwargs):
    raise AssertionError('the work started before the flags were checked')


@pytest.mark.parametrize(
    'flags, message',
    [
        (['--epochs', '0'], '--epochs must be a positive integer (got 0)'),
        (['--batch-size', '-2'], '--batch-size must be a positive integer'),
        (['--hidden-channels', '0'], '--hidden-channels must be a positive'),
        (['--nprocs', '0'], '--nprocs must be a positive integer (got 0)'),
        (['--lr', 'nan'], '--lr must be a positive finite number (got nan)'),
        (['--lr', '0'], '--lr must be a positive finite number (got 0.0)'),
        (
            ['--num-neighbors', '10', '0'],
            '--num-neighbors must be positive '
            'integers or -1 (all neighbours), one per hop (got 10 0)',
        ),
        (['--num-neighbors', '-2'], '--num-neighbors must be positive'),
    ],
)
def test_bad_flags_end_in_one_line(flags, message, monkeypatch, capsys):
    monkeypatch.setattr(distributed, 'synthetic_graph', work_reached)
    monkeypatch.setattr(distributed, 'worker', work_reached)
    assert (
        run_script(
            distributed.main, ['--synthetic', '--backend', 'gloo'] + flags
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith(f'error: {message}'), err
    assert len(err.splitlines()) == 1


def one_line_error(argv, capsys):
    assert run_script(distributed.main, argv) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith('error: '), err
    return err.strip()


@pytest.mark.skipif(
    distributed.pyg_can_sample(), reason='pyg-lib or torch-sparse is installed'
)
def test_pyg_sampler_without_pyg_lib_is_refused(capsys):
    assert 'use --sampler torch' in one_line_error(
        ['--synthetic', '--backend', 'gloo', '--sampler', 'pyg'], capsys
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason='CUDA is available')
def test_nccl_without_cuda_is_refused(capsys):
    assert one_line_error(['--synthetic', '--backend', 'nccl'], capsys) == (
        'error: --backend nccl needs CUDA and NCCL, which this torch does '
        'not have here; use --backend gloo (CPU)'
    )


def test_nccl_needs_a_gpu_per_process(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'device_count', lambda: 2)
    monkeypatch.setattr(dist, 'is_nccl_available', lambda: True)
    monkeypatch.setattr(distributed, 'worker', work_reached)
    monkeypatch.setattr(distributed, 'launch', work_reached)
    assert one_line_error(['--synthetic', '--nprocs', '3'], capsys) == (
        'error: --backend nccl needs a GPU per process on a machine: 3 '
        'processes, 2 GPU(s); start fewer processes'
    )


def test_missing_or_garbled_planetoid_files(tmp_path, capsys):
    assert one_line_error(
        ['--raw', str(tmp_path), '--backend', 'gloo'], capsys
    ).startswith(
        f'error: --raw: no raw Planetoid Cora files under '
        f'{tmp_path}/Cora/raw; pass --raw DIR'
    )
    folder = write_raw_cora(tmp_path)
    (folder / 'ind.cora.ally').write_bytes(b'\x80garbage')
    err = one_line_error(['--raw', str(tmp_path), '--backend', 'gloo'], capsys)
    assert 'ind.cora.ally' in err and 'copy the raw Planetoid Cora' in err


def test_result_file_that_is_a_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(distributed, 'worker', work_reached)
    assert one_line_error(
        ['--synthetic', '--backend', 'gloo', '--result', str(tmp_path)], capsys
    ) == (
        f"error: --result '{tmp_path}' is a directory: give a JSON file name"
    )


def test_under_torchrun_only_rank_zero_prints_an_error(monkeypatch, capsys):
    for name, value in [
        ('MASTER_ADDR', 'localhost'),
        ('MASTER_PORT', '1'),
        ('WORLD_SIZE', '2'),
        ('LOCAL_WORLD_SIZE', '2'),
    ]:
        monkeypatch.setenv(name, value)
    argv = ['--synthetic', '--backend', 'gloo', '--epochs', '0']
    for rank in ('0', '1'):
        monkeypatch.setenv('RANK', rank)
        monkeypatch.setenv('LOCAL_RANK', rank)
        if rank == '0':
            assert one_line_error(argv, capsys) == (
                'error: --epochs must be a positive integer (got 0)'
            )
        else:
            with pytest.raises(SystemExit) as exit:
                run_script(distributed.main, argv)
            assert exit.value.code == 1
            assert capsys.readouterr().err == ''
            with pytest.raises(SystemExit) as exit:  # Not a failure.
                run_script(distributed.main, ['--help'])
            assert exit.value.code == 0
    monkeypatch.setenv('RANK', '0')
    assert one_line_error(
        ['--synthetic', '--backend', 'gloo', '--nprocs', '2'], capsys
    ) == (
        'error: --nprocs is for a launch without torchrun; torchrun starts '
        '--nproc_per_node processes'
    )
