import json
import statistics

import pytest

from apnet_pyg.zsl import TrainConfig
from apnet_pyg.zsl.baselines.benchmark import fit_baselines
from apnet_pyg.zsl.metrics import CALIBRATED_METRICS, METRICS
from apnet_pyg.zsl.reporting.compare import compare_runs
from apnet_pyg.zsl.reporting.published import PUBLISHED, published
from apnet_pyg.zsl.reporting.tables import format_comparison
from apnet_pyg.zsl.rundir import load_run
from apnet_pyg.zsl.train import run

APNET_KEYS = METRICS + ('gzsl_cal_unseen', 'gzsl_cal_seen', 'gzsl_cal_h')


def write_run(
    folder,
    dataset='AWA2',
    simulated=True,
    seed=0,
    data_seed=0,
    figures=None,
    baselines=None,
    extra=None,
    **config,
):
    r"""A metrics.json holding what compare reads (no model files)."""
    figures = figures or {}
    metrics = {
        'dataset': dataset,
        'simulated': simulated,
        'epochs': {'zsl': 1, 'gzsl': 1, 'gzsl_calibrated': 1},
        'calibration': 0.0,
        'config': TrainConfig(seed=seed, **config).to_dict(),
        'simulation': {'seed': data_seed} if simulated else None,
        **{key: figures.get(key, 10.0) for key in APNET_KEYS},
    }
    if baselines is not None:
        metrics['baselines'] = baselines
    metrics.update(extra or {})
    folder.mkdir(parents=True)
    (folder / 'metrics.json').write_text(json.dumps(metrics))
    return folder


def baseline(zsl, u, s, h, calibrated=(0.05, 60.0, 50.0, 54.5)):
    # 'calibrated': (c, S, U, H) of calibrated stacking.
    figures = dict(zip(METRICS, (zsl, u, s, h)))
    figures.update(zip(CALIBRATED_METRICS, calibrated))
    return figures


def table_rows(text):
    r"""The cells of each markdown row, by the row's first cell."""
    rows = [
        [cell.strip() for cell in line.strip('|').split('|')]
        for line in text.splitlines()
        if line.startswith('| ')
    ]
    return {cells[0]: cells[1:] for cells in rows}


def test_compare_means_and_published_figures(tmp_path):
    zsl = [58.0, 57.6, 61.8]
    cal_h = [60.1, 63.6, 65.5]
    eszsl = [
        baseline(62.4, 2.4, 87.7, 4.7, (0.05, 64.5, 58.4, 61.3)),
        baseline(63.1, 2.3, 86.0, 4.9, (0.06, 66.0, 52.0, 58.2)),
        baseline(63.6, 2.5, 89.9, 4.5, (0.05, 65.0, 55.0, 59.6)),
    ]
    runs = [
        write_run(
            tmp_path / f'run{i}',
            data_seed=i,
            figures={
                'zsl_acc': zsl[i],
                'gzsl_h': 1.0 + i,
                'gzsl_cal_h': cal_h[i],
            },
            baselines={'ESZSL': eszsl[i]},
        )
        for i in range(3)
    ]
    groups = compare_runs(runs)
    assert list(groups) == ['AWA2'] and groups['AWA2']['simulated']
    text = format_comparison(groups)
    assert 'AWA2, 3 runs: SIMULATED features' in text
    rows = table_rows(text)

    # Mean and sample standard deviation, the published figure after it.
    real = published('AWA2', 'APNet')
    assert rows['APNet'][0] == (
        f'{statistics.mean(zsl):.1f} ± '
        f'{statistics.stdev(zsl):.1f} '
        f'({real["zsl_acc"]:.1f})'
    )
    assert rows['ESZSL'][3].endswith(f'({PUBLISHED["AWA2"]["ESZSL"][3]:.1f})')
    # The calibrated row: no ZSL figure and no published twin.
    calibrated = rows['APNet, calibrated stacking']
    assert calibrated[0] == ''
    assert calibrated[3] == (
        f'{statistics.mean(cal_h):.1f} ± {statistics.stdev(cal_h):.1f}'
    )

    # Per run: APNet against ESZSL on the same data.
    for i in range(3):
        row = rows[str(runs[i])]
        assert row[:2] == ['0', str(i)]
        assert row[2] == f'{zsl[i] - eszsl[i]["zsl_acc"]:+.1f}'
        assert row[3] == f'{(1.0 + i) / eszsl[i]["gzsl_h"]:.1f}x'
        # Calibrated against calibrated:
        assert row[4] == f'{cal_h[i] / eszsl[i]["gzsl_cal_h"]:.1f}x'
    # ESZSL's calibrated row: no ZSL figure, no published twin.
    calibrated = rows['ESZSL, calibrated stacking']
    assert calibrated[0] == ''
    cal_eszsl = [61.3, 58.2, 59.6]
    assert calibrated[3] == (
        f'{statistics.mean(cal_eszsl):.1f} ± {statistics.stdev(cal_eszsl):.1f}'
    )
    paper, reference = PUBLISHED['AWA2']['APNet'], PUBLISHED['AWA2']['ESZSL']
    published_row = next(
        row for name, row in rows.items() if name.startswith('published')
    )
    assert published_row[2] == f'{paper[0] - reference[0]:+.1f}'
    assert published_row[3] == f'{paper[3] / reference[3]:.1f}x'


def test_compare_groups_datasets_and_marks_missing_figures(tmp_path):
    awa2 = write_run(
        tmp_path / 'awa2',
        baselines={
            'ESZSL': baseline(60, 2, 80, 4),
            'SAE': baseline(40, 5, 80, 9),
        },
    )
    cub = [
        write_run(
            tmp_path / 'cub0',
            dataset='CUB',
            simulated=False,
            baselines={'ESZSL': baseline(50, 6, 70, 10)},
        ),
        write_run(
            tmp_path / 'cub1',
            dataset='CUB',
            simulated=False,
            seed=1,
            epochs=60,
        ),
    ]
    groups = compare_runs([cub[0], awa2, cub[1]])
    assert list(groups) == ['CUB', 'AWA2']
    text = format_comparison(groups)
    cub_text, awa2_text = text.split('\n\nAWA2')
    assert 'CUB, 2 runs: real features' in cub_text
    assert 'differ in epochs.' in cub_text  # not in seed: runs vary it
    rows = table_rows(cub_text)
    # One run of two has ESZSL: its figure, marked, next to the published.
    assert (
        rows['ESZSL'][0]
        == f'50.0 [1 run] ({PUBLISHED["CUB"]["ESZSL"][0]:.1f})'
    )
    assert rows[str(cub[1])][2:] == ['-', '-', '-']
    assert f'No baselines in {cub[1]}: train with --baselines' in cub_text
    assert (
        table_rows(awa2_text)['SAE'][0]
        == f'40.0 ({PUBLISHED["AWA2"]["SAE"][0]:.1f})'
    )


def test_compare_labels_test_selected_and_unselected_rows(tmp_path):
    optimistic = baseline(70.0, 50.0, 80.0, 61.5)
    runs = [
        write_run(
            tmp_path / 'a',
            extra={
                'test_selected': {
                    'label': 'x',
                    'zsl_epoch': 3,
                    'gzsl_epoch': 4,
                    **optimistic,
                }
            },
        ),
        write_run(tmp_path / 'b', seed=1, extra={'selection': 'none'}),
    ]
    text = format_comparison(compare_runs(runs))
    rows = table_rows(text)
    # The authors' protocol, shown with the paper's (test-selected) figures:
    real = published('AWA2', 'APNet')
    assert rows['APNet, test-set selected (optimistic)'] == [
        f'{optimistic[key]:.1f} [1 run] ({real[key]:.1f})' for key in METRICS
    ]
    assert f"Note: APNet's rows of {runs[1]} are its last epoch's" in text
    assert str(runs[0]) not in text.split('Note:')[1].split('\n')[0]


def test_compare_validation_accuracies(tmp_path):
    def selected(accuracy):
        return {
            'model_selection': {'zsl': {'epoch': 3, 'val_zsl_acc': accuracy}}
        }

    def recorded(figures, accuracy):
        return {**figures, 'val_zsl_acc': accuracy}

    runs = [
        write_run(
            tmp_path / 'a',
            extra=selected(72.1),
            baselines={
                'ESZSL': recorded(baseline(62, 2, 88, 5), 74.0),
                'SAE': recorded(baseline(42, 2, 84, 4), 65.4),
            },
        ),
        # Baselines fitted before they recorded it:
        write_run(
            tmp_path / 'b',
            data_seed=1,
            extra=selected(63.6),
            seen_val_fraction=0.25,
            baselines={'ESZSL': baseline(63, 2, 90, 5)},
        ),
        # Trained without model selection, so no APNet figure:
        write_run(
            tmp_path / 'c',
            data_seed=2,
            seen_val_fraction=0.5,
            extra={'selection': 'none', 'model_selection': 'none'},
            baselines={'ESZSL': recorded(baseline(63, 2, 86, 5), 74.7)},
        ),
    ]
    text = format_comparison(compare_runs(runs))
    _, validation = text.split('On the validation classes')
    assert 'trained on 75% or 80% of the trainclasses1 images' in validation
    rows = table_rows(validation)
    assert rows['run'] == ['APNet', 'ESZSL', 'SAE', 'APNet - ESZSL']
    assert rows[str(runs[0])] == [
        '72.1',
        '74.0',
        '65.4',
        f'{72.1 - 74.0:+.1f}',
    ]
    assert rows[str(runs[1])] == ['63.6', '-', '-', '-']
    assert rows[str(runs[2])] == ['-', '74.7', '-', '-']
    # Without any recorded baseline accuracy there is no such table.
    assert 'On the validation classes' not in format_comparison(
        compare_runs([runs[1]])
    )


def test_compare_notes_runs_on_different_data(tmp_path):
    # Data seeds are what a spread over simulations is for; other simulator
    # options, or other real features, are not seed variation.
    def simulation(seed, **options):
        return {
            'simulation': {
                'seed': seed,
                'version': 3,
                'options': {'scale': 1.0, **options},
            }
        }

    same = [
        write_run(tmp_path / f'same{i}', data_seed=i, extra=simulation(i))
        for i in range(2)
    ]
    assert 'trained on different data' not in format_comparison(
        compare_runs(same)
    )
    other = write_run(tmp_path / 'other', extra=simulation(0, scale=2.0))
    assert (
        'Note: the runs were trained on different data: their simulator '
        'options (beyond the data seed) differ in scale.'
        in format_comparison(compare_runs(same + [other]))
    )

    real = [
        write_run(
            tmp_path / f'real{i}',
            simulated=False,
            seed=i,
            extra={
                'data': {
                    'dataset': 'AWA2',
                    'features': features,
                    'labels': 'ab',
                }
            },
        )
        for i, features in enumerate(['01', '01', '02'])
    ]
    assert 'different data' not in format_comparison(compare_runs(real[:2]))
    assert 'their data fingerprints differ in features.' in format_comparison(
        compare_runs(real)
    )


def test_compare_reads_a_configuration_recorded_before_an_option(tmp_path):
    run_dir = write_run(tmp_path / 'old')
    metrics = json.loads((run_dir / 'metrics.json').read_text())
    del metrics['config']['seen_val_fraction']
    (run_dir / 'metrics.json').write_text(json.dumps(metrics))
    summary = compare_runs([write_run(tmp_path / 'new'), run_dir])
    assert 'configurations differ' not in format_comparison(summary)


def test_compare_refuses_mixed_or_repeated_runs(tmp_path):
    simulated = write_run(tmp_path / 'sim')
    real = write_run(tmp_path / 'real', simulated=False)
    with pytest.raises(
        ValueError, match='mixes simulated and real features for AWA2'
    ):
        compare_runs([simulated, real])
    with pytest.raises(ValueError, match='names the run .* twice'):
        compare_runs([simulated, tmp_path / 'sim' / '..' / 'sim'])
    with pytest.raises(ValueError, match="'run_dirs' is empty"):
        compare_runs([])


def test_compare_refuses_a_copy_of_a_run(tmp_path):
    # A copy at another path once counted as a second seed (+- 0.0). The
    # run's record tells it: a rerun's timings differ, a copy's do not.
    import shutil

    timed = {'wall_seconds': 12.5, 'history': [{'ms_per_episode': 3.25}]}
    run_dir = write_run(tmp_path / 'run', extra=timed)
    copy = shutil.copytree(run_dir, tmp_path / 'backup' / 'run')
    other = write_run(tmp_path / 'other', seed=1, extra=timed)
    with pytest.raises(ValueError) as error:
        compare_runs([run_dir, other, copy])
    assert str(error.value) == (
        f"'run_dirs' (--runs): '{copy}' is a copy of the run '{run_dir}' "
        f'(the same metrics.json, timings included): each run counts once '
        f'in the means, so name one of them'
    )
    # Reformatted, it is the same record.
    (copy / 'metrics.json').write_text(
        json.dumps(json.loads((copy / 'metrics.json').read_text()), indent=2)
    )
    with pytest.raises(ValueError, match='is a copy of the run'):
        compare_runs([run_dir, copy])


def test_compare_notes_reruns_of_one_seed(tmp_path):
    # Not a copy (the timings differ), but the same configuration, seed and
    # data: a rerun, whose spread is not that of seeds.
    runs = [
        write_run(tmp_path / f'run{i}', extra={'wall_seconds': 10.0 + i})
        for i in range(2)
    ]
    seeds = [
        write_run(tmp_path / 'seed1', seed=1),
        write_run(tmp_path / 'data1', data_seed=1),
    ]
    text = format_comparison(compare_runs(runs + seeds))
    assert 'AWA2, 4 runs' in text
    assert (
        f'Note: {runs[0]}, {runs[1]} have the same configuration, seed '
        f'and data: reruns of one seed, not independent seeds.' in text
    )
    assert text.count('reruns of one seed') == 1
    assert 'reruns of one seed' not in format_comparison(
        compare_runs(runs[:1] + seeds)
    )


def test_compare_fits_missing_baselines(tiny_root, tmp_path):
    tiny = TrainConfig(
        class_channels=8,
        hidden_channels=8,
        proj_channels=4,
        n_way=4,
        epochs=1,
        iterations_per_epoch=2,
    )
    saved_run = tmp_path / 'run'
    from apnet_pyg.data import load_xlsa17

    run(
        load_xlsa17(tiny_root, 'TINY', attributes=tiny.attributes),
        tiny,
        saved_run,
        progress=False,
        data_root=str(tiny_root),
    )
    before = (saved_run / 'metrics.json').read_text()
    summary = compare_runs([saved_run], fit_missing_baselines=True)
    summary = summary['TINY']['runs'][0]
    assert summary['baselines_fitted']
    saved, data = load_run(saved_run)
    expected = fit_baselines(data, tiny_root)
    for name in ('ESZSL', 'SAE'):
        assert summary['figures'][name] == {
            key: expected[name][key] for key in METRICS
        }
    assert (saved_run / 'metrics.json').read_text() == before  # unchanged
    text = format_comparison({'TINY': {'simulated': True, 'runs': [summary]}})
    assert 'Baselines fitted now on the data of' in text
    # No published figures for a dataset outside the benchmark.
    assert '(' not in table_rows(text)['ESZSL'][0]

    # Baselines without their calibrated row are no record of this
    # release: refused, naming the run and the baseline.
    metrics = json.loads(before)
    metrics['baselines'] = {
        name: {key: expected[name][key] for key in METRICS}
        for name in expected
    }
    (saved_run / 'metrics.json').write_text(json.dumps(metrics))
    with pytest.raises(ValueError, match="baseline 'ESZSL' lacks a figure"):
        compare_runs([saved_run])


def test_compare_fits_missing_baselines_from_another_root(
    tiny_root, tmp_path, capsys
):
    # The data moved: compare takes --root, as its error asks, and names
    # the run whose data it cannot find.
    import shutil

    from apnet_pyg.data import load_xlsa17
    from apnet_pyg.zsl.cli import main

    tiny = TrainConfig(
        class_channels=8,
        hidden_channels=8,
        proj_channels=4,
        n_way=4,
        epochs=1,
        iterations_per_epoch=2,
    )
    moved = tmp_path / 'moved'
    shutil.copytree(tiny_root, moved)
    saved_run = tmp_path / 'run'
    run(
        load_xlsa17(moved, 'TINY', attributes=tiny.attributes),
        tiny,
        saved_run,
        progress=False,
        data_root=str(moved),
    )
    shutil.rmtree(moved)
    with pytest.raises(
        FileNotFoundError,
        match=f"the data of the run '{saved_run}' \\(for its baselines\\): ",
    ):
        compare_runs([saved_run], fit_missing_baselines=True)
    summary = compare_runs(
        [saved_run], fit_missing_baselines=True, root=tiny_root
    )['TINY']['runs'][0]
    expected = fit_baselines(load_run(saved_run, tiny_root)[1], tiny_root)
    assert summary['figures']['ESZSL'] == {
        key: expected['ESZSL'][key] for key in METRICS
    }
    assert (
        main(
            [
                'compare',
                '--runs',
                str(saved_run),
                '--baselines',
                '--root',
                str(tiny_root),
            ]
        )
        == 0
    )
    assert (
        main(['compare', '--runs', str(saved_run), '--root', str(tiny_root)])
        == 1
    )
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith(
            'error: --root is read for --baselines only: add --baselines, or '
            'drop --root'
        )
    )
