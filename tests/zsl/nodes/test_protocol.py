import re
from pathlib import Path

import pytest
import torch

import apnet_pyg.zsl.train as nodes_train
from apnet_pyg.data import read_zero_shot_nodes
from apnet_pyg.zsl.cli import main
from apnet_pyg.zsl.evaluate import apnet_score_fn
from apnet_pyg.zsl.nodes.inputs import (
    NodeSetting,
    NodeTask,
    hop_features,
    prepare_descriptions,
    propagate_features,
    scale_features,
)
from apnet_pyg.zsl.nodes.protocol import (
    DGPN_INPUTS,
    NodeScores,
    combine_hop_scores,
    eszsl_nodes,
    run_nodes,
    sae_nodes,
    select_setting,
    selection_folds,
    selection_grid,
    train_node_model,
)
from apnet_pyg.zsl.nodes.report import format_nodes, node_metrics
from tests.data.test_zero_shot_nodes import write_layout

REPO = Path(__file__).resolve().parents[3]

# A setting small enough for a test: a few short epochs.
TINY = NodeSetting().replace(
    class_channels=16,
    hidden_channels=16,
    proj_channels=8,
    k_shot=4,
    epochs=2,
    iterations_per_epoch=2,
)


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp('nodes')
    write_layout(root)
    return root, read_zero_shot_nodes(root, 'tiny')


def _dense_graph(edge_index, n):
    adj = torch.zeros(n, n, dtype=torch.double)
    adj[edge_index[1], edge_index[0]] = 1.0
    adj.fill_diagonal_(1.0)
    return adj


def test_scale_features():
    x = torch.tensor([[1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])
    assert torch.equal(
        scale_features(x, 'row'),
        torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]]),
    )
    assert torch.equal(scale_features(x, 'raw'), x)
    with pytest.raises(ValueError, match="'features' must be one of"):
        scale_features(x, 'l1')


def _reference_step(ref, adj, propagation, temperature):
    # One propagation step in float64: the (attention-)weighted mean over
    # the node and its neighbours.
    if propagation == 'mean':
        weight = adj
    else:
        unit = torch.nn.functional.normalize(ref, dim=1)
        weight = adj * torch.exp(temperature * unit @ unit.t())
    return (weight / weight.sum(1, keepdim=True)) @ ref


@pytest.mark.parametrize('propagation', ['none', 'mean', 'attention'])
def test_propagation_matches_float64_reference(tiny, propagation):
    _, nodes = tiny
    x = scale_features(nodes.data.x, 'row')
    out = propagate_features(
        x, nodes.data.edge_index, propagation, hops=2, temperature=5.0
    )
    adj = _dense_graph(nodes.data.edge_index, x.size(0))
    ref = x.double()
    if propagation != 'none':
        for _ in range(2):
            ref = _reference_step(ref, adj, propagation, 5.0)
    assert torch.allclose(out.double(), ref, atol=1e-6)


@pytest.mark.parametrize('propagation', ['mean', 'attention'])
def test_hop_features_match_float64_reference(tiny, propagation):
    _, nodes = tiny
    x = scale_features(nodes.data.x, 'row')
    out = hop_features(
        x, nodes.data.edge_index, propagation, hops=3, temperature=5.0
    )
    assert out.shape == (4,) + tuple(x.shape)
    assert torch.equal(out[0], x)
    adj = _dense_graph(nodes.data.edge_index, x.size(0))
    ref = x.double()
    for k in range(1, 4):
        ref = _reference_step(ref, adj, propagation, 5.0)
        assert torch.allclose(out[k].double(), ref, atol=1e-6), k
    with pytest.raises(
        ValueError,
        match="'propagation' must be one of "
        'mean, attention to score at several hops',
    ):
        hop_features(x, nodes.data.edge_index, 'none')


def test_combine_hop_scores_matches_float64_reference():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(
        3, 5, 4, generator=gen, dtype=torch.double, requires_grad=True
    )
    offsets = torch.randn(
        3, 4, generator=gen, dtype=torch.double, requires_grad=True
    )
    out = combine_hop_scores(scores, offsets)
    ref = torch.zeros(5, 4, dtype=torch.double)
    for k in range(3):
        for i in range(5):
            for c in range(4):
                ref[i, c] += (scores[k, i, c] - offsets[k, c]).item() / 3
    assert torch.allclose(out, ref, atol=1e-12)
    assert torch.allclose(combine_hop_scores(scores), scores.mean(0))
    # Gradient: d out[i, c] / d scores[k, i, c] = 1 / 3, and -1 / 3 summed
    # over the nodes for the offsets.
    out.sum().backward()
    assert torch.allclose(scores.grad, torch.full_like(scores, 1 / 3))
    assert torch.allclose(offsets.grad, torch.full_like(offsets, -5 / 3))
    assert torch.autograd.gradcheck(combine_hop_scores, (scores, offsets))
    scales = torch.rand(3, 4, generator=gen, dtype=torch.double) + 0.5
    ref = sum((scores[k] - offsets[k]) / scales[k] for k in range(3)) / 3
    assert torch.allclose(
        combine_hop_scores(scores, offsets, scales), ref, atol=1e-12
    )
    scales.requires_grad_()
    assert torch.autograd.gradcheck(
        combine_hop_scores, (scores, offsets, scales)
    )
    with pytest.raises(ValueError, match="'scales' must be positive"):
        combine_hop_scores(scores, offsets, -scales)
    with pytest.raises(ValueError, match="'scores' must be"):
        combine_hop_scores(scores[0])
    with pytest.raises(ValueError, match="'offsets' must be"):
        combine_hop_scores(scores, offsets[:2])


def test_prepare_descriptions():
    s = torch.randn(7, 12, generator=torch.Generator().manual_seed(0)) + 5
    for kind in ('l2', 'center', 'whiten'):
        out = prepare_descriptions(s, kind)
        assert torch.allclose(out.norm(dim=1), torch.ones(7), atol=1e-6)
    centred = s.double() - s.double().mean(0)
    unit = torch.nn.functional.normalize(centred, dim=1)
    assert torch.allclose(
        prepare_descriptions(s, 'center').double(), unit, atol=1e-6
    )
    # Whitened in their span: C - 1 coordinates, all pairs at cosine
    # -1 / (C - 1) (the vertices of a regular simplex).
    white = prepare_descriptions(s, 'whiten').double()
    assert white.shape == (7, 6)
    gram = white @ white.t()
    off = gram[~torch.eye(7, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, -1 / 6), atol=1e-6)
    with pytest.raises(ValueError, match="'descriptions' must be one of"):
        prepare_descriptions(s, 'pca')


def test_node_metrics_flags_a_constant_predictor():
    target = torch.tensor([4, 4, 4, 5, 6, 6])
    classes = torch.tensor([4, 5, 6])
    metrics = node_metrics(torch.full_like(target, 4), target, classes)
    assert metrics['acc'] == pytest.approx(50.0)
    assert metrics['floor'] == pytest.approx(50.0)
    assert metrics['balanced'] == pytest.approx(100 / 3)
    assert metrics['predicted_classes'] == 1
    assert node_metrics(target, target, classes)['balanced'] == 100.0


def test_bad_setting():
    with pytest.raises(ValueError, match="'propagation' must be one of"):
        NodeSetting(propagation='gcn')
    with pytest.raises(ValueError, match="'hops' must be a positive"):
        NodeSetting(hops=0)
    with pytest.raises(ValueError, match="'lr' must be positive"):
        NodeSetting().replace(lr=0.0)
    with pytest.raises(
        ValueError, match="'scoring'='hops' needs a propagation"
    ):
        NodeSetting(propagation='none')
    with pytest.raises(ValueError, match="'calibration' must be one of"):
        NodeSetting(calibration='zscore')
    with pytest.raises(ValueError, match="'scoring' must be one of"):
        NodeSetting(scoring='all')
    with pytest.raises(ValueError, match="'candidates' must be one of"):
        NodeSetting(candidates='unseen')


def test_selection_grid_changes_one_choice_at_a_time():
    grid = selection_grid()
    assert len({s.key() for s in grid}) == len(grid) >= 8
    assert any(s.config.graph == 'learned' for s in grid)
    assert {s.propagation for s in grid} == {'none', 'mean', 'attention'}
    assert {s.calibration for s in grid} >= {'none', 'center'}
    assert {s.scoring for s in grid} == {'single', 'hops'}
    assert {s.candidates for s in grid} == {'seen', 'all'}
    heads = [s for s in grid if s.config.interaction == 'multiplicative']
    assert {(s.candidates, s.calibration) for s in heads} == {
        ('seen', 'center'),
        ('all', 'none'),
    }
    # Named where it is not the paper's additive head.
    assert all('interaction=multiplicative' in s.describe() for s in heads)
    assert 'interaction' not in grid[0].describe()


def test_hop_task_and_calibrated_scores(tiny):
    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', TINY)
    n = nodes.data.y.numel()
    hops = hop_features(
        scale_features(nodes.data.x, 'row'),
        nodes.data.edge_index,
        'mean',
        TINY.hops,
    )
    # Image k N + i is node i after k steps, with node i's label; training
    # draws every hop of the seen classes' nodes.
    assert task.num_hops == TINY.hops + 1
    assert torch.equal(task.dataset.features, hops.flatten(0, 1))
    assert torch.equal(task.dataset.labels, nodes.data.y.repeat(TINY.hops + 1))
    assert (
        task.dataset.trainval_loc.numel()
        == (TINY.hops + 1) * task.seen_nodes.numel()
    )
    assert torch.equal(
        task.dataset.trainval_loc % n, task.seen_nodes.repeat(TINY.hops + 1)
    )
    model, _ = train_node_model(task, seed=0, epochs=1)
    every = torch.arange(n)
    classes = split.unseen
    calibrated = NodeScores(model, task)(every, classes).double()
    # Centred: every class's calibrated score has mean 0 over the nodes.
    zero = torch.zeros(3, dtype=torch.double)
    assert torch.allclose(calibrated.mean(0), zero, atol=1e-5)
    # Against the model's plain logits at each hop, in float64.
    apnet = apnet_score_fn(model, task.dataset)
    ref = torch.zeros(n, 3, dtype=torch.double)
    for k in range(TINY.hops + 1):
        logits = apnet(every + k * n, classes).double()
        ref += (logits - logits.mean(0)) / (TINY.hops + 1)
    assert torch.allclose(calibrated, ref, atol=1e-4)
    plain = NodeTask(nodes, split, 'text', TINY.replace(calibration='none'))
    uncalibrated = NodeScores(model, plain)(every[:5], classes).double()
    mean_logits = sum(
        apnet(every[:5] + k * n, classes).double()
        for k in range(TINY.hops + 1)
    ) / (TINY.hops + 1)
    assert torch.allclose(uncalibrated, mean_logits, atol=1e-5)
    standard = NodeTask(
        nodes, split, 'text', TINY.replace(calibration='standardize')
    )
    standardized = NodeScores(model, standard)(every, classes).double()
    ref = torch.zeros(n, 3, dtype=torch.double)
    for k in range(TINY.hops + 1):
        logits = apnet(every + k * n, classes).double()
        ref += (logits - logits.mean(0)) / logits.std(0) / (TINY.hops + 1)
    assert torch.allclose(standardized, ref, atol=1e-3)


def test_task_and_deterministic_training(tiny):
    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', TINY)
    y = nodes.data.y
    assert set(y[task.seen_nodes].tolist()) == {0, 1}
    assert set(y[task.val_nodes].tolist()) == {2, 3}
    assert set(y[task.unseen_nodes].tolist()) == {4, 5, 6}
    first, _ = train_node_model(task, seed=3, epochs=2)
    second, _ = train_node_model(task, seed=3, epochs=2)
    for (name, a), (_, b) in zip(
        first.state_dict().items(), second.state_dict().items()
    ):
        assert torch.equal(a, b), name


def test_training_against_every_class(tiny, monkeypatch):
    # candidates='all': the seen nodes are scored against every other
    # class too, validation and unseen alike; never a node of theirs.
    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', TINY.replace(candidates='all'))
    calls = []
    train_model = nodes_train.train_model

    def recording(model, data, images, classes, config, **kwargs):
        calls.append((images, classes, kwargs['negative_classes']))
        return train_model(model, data, images, classes, config, **kwargs)

    monkeypatch.setattr(nodes_train, 'train_model', recording)
    train_node_model(task, seed=0, epochs=1)
    ((images, classes, negatives),) = calls
    assert torch.equal(classes, split.seen)
    assert torch.equal(negatives, torch.cat([split.val, split.unseen]))
    assert set(nodes.data.y[images % nodes.data.y.numel()].tolist()) == set(
        split.seen.tolist()
    )
    assert 'candidates=all' in task.setting.describe()


def _relabel_unseen(nodes):
    # The unseen classes' labels permuted among themselves.
    y = nodes.data.y.clone()
    unseen = y >= 4
    y[unseen] = 4 + (y[unseen] - 4 + 1) % 3
    changed = type(nodes)(
        nodes.name,
        nodes.data.clone(),
        nodes.class_names,
        nodes.descriptions,
        nodes.files,
    )
    changed.data.y = y
    return changed


@pytest.mark.parametrize('selection', ['split', 'folds'])
def test_choices_never_read_unseen_labels(tiny, selection):
    _, nodes = tiny
    changed = _relabel_unseen(nodes)
    split = nodes.split('II')
    folds = selection_folds(split) if selection == 'folds' else None
    first = eszsl_nodes(nodes, 'text', DGPN_INPUTS, [split], folds=folds)
    second = eszsl_nodes(changed, 'text', DGPN_INPUTS, [split], folds=folds)
    assert (first['gamma'], first['lam'], first['val_balanced']) == (
        second['gamma'],
        second['lam'],
        second['val_balanced'],
    )
    first = sae_nodes(nodes, 'text', DGPN_INPUTS, [split], folds)
    second = sae_nodes(changed, 'text', DGPN_INPUTS, [split], folds)
    assert (first['lam'], first['space'], first['val_balanced']) == (
        second['lam'],
        second['space'],
        second['val_balanced'],
    )
    grid = [TINY, TINY.replace(lr=1e-3)]
    quiet = lambda line: None  # noqa: E731
    first = select_setting(nodes, 'text', grid, [0], quiet, folds)
    second = select_setting(changed, 'text', grid, [0], quiet, folds)
    assert [r['val_balanced'] for r in first['rows']] == [
        r['val_balanced'] for r in second['rows']
    ]
    assert first['chosen']['epochs'] == second['chosen']['epochs']


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


def test_closed_form_choice_on_split_ii_is_the_validated_fit(tiny):
    # One fold (Split II): the choice of fit_eszsl_validated and
    # fit_sae_validated, which score the same grid on the same classes.
    from apnet_pyg.zsl.baselines.eszsl import fit_eszsl_validated
    from apnet_pyg.zsl.baselines.sae import fit_sae_validated
    from apnet_pyg.zsl.nodes.protocol import ESZSL_GRID

    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', DGPN_INPUTS)
    arguments = dict(
        features=task.features.double(),
        labels=nodes.data.y,
        attributes=task.descriptions.double(),
        train_classes=split.seen,
        train_images=task.seen_nodes,
        val_classes=split.val,
        val_images=task.val_nodes,
        refit_classes=split.seen,
        refit_images=task.seen_nodes,
    )
    _, gamma, lam, accuracy = fit_eszsl_validated(**arguments, grid=ESZSL_GRID)
    eszsl = eszsl_nodes(nodes, 'text', DGPN_INPUTS, [split])
    assert (eszsl['gamma'], eszsl['lam']) == (gamma, lam)
    assert eszsl['val_balanced'] == pytest.approx(accuracy, abs=1e-9)
    _, lam, space, accuracy = fit_sae_validated(**arguments)
    sae = sae_nodes(nodes, 'text', DGPN_INPUTS, [split])
    assert (sae['lam'], sae['space']) == (lam, space)
    assert sae['val_balanced'] == pytest.approx(accuracy, abs=1e-9)


def test_select_setting_over_folds_averages_every_fold(tiny, monkeypatch):
    # A run per fold and seed, the curve the mean of them all.
    import apnet_pyg.zsl.nodes.protocol as nodes_module

    _, nodes = tiny
    folds = selection_folds(nodes.split('II'))
    seen = []

    def curve(task, seed, device='cpu'):
        seen.append((tuple(task.split.seen.tolist()), seed))
        return [float(len(seen)), 0.0]

    monkeypatch.setattr(nodes_module, 'validation_curve', curve)
    result = select_setting(
        nodes, 'text', [TINY], [0, 1], lambda line: None, folds
    )
    assert seen == [(tuple(f.seen.tolist()), s) for f in folds for s in (0, 1)]
    assert result['chosen']['epochs'] == 1
    assert result['chosen']['val_balanced'] == pytest.approx(6.5)


def test_run_nodes_table(tiny):
    _, nodes = tiny
    splits = [nodes.split('I'), nodes.split('II')]
    results = run_nodes(
        nodes,
        splits,
        ['text'],
        seeds=[0, 1],
        selection_seeds=[0],
        base=TINY,
        grid=[
            TINY,
            TINY.replace(graph='learned'),
            TINY.replace(calibration='none'),
            TINY.replace(candidates='all'),
        ],
        log=lambda line: None,
    )
    rows = results['csds']['text']['rows']
    assert [row['method'] for row in rows] == [
        'APNet (chosen)',
        'APNet (best with the other class graph)',
        'APNet (best with the other calibration)',
        'APNet (best with the other candidates)',
        "APNet (DGPN's training, fixed in advance)",
        "ESZSL (DGPN's inputs)",
        "SAE (DGPN's inputs)",
        "ESZSL (APNet's inputs)",
    ]
    assert rows[0]['splits']['I']['seeds'] == 2
    # The fixed row: DGPN's training, not chosen, the base's epochs.
    fixed_row = rows[4]
    assert fixed_row['val_balanced'] is None
    assert fixed_row['epochs'] == TINY.config.epochs
    assert (
        'candidates=all' in fixed_row['setting']
        and 'interaction=multiplicative' in fixed_row['setting']
        and 'calibration=none' in fixed_row['setting']
    )
    table = format_nodes(results)
    assert "chosen on Split II's validation classes" in table
    assert 'constant predictor (largest unseen class)' in table
    # 4 unseen classes in split I, 3 in split II: a constant predictor's
    # balanced accuracy.
    assert '| 25.00 |' in table and '| 33.33 |' in table
    folds = run_nodes(
        nodes,
        splits[:1],
        ['text'],
        seeds=[0],
        selection_seeds=[0],
        base=TINY,
        grid=[TINY],
        selection='folds',
        log=lambda line: None,
    )
    assert (
        'class-level cross-validation' in folds['selection']
        and '6 folds' in folds['selection']
    )
    assert 'class-level cross-validation' in format_nodes(folds)
    with pytest.raises(ValueError, match="'selection' must be one of"):
        run_nodes(nodes, splits[:1], ['text'], selection='test')
    fixed = run_nodes(
        nodes,
        splits[:1],
        ['text'],
        seeds=[0],
        base=TINY,
        select=False,
        log=lambda line: None,
    )
    assert 'fixed in advance' in format_nodes(fixed)
    assert len(fixed['csds']['text']['rows']) == 2


def test_published_rows_are_printed_for_cora():
    results = {
        'dataset': 'cora',
        'splits': {'I': 'split I: ...'},
        'num_unseen': {'I': 4},
        'seeds': [0],
        'selection': 'fixed in advance',
        'csds': {
            'text': {
                'rows': [],
                'floor': {'I': 28.53},
                'published': {
                    'I': {'ESZSL': (27.35, 0.0), 'DGPN': (33.78, 0.28)}
                },
            }
        },
    }
    table = format_nodes(results)
    assert '| DGPN (published) | 33.78 ± 0.28 |' in table
    assert '| ESZSL (published) | 27.35 ± 0.00 |' in table


def test_command_smoke(tiny, tmp_path, capsys):
    root, _ = tiny
    out = tmp_path / 'nodes.json'
    status = main(
        [
            'nodes',
            '--dataset',
            'tiny',
            '--root',
            str(root),
            '--csd',
            'text',
            '--seeds',
            '2',
            '--selection-seeds',
            '1',
            '--epochs',
            '2',
            '--episodes',
            '2',
            '--out',
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert 'APNet (chosen)' in printed and out.is_file()
    assert "ESZSL (DGPN's inputs)" in printed
    status = main(
        [
            'nodes',
            '--dataset',
            'tiny',
            '--root',
            str(root),
            '--csd',
            'text',
            '--split',
            'II',
            '--seeds',
            '1',
            '--selection-seeds',
            '1',
            '--selection',
            'folds',
            '--epochs',
            '1',
            '--episodes',
            '1',
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert 'class-level cross-validation' in printed


@pytest.mark.parametrize(
    'extra, message',
    [
        (
            ['--split', 'I', '--seen', '0', '1', '--unseen', '2', '3'],
            'not both',
        ),
        (['--seeds', '0'], '--seeds must be at least 1'),
        (['--seen', '0', '--unseen', '2', '3'], "'seen' needs at least 2"),
    ],
)
def test_command_bad_input(tiny, capsys, extra, message):
    root, _ = tiny
    status = main(['nodes', '--dataset', 'tiny', '--root', str(root)] + extra)
    assert status == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_command_names_a_missing_dataset(tmp_path, capsys):
    assert main(['nodes', '--dataset', 'cora', '--root', str(tmp_path)]) == 1
    assert 'no dataset folder' in capsys.readouterr().err


def test_docs_page_shows_the_current_command():
    import importlib.util

    path = REPO / 'scripts' / 'zero_shot_nodes_results.py'
    spec = importlib.util.spec_from_file_location('nodes_results', path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    page = (REPO / 'docs' / 'zero-shot-nodes.md').read_text()
    # A block per selection, each the output of its command as it stands.
    for selection, (_, begin, end) in script.BLOCKS.items():
        block = script._block(page, selection)
        assert block.startswith(begin) and block.endswith(end)
        assert f'`{script.command_line(selection)}`' in block
    # The page's prose is the script's, as it stands.
    assert page.startswith(script.INTRO + '\n' + script.BEGIN)
    assert script.FOLDS_INTRO + '\n' + script.BLOCKS['folds'][1] in page


def _script(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, REPO / 'scripts' / f'{name}.py'
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_dgpn_ablation_terms_sum_to_the_lazy_walk(tiny):
    # The K + 1 terms add up to (beta I + (1 - beta) A_hat)^K X, A_hat the
    # symmetrically normalised adjacency with self-loops (float64, dense).
    script = _script('dgpn_training_ablation')
    _, nodes = tiny
    x = scale_features(nodes.data.x, 'row').double()
    terms = script.lazy_walk_terms(x, nodes.data.edge_index, 3, 0.7)
    n = x.size(0)
    adjacency = _dense_graph(nodes.data.edge_index, n)  # with self-loops
    scale = adjacency.sum(1).rsqrt()
    walk = (
        0.7 * torch.eye(n, dtype=torch.float64)
        + 0.3 * scale[:, None] * adjacency * scale[None, :]
    )
    torch.testing.assert_close(
        torch.stack(terms).sum(0), torch.linalg.matrix_power(walk, 3) @ x
    )
    torch.testing.assert_close(terms[0], 0.7**3 * x)


def test_dgpn_ablation_smoke(tiny, tmp_path, capsys):
    script = _script('dgpn_training_ablation')
    root, _ = tiny
    out = tmp_path / 'page.md'
    assert (
        script.main(
            [
                '--root',
                str(root),
                '--dataset',
                'tiny',
                '--seeds',
                '2',
                '--epochs',
                '3',
                '--out',
                str(out),
            ]
        )
        == 0
    )
    page = out.read_text()
    assert page.count('| I |') == 4 and page.count('| II |') == 4
    assert 'every class (DGPN)' in page and '--epochs 3' in page
    # Validation balanced accuracy where the split has validation classes.
    for line in page.splitlines():
        if line.startswith('| I |'):
            assert line.endswith('| - |')
        elif line.startswith('| II |'):
            assert re.search(r'\| \d+\.\d\d ± \d+\.\d\d \|$', line), line
    assert (
        script.main(['--root', str(tmp_path / 'missing'), '--out', str(out)])
        == 2
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and 'missing' in error[0]
    for flag in ('--seeds', '--epochs'):
        with pytest.raises(SystemExit) as exit_info:
            script.main(
                [
                    '--root',
                    str(root),
                    '--dataset',
                    'tiny',
                    flag,
                    '0',
                    '--out',
                    str(out),
                ]
            )
        assert exit_info.value.code == 2
        assert f'{flag} must be at least 1 (got 0)' in capsys.readouterr().err


def test_dgpn_ablation_page_is_the_script_output():
    page = (REPO / 'docs' / 'zero-shot-nodes-dgpn-ablation.md').read_text()
    assert '`python scripts/dgpn_training_ablation.py --dataset cora' in page
    assert page.count('| I |') == 4 and page.count('| II |') == 4
    assert 'never edited by hand' in page


def test_results_page_quotes_the_measured_tables():
    # experiments/results.md summarises the node tables by hand: every figure
    # it quotes there must be on the generated page (or the ablation's).
    results = (REPO / 'experiments' / 'results.md').read_text()
    section = results.split('## Zero-shot node classification on real data')[
        1
    ].split('\n## ')[0]
    pages = (REPO / 'docs' / 'zero-shot-nodes.md').read_text() + (
        REPO / 'docs' / 'zero-shot-nodes-dgpn-ablation.md'
    ).read_text()
    figures = re.findall(r'\d+\.\d\d', section)
    assert figures
    assert [f for f in figures if f not in pages] == []
