import dataclasses
import json

import pytest

import apnet_pyg.zsl.train as train_module
from apnet_pyg.data import load_xlsa17
from apnet_pyg.environment import describe_environment
from apnet_pyg.zsl import run
from apnet_pyg.zsl import tune as tune_module
from apnet_pyg.zsl.cli import main
from apnet_pyg.zsl.metrics import ROWS
from apnet_pyg.zsl.reporting.tables import format_tuning
from apnet_pyg.zsl.rundir import load_dataset
from apnet_pyg.zsl.tune import grid_settings, parse_grid, tune
from tests.helpers.zsl import TINY, corrupt_test_labels

# Two short settings: the tuning tests train four selection phases.
BASE = TINY.replace(epochs=2, iterations_per_epoch=10)
GRID = {'lr': [1e-3, 3e-3]}


@pytest.fixture(scope='module')
def tiny(tiny_root):
    return load_xlsa17(tiny_root, 'TINY', attributes='percent')


def test_parse_grid():
    grid = parse_grid(
        [
            'lr=1e-5,2e-5',
            'lr-decay-epoch=none,3',
            'graph=learned,none',
            'num_centroids=2',
        ]
    )
    assert grid == {
        'lr': [1e-5, 2e-5],
        'lr_decay_epoch': [None, 3],
        'graph': ['learned', 'none'],
        'num_centroids': [2],
    }
    assert isinstance(grid['lr'][0], float)


@pytest.mark.parametrize(
    'items,message',
    [
        (['lr'], "'lr': write KEY=VALUE"),
        (['lr='], "'lr=': write KEY=VALUE"),
        (['learning-rate=1'], "'learning-rate' is not a training option"),
        (['seen-val-fraction=0.1,0.2'], 'cannot be tuned'),
        (['model-selection=none'], 'cannot be tuned'),
        (['lr=1e-5', 'lr=2e-5'], "'lr' is given twice"),
        (['lr=1e-5,1e-5'], 'a value is repeated'),
        (['epochs=ten'], "'ten' is not an integer"),
        (['lr=fast'], "'fast' is not a number"),
        (['lr-decay-epoch=never'], "'never' is not an integer or 'none'"),
        ([], 'give at least one'),
    ],
)
def test_parse_grid_errors(items, message):
    with pytest.raises(ValueError, match=message):
        parse_grid(items)


def test_grid_settings_are_the_product_checked_first():
    settings = grid_settings(
        BASE, {'lr': [1e-3, 2e-3], 'graph': ['learned', 'none']}
    )
    assert [setting for setting, _ in settings] == [
        {'lr': 1e-3, 'graph': 'learned'},
        {'lr': 1e-3, 'graph': 'none'},
        {'lr': 2e-3, 'graph': 'learned'},
        {'lr': 2e-3, 'graph': 'none'},
    ]
    assert settings[3][1] == BASE.replace(lr=2e-3, graph='none')
    # A bad value stops the tuning before anything is trained.
    with pytest.raises(
        ValueError,
        match=r"setting lr=-1.0: 'lr' must be "
        r'positive',
    ):
        grid_settings(BASE, {'lr': [1e-3, -1.0]})
    with pytest.raises(ValueError, match="'graph' must be one of"):
        grid_settings(BASE, {'graph': ['learned', 'complete']})


def test_tune_selects_each_row_on_validation(tiny, tmp_path):
    summary = tune(
        lambda config: tiny, BASE, GRID, tmp_path / 'tune', progress=False
    )
    assert summary == json.loads(
        (tmp_path / 'tune' / 'tuning.json').read_text()
    )
    assert [entry['setting'] for entry in summary['settings']] == [
        {'lr': 1e-3},
        {'lr': 3e-3},
    ]
    assert summary['environment'] == describe_environment('cpu')
    # Each setting's selection is the one a run of that configuration
    # makes before its final training.
    for entry in summary['settings']:
        config = BASE.replace(**entry['setting'])
        selection = run(
            tiny, config, tmp_path / str(config.lr), progress=False
        )['model_selection']
        for row in ROWS:
            assert entry[row] == selection[row]
    # Each row's winner is the setting of best validation metric.
    for row, metric in ROWS.items():
        values = [entry[row][metric] for entry in summary['settings']]
        best = summary['best'][row]
        assert best[metric] == max(values)
        assert (
            best['setting']
            == summary['settings'][values.index(max(values))]['setting']
        )
    # The checkpoints are gone, the selections kept.
    for folder in ['lr=0.001', 'lr=0.003']:
        assert not (tmp_path / 'tune' / folder / 'selection.pt').exists()
        assert (tmp_path / 'tune' / folder / 'selection.json').is_file()


def test_tune_never_reads_test_labels(tiny, tmp_path):
    honest = tune(
        lambda config: tiny, BASE, GRID, tmp_path / 'a', progress=False
    )
    corrupt = tune(
        lambda config: corrupt_test_labels(tiny),
        BASE,
        GRID,
        tmp_path / 'b',
        progress=False,
    )
    assert corrupt == honest


def interrupted_tune(data, out, monkeypatch, grid, call):
    r"""A tuning of :obj:`grid` on :obj:`data` interrupted at the
    :obj:`call`-th validation (the end of an epoch, before its
    checkpoint)."""
    validate = train_module.validate
    calls = []

    def interrupting(*args):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return validate(*args)

    monkeypatch.setattr(train_module, 'validate', interrupting)
    with pytest.raises(KeyboardInterrupt):
        tune(lambda config: data, BASE, grid, out, progress=False)
    monkeypatch.undo()


def test_tune_continues_where_it_stopped(tiny, tmp_path, monkeypatch):
    whole = tune(
        lambda config: tiny, BASE, GRID, tmp_path / 'whole', progress=False
    )

    # Interrupted in the second setting's second epoch:
    interrupted_tune(tiny, tmp_path / 'cut', monkeypatch, GRID, call=4)
    assert (tmp_path / 'cut' / 'lr=0.001' / 'selection.json').is_file()
    assert (tmp_path / 'cut' / 'lr=0.003' / 'selection.pt').is_file()

    # Again: the first setting is reused, the second resumed, and the
    # result is the uninterrupted one.
    trained = []
    original = tune_module.select_on_validation

    def recording(data, config, out, device, resume, progress):
        trained.append((config.lr, resume))
        return original(data, config, out, device, resume, progress)

    monkeypatch.setattr(tune_module, 'select_on_validation', recording)
    again = tune(
        lambda config: tiny, BASE, GRID, tmp_path / 'cut', progress=False
    )
    assert trained == [(3e-3, True)]
    assert again == whole


def test_tune_refuses_another_configuration_a_file_and_no_selection(
    tiny, tmp_path
):
    tune(lambda config: tiny, BASE, {'lr': [1e-3]}, tmp_path, progress=False)
    with pytest.raises(FileExistsError, match='another configuration'):
        tune(
            lambda config: tiny,
            BASE.replace(epochs=1),
            {'lr': [1e-3]},
            tmp_path,
            progress=False,
        )
    with pytest.raises(
        FileExistsError, match='another configuration or dataset'
    ):
        tune(
            lambda config: dataclasses.replace(tiny, name='OTHER'),
            BASE,
            {'lr': [1e-3]},
            tmp_path,
            progress=False,
        )
    # A setting that cannot run stops the tuning before any training.
    with pytest.raises(ValueError, match='n_way=20 exceeds'):
        tune(
            lambda config: tiny,
            BASE,
            {'n_way': [4, 20]},
            tmp_path / 'n_way',
            progress=False,
        )
    assert not (tmp_path / 'n_way').exists()
    # So does a setting whose episodes need more images than a class has,
    # named as the grid set it (the first setting was trained before).
    with pytest.raises(ValueError, match=r'k_shot=1000 \(--grid\) exceeds'):
        tune(
            lambda config: tiny,
            BASE,
            {'k_shot': [1, 1000]},
            tmp_path / 'k_shot',
            progress=False,
        )
    assert not (tmp_path / 'k_shot').exists()
    with pytest.raises(ValueError, match=r'k_shot=1000 \(--k-shot\)'):
        tune(
            lambda config: tiny,
            BASE.replace(k_shot=1000),
            GRID,
            tmp_path / 'k_shot',
            progress=False,
        )
    (tmp_path / 'file').write_text('')
    with pytest.raises(NotADirectoryError, match="'.*file' is a file"):
        tune(
            lambda config: tiny, BASE, GRID, tmp_path / 'file', progress=False
        )
    with pytest.raises(ValueError, match="drop model_selection='none'"):
        tune(
            lambda config: tiny,
            BASE.replace(model_selection='none'),
            GRID,
            tmp_path / 'none',
            progress=False,
        )


def test_tune_continues_and_reuses_only_on_the_same_data(
    tiny, tmp_path, monkeypatch
):
    # Two folders of real features of one dataset: no simulation record
    # tells them apart, the data's fingerprint does.
    real = dataclasses.replace(tiny, simulation=None)
    other = dataclasses.replace(real, features=real.features.flip(0))

    interrupted_tune(
        real, tmp_path / 'cut', monkeypatch, {'lr': [1e-3]}, call=2
    )
    assert (tmp_path / 'cut' / 'lr=0.001' / 'selection.pt').is_file()
    with pytest.raises(
        ValueError,
        match=r"data.json': the setting was "
        r'started on other data \(differs in: features\); '
        r'tune again with the --root it was started with',
    ):
        tune(
            lambda config: other,
            BASE,
            {'lr': [1e-3]},
            tmp_path / 'cut',
            progress=False,
        )
    tune(
        lambda config: real,
        BASE,
        {'lr': [1e-3]},
        tmp_path / 'cut',
        progress=False,
    )  # On its own data it continues.

    with pytest.raises(
        FileExistsError, match='another configuration or dataset'
    ):
        tune(
            lambda config: other,
            BASE,
            {'lr': [1e-3]},
            tmp_path / 'cut',
            progress=False,
        )

    # A checkpoint without the record of its data is not continued.
    interrupted_tune(
        real, tmp_path / 'old', monkeypatch, {'lr': [1e-3]}, call=2
    )
    (tmp_path / 'old' / 'lr=0.001' / 'data.json').unlink()
    with pytest.raises(
        ValueError,
        match="selection.pt' has no record of the data it was trained on",
    ):
        tune(
            lambda config: real,
            BASE,
            {'lr': [1e-3]},
            tmp_path / 'old',
            progress=False,
        )


def test_tune_loads_the_attributes_each_setting_reads(tiny_root, tmp_path):
    loaded = []

    def load(config):
        loaded.append(config.attributes)
        return load_dataset(tiny_root, 'TINY', config)

    tune(
        load,
        BASE.replace(epochs=1),
        {'attributes': ['percent', 'att'], 'lr': [1e-3, 3e-3]},
        tmp_path,
        progress=False,
    )
    assert loaded == ['percent', 'att']  # once per kind


def test_format_tuning(tiny, tmp_path):
    summary = tune(lambda config: tiny, BASE, GRID, tmp_path, progress=False)
    text = format_tuning(summary)
    assert 'SIMULATED features' in text and 'no test image read' in text
    rows = [line for line in text.splitlines() if line.startswith('| 0.00')]
    assert len(rows) == 2
    assert sum(line.count('*') for line in rows) == len(ROWS)
    for row in ROWS:
        lr = summary['best'][row]['setting']['lr']
        assert f'- {row}: --lr {lr}' in text


def test_cli_tune(tiny_root, tmp_path, capsys):
    out = tmp_path / 'tune'
    argv = [
        'tune',
        '--dataset',
        'TINY',
        '--root',
        str(tiny_root),
        '--out',
        str(out),
        '--grid',
        'lr=1e-3,3e-3',
        '--epochs',
        '2',
        '--iterations-per-epoch',
        '10',
        '--n-way',
        '5',
        '--class-channels',
        '32',
        '--hidden-channels',
        '32',
        '--proj-channels',
        '16',
        '--num-centroids',
        '2',
        '--seen-val-fraction',
        '0.25',
        '--no-progress',
    ]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert '| lr | val ZSL acc (epoch) |' in printed.out
    # Both settings' validation tasks are 4-way (TINY's 4 trainclasses1):
    # said once.
    warned = [
        line
        for line in printed.err.splitlines()
        if line.startswith('warning: ')
    ]
    assert len(warned) == 1 and '4-way' in warned[0]
    summary = json.loads((out / 'tuning.json').read_text())
    assert summary['base']['class_channels'] == 32
    assert summary['base']['score'] == 'sigmoid'  # the paper variant

    assert (
        main(
            [
                'tune',
                '--dataset',
                'TINY',
                '--root',
                str(tiny_root),
                '--out',
                str(out),
                '--grid',
                'learning-rate=1',
            ]
        )
        == 1
    )
    error = capsys.readouterr().err
    assert error.startswith("error: --grid 'learning-rate=1'")
    assert len(error.splitlines()) == 1
