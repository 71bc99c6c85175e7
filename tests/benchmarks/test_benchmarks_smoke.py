r"""Smoke tests of the benchmark suite: the smallest configuration runs
through the real code path (worker processes, CSV, summary, plots) in a few
seconds, so the suite cannot rot. The benchmarks themselves are not tests."""

import csv
import math
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip('psutil')
pytest.importorskip('matplotlib')

import torch  # noqa: E402

from benchmarks import train_step  # noqa: E402
from benchmarks.__main__ import main  # noqa: E402
from benchmarks.propagation import crossover, grid, runner  # noqa: E402


def read_rows(path: Path):
    with open(path, newline='') as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def smallest_run_argv(suite, out, propagation_flags):
    r"""A --quick run of :obj:`suite` into :obj:`out`: one node count,
    degree, width and method (and :obj:`propagation_flags`) for the
    propagation suite, one episode without warm-up for train_step."""
    argv = [suite, '--quick', '--out', out]
    if suite == 'propagation':
        return argv + [
            '--nodes',
            '40',
            '--degrees',
            '4',
            '--features',
            '16',
            '--methods',
            'agnn',
            *propagation_flags,
        ]
    return argv + ['--steps', '1', '--warmup', '0']


def record_replacements(monkeypatch):
    r"""The names of the files written atomically (by :func:`os.replace`
    of a temporary file) from now on."""
    import os

    replaced, replace = [], os.replace

    def recording(source, target, *args, **kwargs):
        replaced.append(Path(target).name)
        return replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, 'replace', recording)
    return replaced


def test_propagation_smallest_configuration(tmp_path, monkeypatch):
    replaced = record_replacements(monkeypatch)
    main(
        [
            'propagation',
            '--quick',
            '--out',
            str(tmp_path),
            '--nodes',
            '40',
            '--degrees',
            '4',
            '--features',
            '16',
            '--methods',
            'apnet_sparse',
            'apnet_dense',
            '--min-runs',
            '2',
            '--min-time',
            '0',
        ]
    )

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
    for section in (
        '## Headline',
        '## Machine',
        '## Method',
        '## Sparse / dense crossover',
        '## Plots',
    ):
        assert section in summary
    for name in ('time_F16.png', 'memory_F16.png', 'crossover.png'):
        assert (tmp_path / name).stat().st_size > 1000
        assert f'({name})' in summary
    # Written atomically: an interrupted run leaves the previous file whole.
    assert {'propagation.csv', 'README.md'} <= set(replaced)
    assert not list(tmp_path.glob('*.tmp'))


def main_measuring_nothing(argv):
    r"""Runs :obj:`argv`, a propagation run whose every pass is skipped:
    its files are written, and it ends with the error of a run that
    measured nothing."""
    with pytest.raises(RuntimeError, match='nothing was measured'):
        main(argv)


def test_propagation_records_skips_without_running(tmp_path):
    # Nothing fits in 1 MB: every pass is skipped from the estimate alone.
    main_measuring_nothing(
        [
            'propagation',
            '--quick',
            '--out',
            str(tmp_path),
            '--nodes',
            '40',
            '--degrees',
            '4',
            '--features',
            '16',
            '--methods',
            'gat',
            '--memory-cap-gb',
            '0.001',
        ]
    )
    _, rows = read_rows(tmp_path / 'propagation.csv')
    assert [row['status'] for row in rows] == ['skipped', 'skipped']
    assert all(row['note'].startswith('memory:') for row in rows)
    assert (
        '## Skipped and failed passes' in (tmp_path / 'README.md').read_text()
    )


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
        return {
            'method': method,
            'N': 1000,
            'F': 256,
            'pass': 'forward',
            'status': 'ok',
            'graph': 'random',
            'degree': degree,
            'min_ms': ms,
        }

    # Sparse time proportional to the degree, dense flat at 40 ms: equal at
    # degree 40, which log-log interpolation between 16 and 64 recovers.
    rows = [row('apnet_sparse', d, float(d)) for d in (4, 16, 64)]
    rows += [row('apnet_dense', d, 40.0) for d in (4, 64)]
    found = crossover.find_crossover(rows, 1000, 256, 'forward')
    assert found['bracket'] == (16, 64)
    assert math.isclose(found['degree'], 40.0, rel_tol=1e-9)

    dense_always = rows[:3] + [row('apnet_dense', 4, 1.0)]
    assert (
        crossover.find_crossover(dense_always, 1000, 256, 'forward')['bound']
        == 'below'
    )


def test_train_step_quick(tmp_path, monkeypatch):
    replaced = record_replacements(monkeypatch)
    # Explicit flags win over --quick's defaults (5 steps, 2 warm-up).
    main(
        [
            'train_step',
            '--quick',
            '--out',
            str(tmp_path),
            '--threads',
            '1',
            '--steps',
            '3',
            '--warmup',
            '1',
        ]
    )
    columns, rows = read_rows(tmp_path / 'train_step.csv')
    assert tuple(columns) == tuple(train_step.COLUMNS)
    stages = [row['stage'] for row in rows]
    assert stages == train_step.STAGES + ['total']
    assert {row['runs'] for row in rows} == {'3'}
    assert {row['graph'] for row in rows} == {'learned'}
    assert (
        'medians of 3 episodes after 1 warm-up'
        in (tmp_path / 'train_step.md').read_text()
    )
    assert {'train_step.csv', 'train_step.md'} <= set(replaced)
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
    assert (graph.kind, graph.num_nodes, graph.num_edges) == (
        'cora',
        2708,
        10556,
    )
    main(
        [
            'propagation',
            '--out',
            str(tmp_path),
            '--nodes',
            '40',
            '--degrees',
            '4',
            '--features',
            '16',
            '--methods',
            'apnet_default',
            'agnn',
            '--no-wordnet',
            '--no-refine',
            '--min-runs',
            '2',
            '--min-time',
            '0',
            '--quiet-wait',
            '0',
            '--time-cap',
            '5',
        ]
    )
    _, rows = read_rows(tmp_path / 'propagation.csv')
    cora = [row for row in rows if row['graph'] == 'cora']
    assert {(row['method'], row['pass']) for row in cora} == {
        (method, pass_)
        for method in ('apnet_default', 'agnn')
        for pass_ in grid.PASSES
    }
    # The defaults' method runs on Cora only:
    assert all(
        row['graph'] == 'cora'
        for row in rows
        if row['method'] == 'apnet_default'
    )
    summary = (tmp_path / 'README.md').read_text()
    assert '- Small graph (Cora, 2,708 nodes, 10,556 edges), F = 16' in summary
    assert '## Small graph: Cora' in summary


def test_propagation_modules_import_one_way():
    # Each module of the suite imports only those before it in this order
    # (no cycle: the report reads the runner's constants, never the reverse).
    import ast

    order = [
        'grid',
        'cost_model',
        'worker',
        'crossover',
        'runner',
        'plots',
        'report',
        'targets',
    ]
    folder = ROOT / 'benchmarks' / 'propagation'
    assert sorted(p.stem for p in folder.glob('*.py')) == sorted(
        order + ['__init__']
    )
    for position, name in enumerate(order):
        tree = ast.parse((folder / f'{name}.py').read_text())
        imported = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith('benchmarks.propagation')
            ):
                module = node.module.split('.')[2:] or [
                    alias.name for alias in node.names
                ]
                imported.update(module)
        assert imported <= set(order[:position]), (name, imported)


def test_propagation_help_lists_its_options(capsys):
    with pytest.raises(SystemExit):
        main(['propagation', '--help'])
    text = capsys.readouterr().out
    for flag in (
        '--nodes',
        '--degrees',
        '--features',
        '--methods',
        '--no-wordnet',
        '--no-cora',
        '--planetoid-root',
        '--no-refine',
        '--time-cap',
        '--memory-cap-gb',
        '--min-runs',
        '--quiet-wait',
        '--quiet-wait-total',
        '--min-time',
        '--device',
        '--quick',
        '--out',
        '--random-graphs',
        '--defaults-on-all-graphs',
        '--budget',
        '--dtypes',
        '--targets',
    ):
        assert flag in text


def test_machine_record_holds_the_run_environment():
    from apnet_pyg.environment import describe_environment
    from benchmarks.common import describe_machine

    machine = describe_machine('cpu')
    assert machine.items() >= describe_environment('cpu').items()
    assert machine['device'] == 'cpu' and float(machine['ram_gb']) > 0
    assert machine['os']


@pytest.mark.parametrize(
    'argv, message',
    [
        (
            ['propagation', '--degrees', '-4'],
            "--degrees must be positive numbers or 'complete' (got -4)",
        ),
        (
            ['propagation', '--degrees', '0.01'],
            '--degrees 0.01 gives no edge on 100 nodes (--nodes)',
        ),
        (
            ['propagation', '--degrees', '1000'],
            '--degrees 1000 is too dense for 100 nodes (--nodes): a random '
            "graph on N nodes has a degree below N - 1 = 99; pass 'complete'",
        ),
        (
            ['propagation', '--nodes', '100', '200', '--degrees', '4', '500'],
            '--degrees 500 is too dense for every --nodes value (largest 200)',
        ),
        (
            ['propagation', '--degrees', '99', 'complete'],
            '--degrees 99 is too dense for 100 nodes',
        ),
        (
            ['propagation', '--methods', 'apnet_default'],
            '--methods apnet_default are measured on Cora only, which --quick '
            'leaves out',
        ),
        (
            ['propagation', '--planetoid-root', '.'],
            '--planetoid-root is read for Cora only, which --quick leaves out',
        ),
        (
            ['propagation', '--nodes', '0'],
            '--nodes must be integers >= 2 (got 0)',
        ),
        (['propagation', '--nodes', '-5'], '--nodes must be integers >= 2'),
        (
            ['propagation', '--features', '0'],
            '--features must be positive integers (got 0)',
        ),
        (
            ['propagation', '--min-runs', '0', '--min-time', '0'],
            '--min-runs must be a positive integer (got 0)',
        ),
        (
            ['propagation', '--min-time', '-1'],
            '--min-time must be a number >= 0',
        ),
        (
            ['propagation', '--time-cap', '0'],
            '--time-cap must be a positive number of seconds (got 0)',
        ),
        (
            ['propagation', '--memory-cap-gb', 'nan'],
            '--memory-cap-gb must be a positive number (got nan)',
        ),
        (['propagation', '--quiet-wait', '-1'], '--quiet-wait must be'),
        (
            ['propagation', '--quiet-wait-total', '-1'],
            '--quiet-wait-total must be',
        ),
        (
            ['propagation', '--threads', '-1'],
            '--threads must be a positive integer (got -1)',
        ),
        (
            ['propagation', '--threads', '0'],
            '--threads must be a positive integer (got 0)',
        ),
        (
            ['propagation', '--device', 'foo'],
            "--device must be cpu, cuda or cuda:N (got 'foo')",
        ),
        (
            ['propagation', '--machine', '../../escape'],
            '--machine must be a plain folder name',
        ),
        (
            ['propagation', '--machine', '/tmp/escape'],
            '--machine must be a plain folder name',
        ),
        (['--machine', '..'], '--machine must be a plain folder name'),
        (
            ['train_step', '--steps', '0'],
            '--steps must be a positive integer (got 0)',
        ),
        (
            ['train_step', '--quick', '--warmup', '-1'],
            '--warmup must be an integer >= 0 (got -1)',
        ),
        (['train_step', '--graphs', 'none', 'none'], '--graphs names a graph'),
        (['propagation', '--nodes', '100', '100'], '--nodes names 100 twice'),
        (
            ['propagation', '--degrees', '4', '4.0'],
            '--degrees names 4.0 twice',
        ),
        (
            ['propagation', '--features', '16', '16'],
            '--features names 16 twice',
        ),
        (
            ['propagation', '--methods', 'agnn', 'agnn'],
            '--methods names agnn twice',
        ),
        (
            ['propagation', '--methods', 'apnet_triton'],
            '--methods apnet_triton runs on CUDA only: pass --device cuda',
        ),
    ],
)
def test_bad_options_end_with_one_line_naming_the_flag(
    argv, message, tmp_path, capsys
):
    from apnet_pyg.scripting import run_script

    out = tmp_path / 'out'
    base = (
        [
            '--quick',
            '--methods',
            'agnn',
            '--features',
            '16',
            '--nodes',
            '100',
            '--degrees',
            '4',
        ]
        if argv[0] == 'propagation'
        else []
    )
    assert (
        run_script(main, argv[:1] + base + argv[1:] + ['--out', str(out)]) == 1
    )
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()] and err.startswith(
        'error: ' + message
    )
    assert not out.exists()  # Refused before anything ran.


def test_peak_memory_leaves_out_first_call_costs(monkeypatch):
    # A layer whose first call allocates a 64 MB buffer it keeps, as a
    # library's lazy initialisation does: not the pass's memory.
    from benchmarks.propagation import worker

    class LazyLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(1))
            self.cache = None

        def forward(self, x, edge_index):
            if self.cache is None:
                self.cache = torch.ones(16 << 20)  # Touched: resident.
            return x * self.weight

    monkeypatch.setitem(
        worker.METHODS,
        'lazy',
        grid.Method('lazy', 'lazy', False, lambda F: LazyLayer(), lambda F: F),
    )
    for pass_ in grid.PASSES:
        result = worker.measure(
            {
                'method': 'lazy',
                'graph': vars(grid.random_graph_spec(40, 4)),
                'F': 16,
                'pass': pass_,
                'device': 'cpu',
                'threads': torch.get_num_threads(),
                'seed': 0,
                'memory_cap_bytes': 1 << 30,
                'timing': {
                    'min_runs': 2,
                    'min_time': 0,
                    'max_runs': 2,
                    'time_cap': 10,
                },
            }
        )
        assert result['status'] == 'ok'
        assert result['peak_mb'] < 16, (pass_, result['peak_mb'])


def test_peak_memory_is_not_measured_where_the_peak_cannot_be_reset(
    monkeypatch,
):
    # The process's lifetime peak would count the setup and the warm-up.
    from benchmarks import common
    from benchmarks.propagation import worker

    monkeypatch.setattr(common, '_reset_rss_peak', lambda: False)
    result = worker.measure(
        {
            'method': 'agnn',
            'graph': vars(grid.random_graph_spec(40, 4)),
            'F': 16,
            'pass': 'forward',
            'device': 'cpu',
            'threads': torch.get_num_threads(),
            'seed': 0,
            'memory_cap_bytes': 1 << 30,
            'timing': {
                'min_runs': 1,
                'min_time': 0,
                'max_runs': 1,
                'time_cap': 10,
            },
        }
    )
    assert result['status'] == 'ok' and result['peak_mb'] is None


@pytest.mark.parametrize('suite', ['propagation', 'train_step'])
def test_an_out_folder_that_refuses_files_is_refused_before_measuring(
    suite, tmp_path, monkeypatch, capsys
):
    # An existing folder that cannot be written (read-only or virtual file
    # system) was found only when the results were written, at the end.
    import tempfile

    from apnet_pyg.scripting import run_script

    def refuse(*args, **kwargs):
        raise PermissionError(13, 'Permission denied')

    monkeypatch.setattr(tempfile, 'mkstemp', refuse)
    argv = smallest_run_argv(
        suite, str(tmp_path), ['--min-runs', '1', '--min-time', '0']
    )
    assert run_script(main, argv) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        f"error: cannot write in the output folder '{tmp_path}' "
        f'(Permission denied): choose a folder you can write to'
    )
    assert ' ok ' not in captured.out  # Nothing was measured.


def test_summary_finds_a_degree_whose_edges_were_rounded(tmp_path):
    # Degree 3.3 on 10 nodes gives 16 edge pairs (degree 3.2): its rows
    # belong to the 3.3 row of the tables all the same.
    main_measuring_nothing(
        [  # Skipped without running.
            'propagation',
            '--quick',
            '--out',
            str(tmp_path),
            '--nodes',
            '10',
            '100',
            '--degrees',
            '3.3',
            '--features',
            '16',
            '--methods',
            'agnn',
            '--memory-cap-gb',
            '0.001',
        ]
    )
    _, rows = read_rows(tmp_path / 'propagation.csv')
    assert {row['degree'] for row in rows} == {'3.2', '3.3'}
    table_rows = [
        line
        for line in (tmp_path / 'README.md').read_text().splitlines()
        if line.startswith('| 3.3 | AGNNConv')
    ]
    assert table_rows and all(
        '|  |' not in line and line.count('skip / skip') == 2
        for line in table_rows
    ), table_rows


def test_summary_links_the_suite_readme_from_its_folder():
    from benchmarks.common import RESULTS_ROOT
    from benchmarks.propagation.report import suite_readme_link

    readme = ROOT / 'benchmarks' / 'README.md'
    for folder in (
        Path(RESULTS_ROOT) / 'cpu-x',
        Path(RESULTS_ROOT) / 'cpu-x' / 'quick',
    ):
        link = suite_readme_link(str(folder))
        target = link[link.index('(') + 1 : -1]
        assert Path(os.path.normpath(folder / target)) == readme, link
    # Outside the repository no relative link holds: the name only.
    assert suite_readme_link('/') == '`benchmarks/README.md`'


def test_write_csv_keeps_the_previous_file_on_error(tmp_path):
    from benchmarks.common import write_csv

    path = tmp_path / 'rows.csv'
    write_csv(str(path), [{'a': 1}], ['a'])

    def rows():
        yield {'a': 2}
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_csv(str(path), rows(), ['a'])
    assert path.read_text().splitlines() == ['a', '1']


def test_propagation_notes_a_degree_too_dense_for_some_node_counts(
    tmp_path, capsys
):
    # Degree 50 cannot be built on 10 nodes (the complete graph is
    # 'complete'), but can on 100: measured there, and the gap said.
    main_measuring_nothing(
        [  # Skipped without running.
            'propagation',
            '--quick',
            '--out',
            str(tmp_path),
            '--nodes',
            '10',
            '100',
            '--degrees',
            '4',
            '50',
            '--features',
            '16',
            '--methods',
            'agnn',
            '--memory-cap-gb',
            '0.001',
        ]
    )
    assert (
        'note: --degrees 50 is too dense for 10 nodes (N - 1 or more)'
        in capsys.readouterr().out
    )
    _, rows = read_rows(tmp_path / 'propagation.csv')
    assert sorted({(row['N'], row['degree']) for row in rows}) == [
        ('10', '4'),
        ('100', '4'),
        ('100', '50'),
    ]


def propagation_run_argv(out):
    # A tiny grid without --quick, so that Cora is asked for.
    return [
        'propagation',
        '--out',
        str(out),
        '--no-wordnet',
        '--no-refine',
        '--nodes',
        '40',
        '--degrees',
        '4',
        '--features',
        '16',
        '--methods',
        'agnn',
        '--min-runs',
        '1',
        '--min-time',
        '0',
        '--quiet-wait',
        '0',
    ]


def write_garbled_cora(root: Path, leave_out=()):
    raw = root / 'Cora' / 'raw'
    raw.mkdir(parents=True)
    for name in ('x', 'tx', 'allx', 'y', 'ty', 'ally', 'graph', 'test.index'):
        if name not in leave_out:
            (raw / f'ind.cora.{name}').write_bytes(b'\x80\x04garbled')
    return raw


@pytest.mark.parametrize('case', ['no folder', 'missing file', 'garbled'])
def test_propagation_refuses_a_planetoid_root_without_cora(
    case, tmp_path, capsys
):
    from apnet_pyg.scripting import run_script

    root, out = tmp_path / 'planetoid', tmp_path / 'out'
    if case == 'no folder':
        named = root / 'Cora' / 'raw'
    elif case == 'missing file':
        named = (
            write_garbled_cora(root, leave_out=['graph']) / 'ind.cora.graph'
        )
    else:
        named = write_garbled_cora(root) / 'ind.cora.x'
    argv = propagation_run_argv(out) + ['--planetoid-root', str(root)]
    assert run_script(main, argv) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()]
    assert err.startswith(
        f"error: --planetoid-root '{root}': Cora unavailable ("
    )
    assert str(named) in err
    assert not out.exists()  # Refused before anything ran.


def test_propagation_skips_cora_missing_at_the_default_place(
    tmp_path, monkeypatch
):
    import benchmarks.propagation as propagation

    monkeypatch.setattr(
        propagation, 'PLANETOID_ROOT', str(tmp_path / 'nowhere')
    )
    main(propagation_run_argv(tmp_path / 'out'))
    summary = (tmp_path / 'out' / 'README.md').read_text()
    assert '- Cora not measured: Cora unavailable (no folder' in summary


@pytest.mark.parametrize('suite', ['propagation', 'train_step'])
def test_empty_out_is_refused(suite, tmp_path, monkeypatch, capsys):
    # An empty --out once fell back to the committed results folder.
    from apnet_pyg.scripting import run_script
    from benchmarks import common

    results = tmp_path / 'results'
    monkeypatch.setattr(common, 'RESULTS_ROOT', str(results))
    argv = smallest_run_argv(suite, '', ['--memory-cap-gb', '0.001'])
    assert run_script(main, argv) == 1
    err = capsys.readouterr().err
    assert err.strip() == (
        'error: --out is empty: name an output folder, '
        'or leave --out out for '
        'benchmarks/results/<machine>'
    )
    assert not results.exists()


def fake_processor(monkeypatch, family, model):
    r"""Makes :obj:`/proc/cpuinfo` describe an ``AMD EPYC`` of
    :obj:`family` and :obj:`model`: one name for several generations, as a
    virtual machine shows them."""
    import builtins
    import io

    real_open = builtins.open
    text = (
        f'processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: '
        f'{family}\nmodel\t\t: {model}\nmodel name\t: AMD EPYC\n'
        f'stepping\t: 1\n\n'
    )

    def cpuinfo(path, *args, **kwargs):
        if str(path) == '/proc/cpuinfo':
            return io.StringIO(text)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, 'open', cpuinfo)


# The machine records of the results committed before the family and model
# were recorded (benchmarks/results/cpu-amd-epyc-2c), abridged.
OLD_README = """# Propagation benchmark: `cpu-amd-epyc-2c`

## Machine

|  |  |
|---|---|
| cpu | AMD EPYC |
| cores | 2 |
| gpu | none |
| device | cpu |

## Method
"""
OLD_TRAIN_STEP = """# Training step benchmark: `cpu-amd-epyc-2c`

Machine: cpu AMD EPYC, cores 2, ram_gb 23.5, gpu none, device cpu, threads 2
"""


def test_default_results_of_another_processor_are_not_overwritten(
    tmp_path, monkeypatch, capsys
):
    # The default folder is named after the CPU's name, which one AMD EPYC
    # generation shares with another: a default run on one overwrote the
    # committed results of the other.
    from apnet_pyg.scripting import run_script
    from benchmarks import common

    results = tmp_path / 'results'
    monkeypatch.setattr(common, 'RESULTS_ROOT', str(results))
    fake_processor(monkeypatch, 25, 1)
    slug = common.machine_slug(common.describe_machine('cpu'))
    assert slug.startswith('cpu-amd-epyc-')
    argv = [
        'train_step',
        '--quick',
        '--threads',
        '1',
        '--steps',
        '1',
        '--warmup',
        '0',
    ]

    def refused(record, theirs, ours='family 25 model 1 stepping 1'):
        assert run_script(main, argv) == 1
        captured = capsys.readouterr()
        assert captured.err.strip() == (
            f"error: '{record}' holds the results of a processor not "
            f'recorded as this one (recorded: {theirs}; this one: AMD '
            f'EPYC, {ours}): pass --machine NAME to write to '
            f'benchmarks/results/NAME (--machine {slug} replaces them), or '
            f'--out FOLDER'
        )
        assert '| total |' not in captured.out  # Nothing was measured.

    # Results that record the name only may be any generation's.
    folder = results / slug
    folder.mkdir(parents=True)
    (folder / 'README.md').write_text(OLD_README)
    refused(folder / 'README.md', 'AMD EPYC, family and model not recorded')
    (folder / 'README.md').unlink()
    (folder / 'train_step.md').write_text(OLD_TRAIN_STEP)
    refused(
        folder / 'train_step.md', 'AMD EPYC, family and model not recorded'
    )
    assert (folder / 'train_step.md').read_text() == OLD_TRAIN_STEP
    assert not (folder / 'quick').exists()
    # Named explicitly, the folder is the user's choice.
    threads = torch.get_num_threads()
    assert common.prepare_run('cpu', threads, True, slug)[2] == str(
        folder / 'quick'
    )
    assert common.prepare_run('cpu', threads, True, out=str(tmp_path / 'o'))[
        2
    ] == str(tmp_path / 'o')

    # A folder of this processor's own results is written again; another
    # generation's default run is refused.
    (folder / 'train_step.md').unlink()
    for _ in range(2):
        assert run_script(main, argv) == 0
    record = folder / 'quick' / 'train_step.md'
    assert 'cpu_id family 25 model 1 stepping 1' in record.read_text()
    capsys.readouterr()
    fake_processor(monkeypatch, 26, 2)
    refused(
        record,
        'AMD EPYC, family 25 model 1 stepping 1',
        ours='family 26 model 2 stepping 1',
    )


def test_results_folder_check_reads_the_suites_machine_records(tmp_path):
    # Each suite's own record reads back as its processor (the propagation
    # suite's README table here; train_step's line in the test above); a
    # GPU is told by its full name, which the folder name shortens.
    from benchmarks.common import (
        check_results_folder,
        processor,
        recorded_machines,
    )
    from benchmarks.propagation.report import machine_table

    def machine(**changes):
        return {
            'cpu': 'AMD EPYC',
            'cpu_id': 'family 25 model 1 stepping 1',
            'cpu_capability': 'AVX2',
            'cores': '2',
            'gpu': 'none',
            'device': 'cpu',
            **changes,
        }

    for record in (
        machine(),
        machine(cpu_id=''),
        machine(gpu='NVIDIA H100 80GB HBM3', device='cuda'),
    ):
        (tmp_path / 'README.md').write_text(
            f'# x\n\n## Machine\n\n{machine_table(record)}\n\n## Plots\n'
        )
        assert recorded_machines(str(tmp_path)) == [
            (str(tmp_path / 'README.md'), record)
        ]
        check_results_folder(str(tmp_path), record, 'x')
    assert processor(record) == 'NVIDIA H100 80GB HBM3'
    with pytest.raises(
        ValueError,
        match=r'recorded: NVIDIA H100 80GB HBM3; '
        r'this one: NVIDIA H100 PCIe\)',
    ):
        check_results_folder(
            str(tmp_path), machine(gpu='NVIDIA H100 PCIe'), 'cuda-h100'
        )
    (tmp_path / 'README.md').write_text('# No machine record\n')
    check_results_folder(str(tmp_path), machine(cpu='Other'), 'x')


def test_propagation_named_random_graphs_and_defaults_everywhere(
    tmp_path, monkeypatch
):
    # The GPU check's grid: chosen (N, degree) pairs, the defaults measured
    # beside the paper's configuration, large graphs drawn once by the
    # driver (here: every random graph) and read by the workers.
    monkeypatch.setattr(grid, 'SAVED_GRAPH_EDGES', 1)
    saved = []
    save = torch.save

    def recording_save(obj, path, *args, **kwargs):
        saved.append(Path(path).name)
        return save(obj, path, *args, **kwargs)

    monkeypatch.setattr(torch, 'save', recording_save)
    main(
        [
            'propagation',
            '--out',
            str(tmp_path),
            '--random-graphs',
            '60:4',
            '30:complete',
            '--features',
            '16',
            '--methods',
            'apnet_default',
            'agnn',
            '--defaults-on-all-graphs',
            '--no-wordnet',
            '--no-cora',
            '--no-refine',
            '--min-runs',
            '1',
            '--min-time',
            '0',
            '--quiet-wait',
            '0',
        ]
    )
    _, rows = read_rows(tmp_path / 'propagation.csv')
    # Smallest graph first; the complete graph is enumerated, not saved.
    assert [
        (row['method'], row['N'], row['graph'])
        for row in rows
        if row['pass'] == 'forward'
    ] == [
        ('apnet_default', '30', 'complete'),
        ('agnn', '30', 'complete'),
        ('apnet_default', '60', 'random'),
        ('agnn', '60', 'random'),
    ]
    assert all(row['status'] == 'ok' for row in rows), rows
    assert saved == ['random-60-240.pt']
    assert not list(
        Path(tempfile.gettempdir()).glob('apnet-graphs-*/random-60-240.pt')
    )
    summary = (tmp_path / 'README.md').read_text()
    assert '| 4 | APNetConv (defaults) |' in summary


def test_runner_reads_a_saved_graph_and_stops_at_its_budget(monkeypatch):
    monkeypatch.setattr(grid, 'SAVED_GRAPH_EDGES', 100)
    graph = grid.random_graph_spec(50, 4)
    assert grid.is_saved(graph) and not grid.is_saved(
        grid.random_graph_spec(50, 'complete')
    )
    settings = grid.RunSettings(budget=1e-9)
    run = runner.Runner(settings, log=lambda text: None)
    path = run.graph_file(graph)
    assert run.graph_file(graph) == path  # Drawn once.
    assert torch.equal(
        torch.load(path), grid.build_edge_index(graph, settings.seed)
    )
    rows = run.run('agnn', graph, 16)  # Past its budget: nothing starts.
    assert [row['status'] for row in rows] == ['skipped', 'skipped']
    assert rows[0]['note'] == "budget: the run's --budget of 1e-09 s was spent"
    run.close()
    assert not os.path.exists(path)


def test_floor_is_the_time_of_the_unavoidable_bytes():
    from benchmarks.propagation.cost_model import floor_bytes

    graph = grid.GraphSpec('random', 10, 40)
    # Forward: x read, out written (2 * 4 * N * F); the graph once (8 bytes
    # per edge, self-loops included). Backward adds 3 * 4 * N * F and the
    # graph again.
    assert floor_bytes(graph, 16, 'forward') == 8 * 10 * 16 + 8 * 50
    assert floor_bytes(graph, 16, 'forward+backward') == 20 * 10 * 16 + 16 * 50
    run = runner.Runner(
        grid.RunSettings(), log=lambda text: None, bandwidth=1e9
    )
    row = run.row(
        'agnn', graph, 16, 'forward', 'grid', status='ok', median_ms=0.01
    )
    assert row['floor_ms'] == pytest.approx(1e3 * (1280 + 400) / 1e9)
    assert (
        run.row('agnn', graph, 16, 'forward', 'grid', status='failed').get(
            'floor_ms'
        )
        is None
    )


def test_gather_floor_adds_each_edges_source_rows_once_a_pass():
    from benchmarks.propagation.cost_model import (
        floor_bytes,
        gather_floor_bytes,
    )

    graph = grid.GraphSpec('random', 10, 40)  # 50 entries with self-loops
    # Forward: x_j (16) and h_j (256) of every entry, float32.
    assert gather_floor_bytes(graph, 16, 'forward', 256) == floor_bytes(
        graph, 16, 'forward'
    ) + 4 * 50 * (16 + 256)
    assert (
        gather_floor_bytes(graph, 16, 'forward+backward', 0)
        == floor_bytes(graph, 16, 'forward+backward') + 2 * 4 * 50 * 16
    )
    run = runner.Runner(
        grid.RunSettings(), log=lambda text: None, bandwidth=1e9
    )
    row = run.row(
        'apnet_sparse',
        graph,
        16,
        'forward',
        'grid',
        status='ok',
        median_ms=0.01,
    )
    assert row['gather_floor_ms'] == pytest.approx(
        1e3 * gather_floor_bytes(graph, 16, 'forward', 256) / 1e9
    )


def test_triton_method_runs_on_cuda_only():
    triton = {'apnet_triton', 'apnet_triton_cached'}
    assert triton <= set(grid.default_methods('cuda'))
    assert triton <= set(grid.default_methods('cuda:1'))
    assert set(grid.default_methods('cpu')) == set(grid.METHODS) - triton
    layer = grid.METHODS['apnet_triton'].build(8)
    assert layer.layer.kernel == 'triton'
    assert grid.METHODS['apnet_sparse'].build(8).layer.kernel == 'sparse'
    # The cached methods: the same layers, called with the edge_index as
    # it is (APNetConv keeps its pattern), not with a copy.
    for method in grid.CACHED:
        layer = grid.METHODS[method].build(8)
        assert not isinstance(layer, grid.NewGraphEachCall)
    assert grid.METHODS['apnet_triton_cached'].build(8).kernel == 'triton'


def test_propagation_dtypes_and_the_cached_pattern(tmp_path):
    # Each configuration in each dtype named, the layer's parameters in it
    # too; the pattern cached beside the rebuild; the tables above are
    # float32's and a section compares the dtypes.
    main(
        [
            'propagation',
            '--quick',
            '--out',
            str(tmp_path),
            '--nodes',
            '40',
            '--degrees',
            '4',
            '--features',
            '16',
            '--methods',
            'apnet_sparse',
            'apnet_sparse_cached',
            '--dtypes',
            'float32',
            'bfloat16',
            '--min-runs',
            '1',
            '--min-time',
            '0',
        ]
    )
    columns, rows = read_rows(tmp_path / 'propagation.csv')
    assert 'dtype' in columns
    assert [(row['method'], row['dtype']) for row in rows[::2]] == [
        ('apnet_sparse', 'float32'),
        ('apnet_sparse_cached', 'float32'),
        ('apnet_sparse', 'bfloat16'),
        ('apnet_sparse_cached', 'bfloat16'),
    ]
    assert all(row['status'] == 'ok' for row in rows), rows
    summary = (tmp_path / 'README.md').read_text()
    assert '## Half precision' in summary
    half = summary.split('## Half precision')[1]
    assert '| method | graph | N | F | pass | float32 | bfloat16 |' in half
    assert '| APNetConv (sparse, pattern cached) | random | 40 | 16 |' in half
    # The float32 tables: one row per method and degree, not per dtype.
    grid_table = summary.split('## Random graphs, F = 16: median time')[1]
    assert grid_table.split('##')[0].count('APNetConv (sparse, fused)') == 1


def test_floors_count_the_dtypes_element_size():
    from benchmarks.propagation.cost_model import (
        element_size,
        floor_bytes,
        gather_floor_bytes,
    )

    graph = grid.GraphSpec('random', 10, 40)  # 50 entries with self-loops
    assert [element_size(d) for d in grid.DTYPES] == [4, 2, 2]
    # The features in 2 bytes; the graph's indices and weights still 8.
    assert floor_bytes(graph, 16, 'forward', 2) == 2 * 2 * 10 * 16 + 8 * 50
    assert gather_floor_bytes(
        graph, 16, 'forward+backward', 256, 2
    ) == floor_bytes(graph, 16, 'forward+backward', 2) + 2 * 2 * 50 * (
        16 + 256
    )
    run = runner.Runner(
        grid.RunSettings(), log=lambda text: None, bandwidth=1e9
    )
    row = run.row(
        'agnn', graph, 16, 'forward', 'grid', 'bfloat16', status='ok'
    )
    assert row['dtype'] == 'bfloat16'
    assert row['floor_ms'] == pytest.approx(
        1e3 * floor_bytes(graph, 16, 'forward', 2) / 1e9
    )


def test_targets_plan_and_verdicts():
    from benchmarks.propagation import targets

    # Most wanted first: 1M x 10 in float32 (kernel, layer), WordNet, the
    # half-precision dtypes, then the rebuilt pattern and CUDA graphs.
    steps = targets.plan(quick=False, wordnet=True, cuda=True)
    first = [(m.graph, m.F, m.dtype, m.variant, m.pass_) for m in steps[:2]]
    assert first == [
        ('random', 64, 'float32', 'kernel', 'forward+backward'),
        ('random', 64, 'float32', 'kernel', 'forward'),
    ]
    order = [m.graph + ':' + m.dtype for m in steps]
    assert order.index('wordnet:float32') < order.index('random:bfloat16')
    assert order.index('random:bfloat16') < order.index('random:float16')
    wordnet = {m.variant for m in steps if m.graph == 'wordnet'}
    assert {'layer', 'layer_rebuild', 'agnn', 'layer_graph'} <= wordnet
    assert not any(
        m.variant in targets.GRAPH_VARIANTS
        for m in targets.plan(quick=True, wordnet=False, cuda=False)
    )

    def row(graph, F, dtype, variant, median, fraction=None):
        return {
            'graph': graph,
            'N': 1_000_000 if graph == 'random' else 82_115,
            'E': 10_000_000 if graph == 'random' else 168_854,
            'F': F,
            'dtype': dtype,
            'variant': variant,
            'pass': 'forward+backward',
            'status': 'ok',
            'median_ms': median,
            'floor_fraction': fraction,
        }

    rows = [
        row('random', 64, 'float32', 'layer', 12.0, 0.55),
        row('random', 256, 'float32', 'layer', 30.0, 0.40),
        row('random', 256, 'bfloat16', 'layer', 17.0, 0.35),
        row('wordnet', 64, 'float32', 'layer', 0.9),
        row('wordnet', 64, 'float32', 'agnn', 2.3),
    ]
    lines = targets.verdicts(rows)
    assert lines[0].startswith(
        '- 1,000,000 nodes x degree 10, F = 64, float32, APNetConv '
        '(Triton), pattern cached, forward+backward: **12 ms**, floor / '
        'median **0.55** (target >= 0.5: meets the target)'
    )
    assert 'F = 256' in lines[2] and 'MISSES the target' in lines[2]
    assert 'Triton kernel alone' in lines[1] and 'not measured' in lines[1]
    wordnet_line = next(line for line in lines if 'WordNet' in line)
    assert '**0.90 ms**' in wordnet_line
    assert wordnet_line.endswith('below AGNNConv: meets the target)')
    half = next(line for line in lines if line.startswith('- bfloat16'))
    assert '**1.76x**' in half and 'meets the target' in half


def test_summary_of_a_gpu_run_shows_floor_and_why_wordnet_failed():
    from benchmarks.propagation import report

    wordnet = dict(graph='wordnet', N=82115, E=168854, F=256, other_cores=0.0)
    rows = [
        dict(
            wordnet,
            method='agnn',
            status='ok',
            median_ms=5.0,
            min_ms=4.0,
            peak_mb=100.0,
            floor_ms=0.5,
            **{'pass': 'forward+backward'},
        ),
        dict(
            wordnet,
            method='apnet_sparse',
            status='failed',
            note='torch.AcceleratorError: CUDA error: initialization error',
            **{'pass': 'forward+backward'},
        ),
    ]
    assert report.headline(rows, [], {'wordnet': ''}) == [
        '- WordNet noun graph not measured (failed: torch.AcceleratorError: '
        'CUDA error: initialization error)'
    ]
    table = report._real_graph_table(rows, 'wordnet')
    assert 'floor / median (forward+backward)' in table.splitlines()[0]
    assert '| AGNNConv (PyG) | 256 |  | 5.0 ms |  | 100 MB | 0.100 |' in table


@pytest.mark.parametrize(
    'flags, message',
    [
        (
            ['--random-graphs', '100:0.01'],
            '--random-graphs 100:0.01 gives no edge: pass a degree of at '
            'least',
        ),
        (
            ['--random-graphs', '100:99'],
            '--random-graphs 100:99 is too dense: a random graph on 100 nodes '
            'has a degree below N - 1 = 99; use 100:complete',
        ),
        (
            ['--random-graphs', '1:4'],
            '--random-graphs 1:4: the node count must be an integer >= 2',
        ),
        (
            ['--random-graphs', '100:-4'],
            '--random-graphs 100:-4: the degree must be a positive number or '
            "'complete'",
        ),
        (
            ['--random-graphs', '100:4', '100:4.0'],
            '--random-graphs names 100:4 twice',
        ),
        (
            ['--random-graphs', '100:4', '--nodes', '100'],
            '--random-graphs names the random graphs: drop --nodes',
        ),
        (
            ['--random-graphs', '100:4', '--degrees', '4'],
            '--random-graphs names the random graphs: drop --degrees',
        ),
        (
            ['--random-graphs', '100:4', '--budget', '0'],
            '--budget must be a positive number of seconds (got 0)',
        ),
    ],
)
def test_bad_random_graphs_and_budget_end_with_one_line(
    flags, message, tmp_path, capsys
):
    from apnet_pyg.scripting import run_script

    out = tmp_path / 'out'
    argv = [
        'propagation',
        '--quick',
        '--methods',
        'agnn',
        '--features',
        '16',
        *flags,
        '--out',
        str(out),
    ]
    assert run_script(main, argv) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [err.strip()] and err.startswith(
        'error: ' + message
    ), err
    assert not out.exists()


def test_random_graphs_must_read_as_nodes_and_degree(capsys):
    with pytest.raises(SystemExit):
        main(['propagation', '--random-graphs', '100-4'])
    assert (
        'expected NODES:DEGREE, e.g. 100000:16 or 100:complete (got '
        "'100-4')" in capsys.readouterr().err
    )
