r"""The experiment scripts run end to end on tiny generated data."""

import json

import pytest
import torch

from apnet_pyg.data.xlsa17 import load_xlsa17
from tests.helpers.scripts import load_script, train_tiny_run


def test_ablation_example(tiny_root, tmp_path, capsys):
    ablation = load_script('ablation')
    out = tmp_path / 'table.md'
    ablation.main(
        [
            '--dataset',
            'TINY',
            '--root',
            str(tiny_root),
            '--out-dir',
            str(tmp_path / 'runs'),
            '--out',
            str(out),
            '--epochs',
            '1',
            '--iterations-per-epoch',
            '2',
            '--n-way',
            '4',
            '--graphs',
            'none',
            'learned',
        ]
    )
    table = out.read_text()
    assert 'SIMULATED' in table
    lines = [line for line in table.splitlines() if line.startswith('| ')]
    # Header, 2 trainings x 2 graphs, and the ESZSL and SAE rows:
    assert len(lines) == 1 + 4 + 2
    assert lines[-2].startswith('| ESZSL (closed form; gamma=')
    assert lines[-1].startswith('| SAE (closed form; lam=')
    assert all(line.count('|') == 13 for line in lines)  # 12 columns
    # 1 epoch chosen on the validation task, accuracy in percent:
    for line in lines[1:-2]:
        cells = [cell.strip() for cell in line.split('|')]
        assert cells[1] == 'paper'
        assert cells[4].endswith('(1)') and cells[5].endswith('(1)')
    # The baselines' raw and calibrated GZSL, with the constant chosen on
    # the validation task:
    for line in lines[-2:]:
        assert '; c = ' in line.split('|')[1]
        values = [float(cell) for cell in line.split('|')[6:13]]
        assert all(0 <= value <= 100 for value in values)


def test_ablation_reuses_a_finished_row_only_on_the_same_data(
    tiny_root, tiny_class_side, tmp_path, capsys
):
    # Real features (no SIMULATED.json) carry no simulation record: two
    # folders of one dataset differ only in their features.
    import shutil

    from apnet_pyg.data import simulate_xlsa17
    from apnet_pyg.data.simulator import SIMULATED_SIDECAR

    roots = [tmp_path / 'a', tmp_path / 'b']
    shutil.copytree(tiny_root, roots[0])
    simulate_xlsa17(
        'TINY',
        roots[1],
        data_root=tiny_class_side,
        seed=1,
        isotropic_noise=2.0,
        lowrank_noise=1.0,
    )
    for root in roots:
        (root / 'TINY' / SIMULATED_SIDECAR).unlink()
    ablation = load_script('ablation')

    def table(root):
        ablation.main(
            [
                '--dataset',
                'TINY',
                '--root',
                str(root),
                '--out-dir',
                str(tmp_path / 'runs'),
                '--epochs',
                '1',
                '--iterations-per-epoch',
                '2',
                '--n-way',
                '4',
                '--graphs',
                'none',
                '--trainings',
                'episodic',
                '--no-baselines',
            ]
        )
        out = capsys.readouterr().out
        return 'reusing' in out, out[out.index('### TINY') :]

    reused, first = table(roots[0])
    assert not reused
    assert table(roots[0]) == (True, first)
    reused, second = table(roots[1])
    assert not reused  # Retrained on the other features.
    assert table(roots[1]) == (True, second)

    metrics = tmp_path / 'runs' / 'paper-episodic-none' / 'metrics.json'
    metrics.write_text('[1, 2]')
    with pytest.raises(
        ValueError,
        match=f"'{metrics}' is not the metrics.json of an apnet-zsl run",
    ):
        table(roots[1])


def test_calibration_example(tiny_root, tmp_path):
    calibrate = load_script('calibrate_simulator')
    out = tmp_path / 'calibration.md'
    argv = [
        '--datasets',
        'TINY',
        '--data-root',
        str(tiny_root),
        '--seeds',
        '0',
        '1',
        '--set',
        'shared_weight=0.5',
        '--out',
        str(out),
    ]
    results = calibrate.main(argv)
    text = out.read_text()
    assert 'SIMULATED' in text
    assert 'calibrate_simulator.py ' + ' '.join(argv) in text
    rows = [line for line in text.splitlines() if line.startswith('| TINY')]
    assert [row.split('|')[2].strip() for row in rows] == ['ESZSL', 'SAE']
    # No published figure for TINY: simulated mean and spread only.
    for row in rows:
        cells = row.split('|')[3:7]
        assert all('±' in cell and '(' not in cell for cell in cells)
    # The per-seed metrics behind the table, with the override applied:
    assert [len(runs) for runs in results['TINY'].values()] == [2, 2]
    assert '"shared_weight": 0.5' in text
    mean = sum(run['zsl_acc'] for run in results['TINY']['SAE']) / 2
    assert rows[1].split('|')[3].strip().startswith(f'{mean:.1f} ±')
    with pytest.raises(SystemExit):
        calibrate.main(['--datasets', 'TINY', '--set', 'shared_weight'])


def test_calibration_search_example(tiny_root, tmp_path, monkeypatch):
    calibrate = load_script('calibrate_simulator')
    common = [
        '--datasets',
        'TINY',
        '--data-root',
        str(tiny_root),
        '--seeds',
        '0',
    ]
    log = tmp_path / 'search.jsonl'
    with pytest.raises(SystemExit, match='no published figures for TINY'):
        calibrate.main(common + ['--search', '2', '--search-log', str(log)])
    real = {
        'ESZSL': dict(
            zsl_acc=50.0, gzsl_unseen=10.0, gzsl_seen=70.0, gzsl_h=None
        ),
        'SAE': dict(
            zsl_acc=40.0, gzsl_unseen=5.0, gzsl_seen=80.0, gzsl_h=None
        ),
    }
    monkeypatch.setattr(
        calibrate, 'published', lambda dataset, method: real[method]
    )
    calibrate.main(
        common
        + ['--search', '2', '--search-seed', '3', '--search-log', str(log)]
    )
    settings = [json.loads(line) for line in log.read_text().splitlines()]
    assert [s['index'] for s in settings] == [0, 1]
    for setting in settings:
        assert set(setting['opts']) == {
            key for key, *_ in calibrate.SEARCH_SPACE
        }
        gaps = [
            abs(setting['res'][name][key] - value)
            for name, figures in real.items()
            for key, value in figures.items()
            if value is not None
        ]
        assert setting['within'] == sum(gap <= 5 for gap in gaps)
        assert setting['dist'] == pytest.approx(sum(gaps))
    # The same stream gives the same settings and results:
    again = tmp_path / 'again.jsonl'
    calibrate.main(
        common
        + ['--search', '1', '--search-seed', '3', '--search-log', str(again)]
    )
    assert json.loads(again.read_text()) == settings[0]

    out = tmp_path / 'search.md'
    text = calibrate.main(
        common + ['--summarize', str(log), '--out', str(out)]
    )
    assert out.read_text() == text + '\n' and 'SIMULATED' in text
    assert f'--search 2 --search-seed 3 --search-log {log}\n' in text
    assert f'--summarize {log}\n' in text
    rows = [
        line
        for line in text.splitlines()
        if line.startswith(('| defaults', '| stream 3 #'))
    ]
    assert len(rows) == 3 and rows[0].startswith('| defaults |')
    # One row per published figure (H has none here):
    figures = [
        line
        for line in text.splitlines()
        if line.startswith(('| ESZSL | ', '| SAE | '))
    ]
    assert len(figures) == 6 and not any('| H |' in line for line in figures)
    # Rechecked on the search's own seed, the best setting gives its logged
    # figures again:
    text = calibrate.main(
        common
        + [
            '--summarize',
            str(log),
            '--recheck-seeds',
            '0',
            '--recheck-top',
            '1',
        ]
    )
    assert '--recheck-seeds 0 --recheck-top 1\n' in text
    best = [
        line for line in text.splitlines() if line.startswith('| stream 3 #')
    ][0]
    recheck = text.split('Rechecked on data seeds 0')[1].splitlines()
    recheck = [line for line in recheck if line.startswith('| stream 3 #')]
    assert len(recheck) == 1 and best.startswith(recheck[0])
    with pytest.raises(SystemExit, match='--seeds'):
        calibrate.main(
            [
                '--datasets',
                'TINY',
                '--data-root',
                str(tiny_root),
                '--seeds',
                '1',
                '--summarize',
                str(log),
            ]
        )
    with pytest.raises(SystemExit, match='exists'):
        calibrate.main(common + ['--search', '1', '--search-log', str(log)])
    with pytest.raises(
        SystemExit, match="--set 'isotropic_noise=abc': 'abc' is not a number"
    ):
        calibrate.main(common + ['--set', 'isotropic_noise=abc'])
    with pytest.raises(SystemExit, match='not both'):
        calibrate.main(
            common
            + [
                '--search',
                '1',
                '--search-log',
                str(log),
                '--summarize',
                str(log),
            ]
        )
    with pytest.raises(SystemExit, match='--recheck-top must be at least 1'):
        calibrate.main(
            common + ['--summarize', str(log), '--recheck-top', '0']
        )
    with pytest.raises(SystemExit, match='--recheck-seeds goes with'):
        calibrate.main(
            common
            + [
                '--search',
                '1',
                '--search-log',
                str(tmp_path / 'new.jsonl'),
                '--recheck-seeds',
                '0',
            ]
        )
    with pytest.raises(SystemExit, match='missing.jsonl: cannot read it'):
        calibrate.main(
            common + ['--summarize', str(tmp_path / 'missing.jsonl')]
        )
    broken = tmp_path / 'broken.jsonl'
    broken.write_text(log.read_text() + '{not json\n')
    with pytest.raises(SystemExit, match='broken.jsonl: line 3 is not JSON'):
        calibrate.main(common + ['--summarize', str(broken)])


def test_eszsl_per_class_example(tiny_root, tmp_path):
    example = load_script('eszsl_per_class')
    out = tmp_path / 'per-class.md'
    argv = [
        '--dataset',
        'TINY',
        '--data-root',
        str(tiny_root),
        '--seeds',
        '0',
        '1',
        '--out',
        str(out),
    ]
    runs, lams = example.main(argv)
    text = out.read_text()
    assert 'SIMULATED' in text
    assert 'eszsl_per_class.py ' + ' '.join(argv) in text
    rows = [
        line
        for line in text.splitlines()
        if line.startswith('| ') and not line.startswith('| unseen')
    ]
    assert set(runs) == set(lams) == {'binary', 'signed'}
    assert len(rows) == len(runs['binary'][0])
    assert all(len(runs[t]) == len(lams[t]) == 2 for t in runs)
    # Each U column is the mean over seeds of that target convention's
    # per-seed accuracy:
    first = min(runs['binary'][0])
    for targets, column in (('binary', 2), ('signed', 5)):
        mean = 50 * (
            runs[targets][0][first]['gzsl'] + runs[targets][1][first]['gzsl']
        )
        assert rows[0].split('|')[column].strip() == f'{mean:.1f}'


def test_eszsl_per_class_coefficient_sums(tiny_root):
    example = load_script('eszsl_per_class')
    data = load_xlsa17(tiny_root, 'TINY', load_features=False)
    seen, lam = data.seen_classes, 0.3
    s = data.attributes[seen].double().t()
    alpha = s.t() @ torch.linalg.solve(
        s @ s.t() + lam * torch.eye(s.size(0), dtype=s.dtype),
        data.attributes.double().t(),
    )
    torch.testing.assert_close(
        example.coefficient_sums(data.attributes, seen, lam), alpha.sum(0)
    )


def test_trace_training_example_replays_the_run(tiny_root, tmp_path, capsys):

    run_dir = tmp_path / 'run'
    train_tiny_run(tiny_root, run_dir, epochs=2, episodes=3)
    history = json.loads((run_dir / 'metrics.json').read_text())['history']
    trace = load_script('trace_training')
    out = tmp_path / 'trace.csv'
    records = trace.main(
        ['--run', str(run_dir), '--episodes', '6', '--out', str(out)]
    )
    assert [r['epoch'] for r in records] == [1, 1, 1, 2, 2, 2]
    for epoch in (1, 2):
        losses = [r['loss'] for r in records if r['epoch'] == epoch]
        assert sum(losses) / 3 == pytest.approx(
            history[epoch - 1]['loss'], rel=1e-6
        )
    assert out.read_text().splitlines()[0] == ','.join(trace.COLUMNS)
    assert all(r['step_norm'] > 0 and r['grad_norm'] > 0 for r in records)
    assert (
        'TINY: SIMULATED features (not a benchmark result)'
        in capsys.readouterr().out
    )

    changed = trace.main(
        [
            '--run',
            str(run_dir),
            '--episodes',
            '3',
            '--set',
            'weight_decay=0',
            'lr=1e-3',
            '--out',
            str(out),
        ]
    )
    assert changed[0]['loss'] == pytest.approx(records[0]['loss'])
    assert changed[1]['loss'] != pytest.approx(records[1]['loss'])
    # Another kind of attributes: the same images, other class inputs.
    # (The first loss is chance, log 4, whatever the inputs: the head's
    # output layer starts at zero.)
    other = trace.main(
        [
            '--run',
            str(run_dir),
            '--episodes',
            '2',
            '--set',
            'attributes=att',
            '--out',
            str(out),
        ]
    )
    assert other[1]['loss'] != pytest.approx(records[1]['loss'])
    probed = trace.main(
        [
            '--run',
            str(run_dir),
            '--episodes',
            '2',
            '--adam-eps',
            '10',
            '--out',
            str(out),
        ]
    )
    # An epsilon far above the gradients' scale shrinks every step.
    assert probed[0]['step_norm'] < records[0]['step_norm'] / 10
    with pytest.raises(ValueError, match='--set expects KEY=VALUE'):
        trace.main(
            [
                '--run',
                str(run_dir),
                '--episodes',
                '1',
                '--set',
                'lr',
                '--out',
                str(out),
            ]
        )
    with pytest.raises(FileNotFoundError, match='No metrics.json'):
        trace.main(
            ['--run', str(tmp_path), '--episodes', '1', '--out', str(out)]
        )
    with pytest.raises(
        ValueError, match="--set 'lr=fast': 'fast' is not a number"
    ):
        trace.main(
            [
                '--run',
                str(run_dir),
                '--episodes',
                '1',
                '--set',
                'lr=fast',
                '--out',
                str(out),
            ]
        )


def test_pair_margins_example(tiny_root, tmp_path, capsys):

    pair_margins = load_script('pair_margins')
    row = pair_margins.summary(
        {1: torch.tensor([1.0, 3.0]), 2: torch.tensor([-1.0, -3.0])}, 1, 2
    )
    assert row['mean_first'] == 2.0 and row['mean_second'] == -2.0
    assert row['first_wins_first'] == 1.0 and row['first_wins_second'] == 0
    assert row['d_prime'] == pytest.approx(4 / 2**0.5)

    run_dir = tmp_path / 'run'
    train_tiny_run(tiny_root, run_dir, epochs=1, episodes=2)
    data = load_xlsa17(tiny_root, 'TINY')
    a, b = (data.class_names[c] for c in data.unseen_classes[:2].tolist())
    results = pair_margins.main(['--run', str(run_dir), '--pairs', f'{a}:{b}'])
    assert [r['model'] for r in results] == ['APNet', 'ESZSL']
    assert all(r['pair'] == (a, b) for r in results)
    out = capsys.readouterr().out
    assert f'| {a} : {b} | ESZSL |' in out
    assert 'TINY: SIMULATED features (not a benchmark result)' in out
    # The APNet margin, scored directly with the ZSL row's model:
    from apnet_pyg.zsl import apnet_score_fn, load_model

    images = data.test_unseen_loc[
        data.labels[data.test_unseen_loc] == data.unseen_classes[0]
    ]
    read = load_xlsa17(tiny_root, 'TINY', attributes='percent')  # the run's
    scores = apnet_score_fn(load_model(run_dir, 'zsl'), read)(
        images, data.unseen_classes
    )
    assert results[0]['mean_first'] == pytest.approx(
        float((scores[:, 0] - scores[:, 1]).double().mean())
    )
    with pytest.raises(SystemExit, match='two unseen classes'):
        pair_margins.main(
            [
                '--run',
                str(run_dir),
                '--pairs',
                f'{a}:{data.class_names[int(data.seen_classes[0])]}',
            ]
        )
