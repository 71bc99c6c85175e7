import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apnet_pyg.data import load_xlsa17
from apnet_pyg.zsl.cli import main
from apnet_pyg.zsl.reporting.tables import format_table

SMALL = [
    '--epochs',
    '2',
    '--iterations-per-epoch',
    '3',
    '--n-way',
    '4',
    '--no-progress',
]


def test_cli_train_evaluate_plot(tiny_root, tmp_path, capsys):
    run_dir = tmp_path / 'run'
    assert (
        main(
            [
                'train',
                '--dataset',
                'TINY',
                '--root',
                str(tiny_root),
                '--out',
                str(run_dir),
                '--graph',
                'wordnet',
                '--recipe',
                'fast',
            ]
            + SMALL
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert 'SIMULATED features' in printed and '| ZSL acc |' in printed
    assert 'calibrated stacking' in printed
    metrics = json.loads((run_dir / 'metrics.json').read_text())
    assert metrics['config']['graph'] == 'wordnet'
    assert metrics['config']['epochs'] == 2
    assert metrics['config']['score'] == 'sigmoid'  # the paper variant
    assert metrics['simulated'] is True
    for model_file in metrics['models'].values():
        assert (run_dir / model_file).exists()

    assert main(['evaluate', '--run', str(run_dir)]) == 0
    printed = capsys.readouterr().out
    assert f'| {metrics["zsl_acc"]:.1f} |' in printed
    assert f'| {metrics["gzsl_cal_h"]:.1f} |' in printed

    assert main(['evaluate', '--run', str(run_dir), '--per-class']) == 0
    printed = capsys.readouterr().out
    table = printed.split('per unseen class')[1]
    rows = [
        line.split(' | ')
        for line in table.splitlines()
        if line.startswith('| ') and not line.startswith('| unseen')
    ]
    data = load_xlsa17(tiny_root, 'TINY')
    assert [row[0][2:] for row in rows] == [
        data.class_names[c] for c in data.unseen_classes.tolist()
    ]
    accuracies = [float(row[2]) for row in rows]
    # The per-class terms (printed to 0.1) average to the ZSL row.
    assert sum(accuracies) / len(accuracies) == pytest.approx(
        metrics['zsl_acc'], abs=0.05
    )

    assert (
        main(
            [
                'plot',
                '--run',
                str(run_dir),
                '--out',
                str(tmp_path / 'tsne.png'),
            ]
        )
        == 0
    )
    assert (tmp_path / 'tsne.png').read_bytes()[:4] == b'\x89PNG'


def test_cli_variants_and_flags(tiny_root, tmp_path):
    run_dir = tmp_path / 'run'
    assert (
        main(
            [
                'train',
                '--dataset',
                'TINY',
                '--root',
                str(tiny_root),
                '--out',
                str(run_dir),
                '--variant',
                'authors',
                '--logit-scale',
                '0.5',
                '--lr-decay-epoch',
                'none',
                '--model-selection',
                'none',
            ]
            + SMALL
        )
        == 0
    )
    config = json.loads((run_dir / 'metrics.json').read_text())['config']
    # The variant, then the flags on top of it:
    assert (config['score'], config['attributes']) == ('linear', 'percent')
    assert config['logit_scale'] == 0.5
    assert config['lr_decay_epoch'] is None


@pytest.mark.parametrize('knn_classes', ['task', 'all'])
def test_cli_train_evaluate_plot_with_the_knn_graph(
    tiny_root, tmp_path, capsys, knn_classes
):
    # --graph knn through the image pipeline: trained, its models saved
    # with their class table, evaluated again from the run directory (the
    # same figures) and plotted.
    run_dir = tmp_path / 'run'
    assert (
        main(
            [
                'train',
                '--dataset',
                'TINY',
                '--root',
                str(tiny_root),
                '--out',
                str(run_dir),
                '--graph',
                'knn',
                '--knn-k',
                '3',
                '--knn-loop',
                '--knn-classes',
                knn_classes,
                '--learn-propagation-temperature',
                '--recipe',
                'fast',
            ]
            + SMALL
        )
        == 0
    )
    metrics = json.loads((run_dir / 'metrics.json').read_text())
    config = metrics['config']
    assert (config['graph'], config['knn_k'], config['knn_loop']) == (
        'knn',
        3,
        True,
    )
    assert config['knn_classes'] == knn_classes
    assert config['learn_propagation_temperature'] is True
    # Each class joined to its 3 nearest among all classes (GZSL's graph).
    num_classes = load_xlsa17(tiny_root, 'TINY').num_classes
    assert metrics['class_graph_edges'] == 3 * num_classes
    capsys.readouterr()
    assert main(['evaluate', '--run', str(run_dir)]) == 0
    printed = capsys.readouterr().out
    assert f'| {metrics["zsl_acc"]:.1f} |' in printed
    assert f'| {metrics["gzsl_h"]:.1f} |' in printed
    out = tmp_path / 'tsne.png'
    assert main(['plot', '--run', str(run_dir), '--out', str(out)]) == 0
    assert out.read_bytes()[:4] == b'\x89PNG'


def test_cli_simulate_and_pipeline(
    tmp_path, tiny_root, tiny_class_side, capsys
):
    # The pipeline reuses simulated data found in OUT/data:
    out = tmp_path / 'demo'
    (out / 'data').mkdir(parents=True)
    (out / 'data' / 'TINY').symlink_to(tiny_root / 'TINY')
    assert (
        main(
            [
                'pipeline',
                '--dataset',
                'TINY',
                '--out',
                str(out),
                '--data-root',
                str(tiny_class_side),
                '--model-selection',
                'none',
                '--isotropic-noise',
                '2.0',
                '--lowrank-noise',
                '1.0',
            ]
            + SMALL
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert 'reusing' in printed and 'SIMULATED' in printed
    # The pipeline also fits the closed-form baselines on the same data:
    assert '| ESZSL (gamma=' in printed and '| SAE (lam=' in printed
    metrics = json.loads((out / 'run' / 'metrics.json').read_text())
    assert set(metrics['baselines']) == {'ESZSL', 'SAE'}
    assert metrics['model_selection'].startswith('none')
    assert 'gzsl_cal_h' not in metrics  # no validation, no calibration
    # The fast recipe, with the command line's overrides:
    assert metrics['config']['iterations_per_epoch'] == 3
    assert metrics['config']['lr_decay_epoch'] is None

    # compare reads the run's baselines (no calibrated row without
    # validation) and writes what it prints:
    table = tmp_path / 'compare.md'
    assert (
        main(['compare', '--runs', str(out / 'run'), '--out', str(table)]) == 0
    )
    printed = capsys.readouterr().out
    assert printed.startswith(table.read_text())
    assert 'TINY, 1 run: SIMULATED features' in printed
    eszsl = metrics['baselines']['ESZSL']
    assert f'| ESZSL | {eszsl["zsl_acc"]:.1f} | ' in printed
    assert f'| {metrics["zsl_acc"] - eszsl["zsl_acc"]:+.1f} | ' in printed
    assert '| APNet, calibrated stacking |  |  |  |  |' in printed


def test_cli_pipeline_notices_another_class_side(
    tmp_path, tiny_root, tiny_class_side, capsys
):
    # The same simulator flags on another class side (other attributes):
    import scipy.io

    other = tmp_path / 'other'
    shutil.copytree(tiny_class_side, other)
    splits = other / 'TINY' / 'att_splits.mat'
    mat = scipy.io.loadmat(splits)
    scipy.io.savemat(
        splits,
        {
            'att': mat['att'][::-1].copy(),
            **{
                key: value
                for key, value in mat.items()
                if not key.startswith('__') and key != 'att'
            },
        },
    )
    out = tmp_path / 'demo'
    (out / 'data').mkdir(parents=True)
    (out / 'data' / 'TINY').symlink_to(tiny_root / 'TINY')
    flags = ['--isotropic-noise', '2.0', '--lowrank-noise', '1.0'] + SMALL
    assert (
        main(
            [
                'pipeline',
                '--dataset',
                'TINY',
                '--out',
                str(out),
                '--data-root',
                str(other),
            ]
            + flags
        )
        == 1
    )
    err = capsys.readouterr().err
    assert 'was simulated from another class side' in err
    assert 'att_splits.mat differs' in err


def test_cli_interrupted_while_fitting_baselines(
    tiny_root, tmp_path, capsys, monkeypatch
):
    # Training is over (metrics.json written): --resume would refuse a
    # finished run, so the message points to compare --baselines.
    import apnet_pyg.zsl.baselines.benchmark as baselines

    def interrupt(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(baselines, 'fit_baselines', interrupt)
    run_dir = tmp_path / 'run'
    assert (
        main(
            [
                'train',
                '--dataset',
                'TINY',
                '--root',
                str(tiny_root),
                '--out',
                str(run_dir),
                '--baselines',
            ]
            + SMALL
        )
        == 130
    )
    err = capsys.readouterr().err
    assert 'interrupted while fitting the baselines' in err
    assert f'apnet-zsl compare --runs {run_dir} --baselines' in err
    monkeypatch.undo()
    assert main(['compare', '--runs', str(run_dir), '--baselines']) == 0
    assert '| ESZSL |' in capsys.readouterr().out


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert (
        main(
            [
                'train',
                '--dataset',
                'NOPE',
                '--root',
                str(tmp_path),
                '--out',
                str(tmp_path / 'x'),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("error: No dataset folder 'NOPE'")
    assert err.count('\n') == 1 and 'Traceback' not in err
    assert main(['evaluate', '--run', str(tmp_path)]) == 1
    assert 'No metrics.json' in capsys.readouterr().err
    # --debug (before or after the command) shows the exception instead:
    for argv in (
        ['--debug', 'evaluate', '--run', str(tmp_path)],
        ['evaluate', '--run', str(tmp_path), '--debug'],
    ):
        with pytest.raises(FileNotFoundError, match='No metrics.json'):
            main(argv)
    with pytest.raises(SystemExit):
        main(
            [
                'train',
                '--dataset',
                'TINY',
                '--root',
                str(tmp_path),
                '--out',
                str(tmp_path),
                '--graph',
                'gcn',
            ]
        )
    assert "invalid choice: 'gcn'" in capsys.readouterr().err


def test_cli_guards_run_directories(tiny_root, tmp_path, capsys):
    run_dir = tmp_path / 'run'
    args = [
        'train',
        '--dataset',
        'TINY',
        '--root',
        str(tiny_root),
        '--out',
        str(run_dir),
    ] + SMALL
    assert main(args + ['--resume']) == 1  # nothing to resume
    assert 'nothing to resume' in capsys.readouterr().err
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 1  # a finished run is not written over
    assert 'holds a finished run' in capsys.readouterr().err
    # An --overwrite that is refused (here: no such data root) keeps the
    # earlier run whole:
    models = sorted(p.name for p in run_dir.glob('model-epoch*.pt'))
    refused = [
        'train',
        '--dataset',
        'TINY',
        '--root',
        str(tmp_path / 'no'),
        '--out',
        str(run_dir),
        '--overwrite',
    ] + SMALL
    assert main(refused) == 1
    assert 'No dataset folder' in capsys.readouterr().err
    assert (run_dir / 'metrics.json').is_file()
    assert sorted(p.name for p in run_dir.glob('model-epoch*.pt')) == models
    stale = run_dir / 'model-epoch99.pt'
    stale.write_bytes(b'an earlier run')
    assert main(args + ['--overwrite']) == 0
    capsys.readouterr()
    assert not stale.exists()  # no model of the earlier run is left
    metrics = json.loads((run_dir / 'metrics.json').read_text())
    assert sorted(p.name for p in run_dir.glob('model-epoch*.pt')) == sorted(
        set(metrics['models'].values())
    )
    a_file = tmp_path / 'file'
    a_file.write_text('x')
    assert main(args[: -len(SMALL) - 1] + [str(a_file)] + SMALL) == 1
    assert 'is a file' in capsys.readouterr().err
    # Bad values are refused before any data is read:
    assert main(args + ['--overwrite', '--n-way', '7']) == 1
    assert 'n_way=7 exceeds the 6 seen classes' in capsys.readouterr().err


def test_cli_pipeline_notices_changed_simulator_flags(
    tmp_path, tiny_root, capsys
):
    out = tmp_path / 'demo'
    (out / 'data').mkdir(parents=True)
    (out / 'data' / 'TINY').symlink_to(tiny_root / 'TINY')
    # The fixture was simulated with isotropic_noise=2.0, lowrank_noise=1.0.
    assert (
        main(
            [
                'pipeline',
                '--dataset',
                'TINY',
                '--out',
                str(out),
                '--isotropic-noise',
                '3.0',
            ]
            + SMALL
        )
        == 1
    )
    err = capsys.readouterr().err
    assert 'simulated differently' in err and 'isotropic_noise' in err


def test_format_table():
    table = format_table(
        {
            'dataset': 'AWA2',
            'simulated': True,
            'zsl_acc': 60.04,
            'gzsl_seen': 80.0,
            'gzsl_unseen': 20.0,
            'gzsl_h': 32.0,
            'calibration': 1.5,
            'gzsl_cal_seen': 70.0,
            'gzsl_cal_unseen': 50.0,
            'gzsl_cal_h': 58.33,
            'epochs': {'zsl': 3, 'gzsl': 2, 'gzsl_calibrated': 4},
        }
    )
    lines = table.splitlines()
    assert lines[0] == 'AWA2: SIMULATED features (not a benchmark result)'
    assert lines[4].endswith('| 3 | 60.0 | | | |')
    assert lines[5].endswith('| 2 | | 80.0 | 20.0 | 32.0 |')
    assert lines[6].endswith('c = 1.5 | 4 | | 70.0 | 50.0 | 58.3 |')
    assert 'edges' not in table  # no graph, no line

    graph = format_table(
        {
            'zsl_acc': 1.0,
            'gzsl_seen': 1.0,
            'gzsl_unseen': 1.0,
            'gzsl_h': 1.0,
            'class_graph_edges': 6,
            'class_graph_edges_initial': 377,
        }
    )
    assert graph.splitlines()[-1] == (
        "class graph of the GZSL row's model: 6 directed edges among all "
        'classes (377 before training)'
    )


def test_python_module_entry_point():
    result = subprocess.run(
        [sys.executable, '-m', 'apnet_pyg.zsl', '--help'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert 'simulate' in result.stdout and 'pipeline' in result.stdout


def test_run_script_prints_one_line_and_debug_shows_the_traceback(capsys):
    from apnet_pyg.scripting import run_script

    seen = []

    def script(argv):
        seen.append(argv)
        if '--type' in argv:
            raise TypeError('bad\ntype')
        raise ValueError("'x' must be\n positive")

    assert run_script(script, ['--a']) == 1
    assert seen == [['--a']]
    assert capsys.readouterr().err == "error: 'x' must be positive\n"
    assert run_script(script, ['--type']) == 1
    assert capsys.readouterr().err == (
        'error: TypeError: bad type (--debug shows the traceback)\n'
    )
    # --debug is not passed on; usage errors and successes pass through:
    with pytest.raises(ValueError):
        run_script(script, ['--a', '--debug'])
    assert seen[-1] == ['--a']
    with pytest.raises(SystemExit):
        run_script(lambda argv: sys.exit('usage'), [])
    assert run_script(lambda argv: None, []) == 0


def test_example_scripts_print_one_line_errors():
    result = subprocess.run(
        [
            sys.executable,
            str(
                Path(__file__).parents[2]
                / 'experiments'
                / 'eszsl_per_class.py'
            ),
            '--dataset',
            'NOPE',
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(
        "error: --dataset 'NOPE': No dataset folder 'NOPE'"
    )
    assert len(result.stderr.splitlines()) == 1
    assert 'Traceback' not in result.stderr


def test_cli_baselines(tiny_root, tmp_path, capsys):
    # The baselines alone, calibrated on the validation task of a run with
    # the same seed and held-out share:
    from apnet_pyg.data import load_xlsa17
    from apnet_pyg.data.splits import seen_validation_split
    from apnet_pyg.zsl.baselines.benchmark import fit_baselines

    out = tmp_path / 'baselines.json'
    assert (
        main(
            [
                'baselines',
                '--dataset',
                'TINY',
                '--root',
                str(tiny_root),
                '--seed',
                '3',
                '--seen-val-fraction',
                '0.3',
                '--out',
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    data = load_xlsa17(tiny_root, 'TINY')
    expected = fit_baselines(
        data, tiny_root, seen_validation_split(data, 0.3, 3)
    )
    saved = json.loads(out.read_text())
    assert saved['baselines'] == expected
    assert (saved['seed'], saved['seen_val_fraction']) == (3, 0.3)
    assert saved['data'] == data.fingerprint()
    assert printed.startswith('TINY: SIMULATED features')
    eszsl = expected['ESZSL']
    assert (
        f'| ESZSL (gamma={eszsl["gamma"]:g}, lam={eszsl["lam"]:g}; '
        f'c = {eszsl["calibration"]:.3g}) | {eszsl["zsl_acc"]:.1f} | '
        in printed
    )
    assert f'| {eszsl["gzsl_cal_h"]:.1f} |\n' in printed
