r"""Smoke tests of the benchmark suite: the smallest configuration runs
through the real code path (worker processes, CSV, summary, plots) in a few
seconds, so the suite cannot rot. The benchmarks themselves are not tests."""
import csv
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # benchmarks/ lives beside the package.
    sys.path.insert(0, str(ROOT))

pytest.importorskip('psutil')
pytest.importorskip('matplotlib')

from benchmarks import train_step  # noqa: E402
from benchmarks.propagation import crossover, grid, runner  # noqa: E402
from benchmarks.__main__ import main  # noqa: E402


def read_rows(path: Path):
    with open(path, newline='') as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_propagation_smallest_configuration(tmp_path):
    main(['propagation', '--quick', '--out', str(tmp_path), '--nodes', '40',
          '--degrees', '4', '--features', '16', '--methods', 'apnet_sparse',
          'apnet_dense', '--min-runs', '2', '--min-time', '0'])

    columns, rows = read_rows(tmp_path / 'propagation.csv')
    assert tuple(columns) == runner.COLUMNS
    assert len(rows) == 4  # 2 methods x 2 passes
    assert {row['pass'] for row in rows} == set(grid.PASSES)
    for row in rows:
        assert row['status'] == 'ok', row['note']
        assert (row['N'], row['E'], row['F']) == ('40', '160', '16')
        assert int(row['runs']) >= 2
        assert 0 < float(row['min_ms']) <= float(row['median_ms'])
        assert float(row['peak_mb']) >= 0
        assert row['proj_channels'] == str(grid.PROJ_CHANNELS)
        assert row['load_start'] and row['load_end'] and row['other_cores']

    summary = (tmp_path / 'README.md').read_text()
    for section in ('## Headline', '## Machine', '## Method',
                    '## Sparse / dense crossover', '## Plots'):
        assert section in summary
    for name in ('time_F16.png', 'memory_F16.png', 'crossover.png'):
        assert (tmp_path / name).stat().st_size > 1000
        assert f'({name})' in summary


def test_propagation_records_skips_without_running(tmp_path):
    # Nothing fits in 1 MB: every pass is skipped from the estimate alone.
    main(['propagation', '--quick', '--out', str(tmp_path), '--nodes', '40',
          '--degrees', '4', '--features', '16', '--methods', 'gat',
          '--memory-cap-gb', '0.001'])
    _, rows = read_rows(tmp_path / 'propagation.csv')
    assert [row['status'] for row in rows] == ['skipped', 'skipped']
    assert all(row['note'].startswith('memory:') for row in rows)
    assert '## Skipped and failed passes' in (tmp_path / 'README.md'
                                              ).read_text()


def test_random_graph_has_exact_size():
    for num_nodes, degree in [(50, 4), (50, 30), (50, 'complete')]:
        graph = grid.random_graph_spec(num_nodes, degree)
        edge_index = grid.build_edge_index(graph, seed=0)
        source, target = edge_index.tolist()
        pairs = set(zip(source, target))
        assert len(pairs) == edge_index.size(1) == graph.num_edges
        assert all(s != t for s, t in pairs)
        assert all((t, s) in pairs for s, t in pairs)
    assert grid.random_graph_spec(50, 'complete').num_edges == 50 * 49


def test_crossover_interpolates_in_log_space():
    def row(method, degree, ms):
        return {'method': method, 'N': 1000, 'F': 256, 'pass': 'forward',
                'status': 'ok', 'graph': 'random', 'degree': degree,
                'min_ms': ms}

    # Sparse time proportional to the degree, dense flat at 40 ms: equal at
    # degree 40, which log-log interpolation between 16 and 64 recovers.
    rows = [row('apnet_sparse', d, float(d)) for d in (4, 16, 64)]
    rows += [row('apnet_dense', d, 40.0) for d in (4, 64)]
    found = crossover.find_crossover(rows, 1000, 256, 'forward')
    assert found['bracket'] == (16, 64)
    assert math.isclose(found['degree'], 40.0, rel_tol=1e-9)

    dense_always = rows[:3] + [row('apnet_dense', 4, 1.0)]
    assert crossover.find_crossover(dense_always, 1000, 256,
                                    'forward')['bound'] == 'below'


def test_train_step_quick(tmp_path):
    main(['train_step', '--quick', '--out', str(tmp_path), '--threads', '1'])
    columns, rows = read_rows(tmp_path / 'train_step.csv')
    assert tuple(columns) == tuple(train_step.COLUMNS)
    stages = [row['stage'] for row in rows]
    assert stages == train_step.STAGES + ['total']
    times = {row['stage']: float(row['median_ms']) for row in rows}
    assert all(value > 0 for value in times.values())
    # Every episode's total is at least each of its stages, so the medians
    # keep that order too.
    assert all(times['total'] >= times[stage] for stage in train_step.STAGES)
    assert '| total |' in (tmp_path / 'train_step.md').read_text()


def test_propagation_small_real_graph(tmp_path):
    # The Cora row: the drop-in configuration against AGNNConv.
    graph, why = grid.cora_spec(str(tmp_path))
    assert graph is None and why.startswith('Cora unavailable')
    graph, why = grid.cora_spec(grid.PLANETOID_ROOT)
    if graph is None:
        pytest.skip(why)
    assert (graph.kind, graph.num_nodes, graph.num_edges) == ('cora', 2708,
                                                              10556)
    main(['propagation', '--out', str(tmp_path), '--nodes', '40',
          '--degrees', '4', '--features', '16', '--methods', 'apnet_default',
          'agnn', '--no-wordnet', '--no-refine', '--min-runs', '2',
          '--min-time', '0', '--quiet-wait', '0', '--time-cap', '5'])
    _, rows = read_rows(tmp_path / 'propagation.csv')
    cora = [row for row in rows if row['graph'] == 'cora']
    assert {(row['method'], row['pass']) for row in cora} == {
        (method, pass_) for method in ('apnet_default', 'agnn')
        for pass_ in grid.PASSES}
    # The defaults' method runs on Cora only:
    assert all(row['graph'] == 'cora' for row in rows
               if row['method'] == 'apnet_default')
    summary = (tmp_path / 'README.md').read_text()
    assert '- Small graph (Cora, 2,708 nodes, 10,556 edges), F = 16' in summary
    assert '## Small graph: Cora' in summary


def test_propagation_modules_import_one_way():
    # Each module of the suite imports only those before it in this order
    # (no cycle: the report reads the runner's constants, never the reverse).
    import ast
    order = ['grid', 'cost_model', 'worker', 'crossover', 'runner', 'report']
    folder = ROOT / 'benchmarks' / 'propagation'
    assert sorted(p.stem for p in folder.glob('*.py')) == sorted(
        order + ['__init__'])
    for position, name in enumerate(order):
        tree = ast.parse((folder / f'{name}.py').read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and \
                    node.module.startswith('benchmarks.propagation'):
                module = node.module.split('.')[2:] or \
                    [alias.name for alias in node.names]
                imported.update(module)
        assert imported <= set(order[:position]), (name, imported)


def test_propagation_help_lists_its_options(capsys):
    with pytest.raises(SystemExit):
        main(['propagation', '--help'])
    text = capsys.readouterr().out
    for flag in ('--nodes', '--degrees', '--features', '--methods',
                 '--no-wordnet', '--no-cora', '--planetoid-root',
                 '--no-refine', '--time-cap', '--memory-cap-gb',
                 '--min-runs', '--quiet-wait', '--quiet-wait-total',
                 '--min-time', '--device', '--quick', '--out'):
        assert flag in text


def test_machine_record_holds_the_run_environment():
    from benchmarks.common import describe_machine
    from apnet_pyg.zsl.environment import describe_environment

    machine = describe_machine('cpu')
    assert machine.items() >= describe_environment('cpu').items()
    assert machine['device'] == 'cpu' and float(machine['ram_gb']) > 0
    assert machine['os']
