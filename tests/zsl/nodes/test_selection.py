import pytest
import torch

import apnet_pyg.zsl.nodes.training as training_module
from apnet_pyg.zsl.metrics import per_class_accuracy
from apnet_pyg.zsl.nodes.inputs import NodeSetting
from apnet_pyg.zsl.nodes.selection import (
    ORACLE_LABEL,
    SMOOTHING_READINGS,
    oracle_choice,
    reading_grid,
    select_setting,
    selection_folds,
    selection_grid,
)
from tests.helpers.zero_shot_nodes import TINY_NODES, relabel_unseen


def test_selection_grid_changes_one_choice_at_a_time():
    grid = selection_grid(full=True)
    base = NodeSetting()
    assert grid[0] == base
    assert len({s.key() for s in grid}) == len(grid) == 11
    # The default: the base, more hops, the learned graph, three k-NN
    # graphs and the linear score (the others are full-grid only).
    default = selection_grid()
    assert [s.key() for s in default] == [
        s.key()
        for s in grid
        if s.scoring == 'hops'
        and s.descriptions == 'center'
        and not s.config.knn_loop
        and s.config.interaction == 'additive'
    ]
    assert len(default) == 7
    for setting in grid[1:]:
        changed = [
            name
            for name in ('scoring', 'hops', 'descriptions', 'calibration')
            if getattr(setting, name) != getattr(base, name)
        ]
        config = setting.config.to_dict()
        changed += [
            name
            for name, value in base.config.to_dict().items()
            if config[name] != value and name != 'logit_scale'
        ]
        # One choice (the k-NN variants: the graph and one of its own).
        assert len(changed) == 1 or (
            changed[0] == 'graph' and len(changed) <= 2
        ), changed
    assert {s.config.graph for s in grid} == {'none', 'learned', 'knn'}
    knn = [s.config for s in grid if s.config.graph == 'knn']
    assert [
        (c.knn_k, c.knn_loop, c.knn_space, c.learn_propagation_temperature)
        for c in knn
    ] == [
        (2, False, 'descriptions', False),
        (2, True, 'descriptions', False),
        (2, False, 'encoded', False),
        (2, False, 'descriptions', True),
    ]
    # Over every class: a task's 2 or 3 seen classes have no neighbours.
    assert all(c.knn_classes == 'all' for c in knn)
    heads = [s for s in grid if s.config.interaction == 'multiplicative']
    assert len(heads) == 1
    assert 'interaction=multiplicative' in heads[0].describe()
    assert 'interaction' not in grid[0].describe()
    # Every training setting is read without smoothing, as a single model.
    assert {(s.smoothing, s.ensemble) for s in grid} == {('none', 1)}


def test_reading_grid():
    assert reading_grid((1, 2)) == [
        r
        for r in reading_grid((1, 2), ('none', 'prototypes'))
        if r['refinement'] == 'none'
    ]
    readings = reading_grid((1, 2), ('none', 'prototypes'))
    assert len(readings) == 2 * 2 * len(SMOOTHING_READINGS)
    assert [r['ensemble'] for r in readings] == [1] * 10 + [2] * 10
    assert readings[0] == {
        'smoothing': 'none',
        'smoothing_steps': 16,
        'smoothing_temperature': 1.0,
        'ensemble': 1,
        'refinement': 'none',
    }
    # Each smoothing as it is, then refined into prototypes.
    assert readings[1] == dict(readings[0], refinement='prototypes')
    assert [r['refinement'] for r in readings[:4]] == [
        'none',
        'prototypes',
    ] * 2
    assert {(r['smoothing'], r['smoothing_steps']) for r in readings} == {
        ('none', 16),
        ('mean', 16),
        ('mean', 64),
        ('attention', 16),
        ('attention', 64),
    }
    for reading in readings:  # Each a valid setting.
        NodeSetting().replace(**reading)


def test_selection_folds(tiny):
    # Split II's four known classes: every pair trained, the other pair
    # validated; the split itself first, the unseen classes never moved.
    _, nodes = tiny
    split = nodes.split('II')
    folds = selection_folds(split)
    assert folds[0] is split and len(folds) == 6
    pool = {0, 1, 2, 3}
    assert {tuple(f.seen.tolist()) for f in folds} == {
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 2),
        (1, 3),
        (2, 3),
    }
    for fold in folds:
        assert set(fold.seen.tolist()) | set(fold.val.tolist()) == pool
        assert not set(fold.seen.tolist()) & set(fold.val.tolist())
        assert torch.equal(fold.unseen, split.unseen)
    with pytest.raises(ValueError, match='no validation class'):
        selection_folds(nodes.split('I'))


@pytest.mark.parametrize('selection', ['split', 'folds'])
def test_choices_never_read_unseen_labels(tiny, selection):
    # The unseen classes' labels permuted: every validation figure and the
    # choice are the same; only the oracle, which reads them, may move.
    _, nodes = tiny
    changed = relabel_unseen(nodes)
    split = nodes.split('II')
    folds = selection_folds(split) if selection == 'folds' else None
    grid = [TINY_NODES, TINY_NODES.replace(graph='knn')]
    # Short smoothings (a test's budget), single models and, on the
    # split, an ensemble.
    seeds = [0] if folds else [0, 1]
    readings = [
        dict(reading, smoothing_steps=2)
        for reading in reading_grid((1, 2))
        if reading['smoothing_steps'] == 16
        and reading['ensemble'] <= len(seeds)
    ]
    quiet = lambda line: None  # noqa: E731
    first, second = (
        select_setting(data, 'text', grid, seeds, quiet, folds, readings)
        for data in (nodes, changed)
    )
    assert [r['val_balanced'] for r in first['rows']] == [
        r['val_balanced'] for r in second['rows']
    ]
    assert len(first['rows']) == len(grid) * len(readings)
    assert first['chosen']['setting'] == second['chosen']['setting']
    assert first['chosen']['epochs'] == second['chosen']['epochs']
    assert first['oracle']['label'] == ORACLE_LABEL
    assert first['oracle']['split'] == 'II'


def test_select_setting_averages_every_fold_and_seed(tiny, monkeypatch):
    # A run per fold, seed and setting; a reading's curve is the mean of
    # every run's balanced accuracy after each epoch (an ensemble's, of
    # every ensemble's); the choice its best.
    _, nodes = tiny
    folds = selection_folds(nodes.split('II'))
    y = nodes.data.y
    runs = []

    def record(task, seed, class_sets, at):
        assert list(at) == [1, 2]
        generator = torch.Generator().manual_seed(len(runs))
        scores = {
            name: torch.randn(2, y.numel(), classes.numel(), generator=gen)
            for name, classes, gen in (
                (name, classes, generator)
                for name, classes in class_sets.items()
            )
        }
        runs.append((task.split, seed, scores['val']))
        return scores

    # The runs of record_runs in this process (workers=1).
    monkeypatch.setattr(training_module, 'record_scores', record)
    readings = [
        dict(
            smoothing='none',
            smoothing_steps=16,
            smoothing_temperature=1.0,
            ensemble=1,
        ),
        dict(
            smoothing='none',
            smoothing_steps=16,
            smoothing_temperature=1.0,
            ensemble=2,
        ),
    ]
    result = select_setting(
        nodes, 'text', [TINY_NODES], [0, 1], lambda line: None, folds, readings
    )
    assert [(tuple(s.seen.tolist()), seed) for s, seed, _ in runs] == [
        (tuple(f.seen.tolist()), seed) for f in folds for seed in (0, 1)
    ]

    def balanced(split, scores):
        index = torch.isin(y, split.val).nonzero().view(-1)
        prediction = split.val[scores[index].argmax(1)]
        return 100.0 * per_class_accuracy(prediction, y[index], split.val)

    single = torch.tensor(
        [[balanced(s, v[e]) for e in range(2)] for s, _, v in runs]
    ).mean(0)
    ensemble = torch.tensor(
        [
            [
                balanced(runs[i][0], (runs[i][2][e] + runs[i + 1][2][e]) / 2)
                for e in range(2)
            ]
            for i in range(0, len(runs), 2)
        ]
    ).mean(0)
    rows = result['rows']
    for row, curve in zip(rows, (single, ensemble)):
        assert row['val_balanced'] == pytest.approx(float(curve.max()))
        assert row['epochs'] == int(curve.argmax()) + 1
    best = max(rows, key=lambda r: r['val_balanced'])
    assert result['chosen'] is best
    assert rows[1]['setting'].ensemble == 2


def test_oracle_choice_is_the_best_unseen_accuracy():
    setting = TINY_NODES
    rows = [
        {
            'setting': setting,
            'split': 'II',
            'acc': torch.tensor([[30.0, 40.0], [32.0, 44.0]]),
            'balanced': torch.tensor([[25.0, 35.0], [27.0, 37.0]]),
        },
        {
            'setting': setting.replace(smoothing='mean'),
            'split': 'II',
            'acc': torch.tensor([[41.0, 20.0], [41.0, 20.0]]),
            'balanced': torch.tensor([[30.0, 20.0], [30.0, 20.0]]),
        },
    ]
    oracle = oracle_choice(rows)
    assert oracle['label'] == ORACLE_LABEL
    assert oracle['setting'] is setting and oracle['epochs'] == 2
    assert oracle['summary']['acc'] == pytest.approx(42.0)
    assert oracle['summary']['acc_std'] == pytest.approx(2**0.5 * 2)
    assert oracle['summary']['balanced'] == pytest.approx(36.0)
    assert oracle['summary']['seeds'] == 2
