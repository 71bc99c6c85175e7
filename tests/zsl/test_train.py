import dataclasses
import json
import math

import pytest
import torch
from torch._dynamo.testing import CompileCounter

import apnet_pyg.zsl.step as step_module
import apnet_pyg.zsl.train as train_module
from apnet_pyg.data import load_xlsa17
from apnet_pyg.environment import describe_environment
from apnet_pyg.zsl import TrainConfig, evaluate, load_model, run, train_model
from apnet_pyg.zsl.evaluate import class_graph_edges
from apnet_pyg.zsl.factory import build_model, make_optimizer, make_sampler
from apnet_pyg.zsl.metrics import ROWS
from apnet_pyg.zsl.reporting.tables import SIMULATED_LABEL
from apnet_pyg.zsl.rundir import load_run, run_dataset
from apnet_pyg.zsl.step import TrainStep, adam_update
from apnet_pyg.zsl.train import (
    TrainingDiverged,
    ValidationEpisodeWarning,
    select_epochs,
    select_on_validation,
)
from tests.helpers.host_sync import HostSync, no_host_sync
from tests.helpers.zsl import TINY, corrupt_test_labels


@pytest.fixture(scope='module')
def tiny(tiny_root):
    return load_xlsa17(tiny_root, 'TINY', attributes='percent')


def test_run_end_to_end(tiny, tmp_path):
    metrics = run(tiny, TINY, tmp_path, progress=False, data_root='x')
    saved = json.loads((tmp_path / 'metrics.json').read_text())
    for key in [
        'zsl_acc',
        'gzsl_seen',
        'gzsl_unseen',
        'gzsl_h',
        'gzsl_cal_seen',
        'gzsl_cal_unseen',
        'gzsl_cal_h',
    ]:
        assert 0.0 <= saved[key] <= 100.0
        assert saved[key] == metrics[key]
    assert saved['simulated'] is True
    assert saved['label'] == SIMULATED_LABEL
    assert saved['config'] == TINY.to_dict()
    assert saved['data_root'] == 'x'
    assert 'test_selected' not in saved  # opt-in only
    # Where it ran: a run repeats bit for bit only there.
    assert saved['environment'] == describe_environment('cpu')
    assert saved['compiled_step'] is False
    assert saved['resumed'] is False  # wall_seconds covers the whole run.
    # On what: the data's fingerprint, also written when the run started.
    assert (
        saved['data']
        == tiny.fingerprint()
        == json.loads((tmp_path / 'data.json').read_text())
    )

    # Each row reports the selection's epoch (chosen by the rule that
    # test_select_epochs_* check), and the final phase ran to the latest.
    selection = saved['model_selection']
    assert len(saved['history']) == max(saved['epochs'].values())
    for row, metric in ROWS.items():
        assert saved['epochs'][row] == selection[row]['epoch']
        assert selection[row][metric] >= 0
    assert saved['calibration'] == selection['gzsl_calibrated']['calibration']
    task = selection['validation_task']
    assert task['seen_val_images'] > 0 and task['unseen_val_images'] > 0

    # The learned graph's size before training and after every epoch; the
    # GZSL row reports its epoch's.
    edges = [h['class_graph_edges'] for h in saved['history']]
    assert all(isinstance(n, int) and n >= 0 for n in edges)
    assert saved['class_graph_edges'] == edges[saved['epochs']['gzsl'] - 1]
    fresh = build_model(TINY, tiny, tiny.seen_classes)
    assert saved['class_graph_edges_initial'] == class_graph_edges(fresh, tiny)

    # The saved models reproduce the metrics:
    model = load_model(tmp_path, 'zsl')
    assert evaluate(model, tiny)['zsl_acc'] == pytest.approx(
        metrics['zsl_acc']
    )
    calibrated = evaluate(
        load_model(tmp_path, 'gzsl_calibrated'), tiny, saved['calibration']
    )
    assert calibrated['gzsl_cal_h'] == pytest.approx(metrics['gzsl_cal_h'])


def test_select_epochs_takes_each_rows_earliest_best_epoch():
    history = [
        {
            'epoch': 1,
            'loss': 3.0,
            'val_zsl_acc': 40.0,
            'val_gzsl_h': 10.0,
            'val_gzsl_cal_h': 50.0,
            'val_calibration': 1.5,
        },
        {
            'epoch': 2,
            'loss': 2.0,
            'val_zsl_acc': 60.0,
            'val_gzsl_h': 20.0,
            'val_gzsl_cal_h': 45.0,
            'val_calibration': 2.5,
        },
        {
            'epoch': 3,
            'loss': 1.0,
            'val_zsl_acc': 55.0,
            'val_gzsl_h': 30.0,
            'val_gzsl_cal_h': 50.0,
            'val_calibration': 3.5,
        },
        {
            'epoch': 4,
            'loss': 0.5,
            'val_zsl_acc': 60.0,
            'val_gzsl_h': 25.0,
            'val_gzsl_cal_h': 40.0,
            'val_calibration': 4.5,
        },
    ]
    selection = select_epochs(history)
    # ZSL: 60 at epochs 2 and 4, the earliest wins; H: 30 at epoch 3;
    # calibrated H: 50 at epochs 1 and 3, with epoch 1's constant.
    assert {row: selection[row]['epoch'] for row in ROWS} == {
        'zsl': 2,
        'gzsl': 3,
        'gzsl_calibrated': 1,
    }
    assert selection['gzsl_calibrated']['calibration'] == 1.5
    assert selection['zsl'] == {
        key: value for key, value in history[1].items() if key != 'loss'
    }


def test_select_on_validation_selects_from_its_history(tiny, tmp_path):
    selection, history = select_on_validation(
        tiny, TINY, tmp_path, progress=False
    )
    assert [h['epoch'] for h in history] == list(range(1, TINY.epochs + 1))
    for row, metric in ROWS.items():
        values = [h[metric] for h in history]
        best = history[values.index(max(values))]
        assert selection[row]['epoch'] == best['epoch']
        assert selection[row][metric] == best[metric]
    assert (
        selection['gzsl_calibrated']['calibration']
        == history[selection['gzsl_calibrated']['epoch'] - 1][
            'val_calibration'
        ]
    )


def test_selection_never_reads_test_labels(tiny, tmp_path):
    # The selection (epochs and calibration constant, with every
    # validation metric behind them) is the same when the test labels are
    # wrong: it never read them. The test metrics are not.
    config = TINY.replace(epochs=2)
    honest = run(tiny, config, tmp_path / 'a', progress=False)
    corrupt = run(
        corrupt_test_labels(tiny), config, tmp_path / 'b', progress=False
    )
    assert corrupt['model_selection'] == honest['model_selection']
    assert corrupt['epochs'] == honest['epochs']
    assert corrupt['calibration'] == honest['calibration']
    test_metrics = [
        'zsl_acc',
        'gzsl_seen',
        'gzsl_unseen',
        'gzsl_cal_seen',
        'gzsl_cal_unseen',
    ]
    assert [corrupt[key] for key in test_metrics] != [
        honest[key] for key in test_metrics
    ]
    # It learned (chance: 10% among the 10 classes), so wrong labels tell:
    assert honest['gzsl_seen'] > 25


def test_test_selected_report_is_labelled(tiny, tmp_path):
    metrics = run(
        tiny, TINY.replace(report_test_selected=True), tmp_path, progress=False
    )
    selected = metrics['test_selected']
    assert selected['label'] == 'test-set selected (optimistic)'
    tested = {h['epoch']: h['test'] for h in metrics['history']}
    # Every epoch of the schedule, as the authors did, not only up to the
    # validation-selected ones:
    assert sorted(tested) == list(range(1, TINY.epochs + 1))
    assert selected['gzsl_h'] == max(t['gzsl_h'] for t in tested.values())
    # It chose nothing: the validation-selected rows are as without it.
    plain = run(tiny, TINY, tmp_path / 'plain', progress=False)
    for key in ['zsl_acc', 'gzsl_h', 'gzsl_cal_h', 'epochs']:
        assert metrics[key] == plain[key]


@pytest.mark.filterwarnings('ignore::apnet_pyg.zsl.train.NotLearningWarning')
@pytest.mark.parametrize(
    'graph,training',
    [
        ('learned', 'episodic'),
        ('wordnet', 'episodic'),
        ('none', 'minibatch'),
        ('learned', 'minibatch'),
    ],
)
def test_training_is_deterministic(tiny, graph, training):
    config = TINY.replace(
        graph=graph, training=training, iterations_per_epoch=5
    )
    states = []
    for _ in range(2):
        model = build_model(config, tiny, tiny.seen_classes)
        history = train_model(
            model,
            tiny,
            tiny.trainval_loc,
            tiny.seen_classes,
            config,
            epochs=2,
            progress=False,
        )
        states.append((model.state_dict(), history))
    (first, history1), (second, history2) = states
    assert [h['loss'] for h in history1] == [h['loss'] for h in history2]
    for key in first:
        assert torch.equal(first[key], second[key]), key


@pytest.mark.parametrize('training', ['episodic', 'minibatch'])
def test_resume_continues_exactly(tiny, tmp_path, training):
    # Mini-batches: 7 batches of 4 images per epoch do not divide the 60
    # training images, so the interruption falls mid-pass.
    config = TINY.replace(iterations_per_epoch=7, training=training)
    checkpoint = tmp_path / 'checkpoint.pt'
    images, classes = tiny.trainval_loc, tiny.seen_classes

    straight = build_model(config, tiny, classes)
    train_model(straight, tiny, images, classes, config, progress=False)

    interrupted = build_model(config, tiny, classes)
    train_model(
        interrupted,
        tiny,
        images,
        classes,
        config,
        epochs=1,
        checkpoint=checkpoint,
        progress=False,
    )
    resumed = build_model(config, tiny, classes)
    history = train_model(
        resumed,
        tiny,
        images,
        classes,
        config,
        checkpoint=checkpoint,
        resume=True,
        progress=False,
    )
    assert [h['epoch'] for h in history] == [1, 2, 3]
    for key, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[key]), key

    with pytest.raises(ValueError, match='another configuration'):
        train_model(
            build_model(config, tiny, classes),
            tiny,
            images,
            classes,
            config.replace(lr=0.5),
            checkpoint=checkpoint,
            resume=True,
            progress=False,
        )
    # The checkpoint now holds 3 epochs: resuming it for 2 would return the
    # third epoch's model and history as the second's.
    with pytest.raises(
        ValueError,
        match='saved after epoch 3, past the 2 '
        'epochs asked for: resume with epochs >= 3',
    ):
        train_model(
            build_model(config, tiny, classes),
            tiny,
            images,
            classes,
            config,
            epochs=2,
            checkpoint=checkpoint,
            resume=True,
            progress=False,
        )


TIMING = (
    'wall_seconds',
    'peak_rss_mb',
    'ms_per_episode',
    'episodes_per_second',
    'resumed',
)


def without_timing(value):
    if isinstance(value, dict):
        return {
            key: without_timing(item)
            for key, item in value.items()
            if key not in TIMING
        }
    if isinstance(value, list):
        return [without_timing(item) for item in value]
    return value


# validate: once per selection epoch; class_graph_edges: once before the
# final phase, then once per final epoch (all three with the test-selected
# report; else only up to the latest selected epoch, which may be the first).
@pytest.mark.parametrize(
    'name, call, config',
    [
        ('validate', 2, TINY),
        ('class_graph_edges', 3, TINY.replace(report_test_selected=True)),
    ],
)
def test_interrupted_run_resumes_to_the_same_result(
    tiny, tmp_path, monkeypatch, name, call, config
):
    whole = run(tiny, config, tmp_path / 'whole', progress=False)
    assert whole['resumed'] is False

    # Interrupted at the end of the second epoch of a phase (the first's
    # checkpoint is on disk), then resumed:
    original = getattr(train_module, name)
    calls = []

    def interrupting(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(train_module, name, interrupting)
    with pytest.raises(KeyboardInterrupt):
        run(tiny, config, tmp_path / 'cut', progress=False)
    monkeypatch.undo()
    resumed = run(tiny, config, tmp_path / 'cut', resume=True, progress=False)
    assert resumed['resumed'] is True
    assert without_timing(resumed) == without_timing(whole)
    # The selected models, and both phases' last states (the selection
    # phase's history is in its checkpoint only).
    for path in (tmp_path / 'whole').glob('*.pt'):
        saved = torch.load(path, weights_only=False)
        again = torch.load(tmp_path / 'cut' / path.name, weights_only=False)
        weights = 'state_dict' if 'state_dict' in saved else 'model'
        for key, value in saved[weights].items():
            assert torch.equal(value, again[weights][key]), (path, key)
        if 'history' in saved:
            assert without_timing(saved['history']) == without_timing(
                again['history']
            )


def test_resume_with_another_configuration_keeps_config_json(tiny, tmp_path):
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    (run_dir / 'config.json').write_text(json.dumps(TINY.to_dict()))
    (run_dir / 'selection.pt').write_bytes(b'')  # an interrupted run
    with pytest.raises(
        ValueError,
        match=r"config.json' was written with "
        r'another configuration \(differs in: lr\)',
    ):
        run(tiny, TINY.replace(lr=0.5), run_dir, resume=True, progress=False)
    # Still the configuration of the checkpoints:
    assert json.loads((run_dir / 'config.json').read_text()) == TINY.to_dict()


def test_data_differences_reads_earlier_records(tiny):
    from apnet_pyg.zsl.rundir import data_differences

    fingerprint = tiny.fingerprint()
    assert data_differences(fingerprint, fingerprint) == []
    assert data_differences({}, fingerprint) == sorted(fingerprint)
    assert data_differences(None, fingerprint) == sorted(fingerprint)
    # A record from before each split list had its own checksum: one
    # checksum of the lists joined, no class splits. The rest is compared.
    earlier = {**fingerprint, 'splits': '0123abcd'}
    del earlier['class_splits']
    assert data_differences(earlier, fingerprint) == []
    earlier['features'] = '00000000'
    assert data_differences(earlier, fingerprint) == ['features']
    del earlier['attributes']
    assert data_differences(earlier, fingerprint) == ['attributes', 'features']


def test_resume_or_evaluate_on_other_data_is_refused(
    tiny, tiny_root, tmp_path
):
    other = dataclasses.replace(tiny, features=tiny.features + 1.0)
    assert other.fingerprint() != tiny.fingerprint()
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    (run_dir / 'config.json').write_text(json.dumps(TINY.to_dict()))
    (run_dir / 'data.json').write_text(json.dumps(tiny.fingerprint()))
    (run_dir / 'selection.pt').write_bytes(b'')  # an interrupted run
    with pytest.raises(
        ValueError,
        match=r"data.json': the run was started "
        r'on other data \(differs in: features\); resume '
        r'with the --root',
    ):
        run(other, TINY, run_dir, resume=True, progress=False)
    assert (
        json.loads((run_dir / 'data.json').read_text()) == tiny.fingerprint()
    )

    # A finished run, evaluated on other data than it was trained on:
    finished = tmp_path / 'finished'
    run(
        tiny,
        TINY.replace(epochs=1, lr_decay_epoch=1),
        finished,
        progress=False,
        data_root=str(tiny_root),
    )
    saved = json.loads((finished / 'metrics.json').read_text())
    run_dataset(finished, saved)  # its own data: fine
    saved['data']['labels'] = '00000000'
    with pytest.raises(
        ValueError,
        match=r'is not the data the run in '
        r'.* was trained on \(differs in: labels\): pass '
        r'the folder it was trained on',
    ):
        run_dataset(finished, saved)


def test_episodes_per_epoch():
    paper = TrainConfig()
    assert paper.episodes_per_epoch(23527) == 23527 // 30 == 784
    authors = paper.replace(epoch_length='authors')
    assert authors.episodes_per_epoch(23527) == 800  # (784 // 100 + 1) * 100
    assert paper.replace(iterations_per_epoch=7).episodes_per_epoch(10) == 7


def test_training_needs_features_and_a_trained_run(tiny_root, tmp_path):
    data = load_xlsa17(tiny_root, 'TINY', load_features=False)
    with pytest.raises(ValueError, match='needs image features'):
        train_model(
            None, data, torch.arange(3), torch.arange(2), TINY, progress=False
        )
    with pytest.raises(FileNotFoundError, match='No metrics.json'):
        load_model(tmp_path)


def test_validation_episodes_are_capped_with_a_warning(tiny, tmp_path):
    # TINY's validation task trains on 4 classes (trainclasses1): 5-way
    # episodes there are 4-way, said and recorded; the final phase has 6.
    with pytest.warns(ValidationEpisodeWarning, match='4-way'):
        metrics = run(
            tiny, TINY.replace(n_way=5, epochs=1), tmp_path, progress=False
        )
    assert metrics['model_selection']['validation_task']['n_way'] == 4
    assert metrics['config']['n_way'] == 5


def test_load_run(tiny_root, tiny, tmp_path):
    run(
        tiny,
        TINY.replace(epochs=1, model_selection='none'),
        tmp_path,
        progress=False,
    )
    with pytest.raises(ValueError, match='does not say where'):
        load_run(tmp_path)  # No data_root recorded, none given.
    saved, data = load_run(tmp_path, tiny_root)
    assert saved['dataset'] == 'TINY'
    assert torch.equal(data.attributes, tiny.attributes)  # the run's kind
    # A variant's configuration reads its own kind, from the recorded root.
    saved['data_root'] = str(tiny_root)
    variant = run_dataset(
        tmp_path, saved, config=TINY.replace(attributes='att')
    )
    assert torch.equal(
        variant.attributes,
        load_xlsa17(tiny_root, 'TINY', attributes='att').attributes,
    )
    assert not torch.equal(variant.attributes, tiny.attributes)
    (tmp_path / 'metrics.json').write_text('{}')
    with pytest.raises(ValueError, match='is not the metrics.json'):
        load_run(tmp_path, tiny_root)


# A training step without the host ########################################
STEP_CASES = [
    ('learned', 'episodic', 1),
    ('wordnet', 'episodic', 2),
    ('none', 'minibatch', 1),
    ('learned', 'minibatch', 1),
]


def make_step(tiny, config, iterations, dtype=torch.float32, **kwargs):
    model = build_model(config, tiny, tiny.seen_classes).to(dtype)
    sampler = make_sampler(tiny, tiny.trainval_loc, tiny.seen_classes, config)
    optimizer = make_optimizer(model, config)
    step = TrainStep(
        model,
        sampler,
        optimizer,
        tiny.features.to(dtype),
        tiny.attributes.to(dtype),
        tiny.seen_classes,
        iterations,
        **kwargs,
    )
    return model, optimizer, step


def run_epochs(step, optimizer, epochs, iterations):
    for _ in range(epochs):
        step.start_epoch()
        for i in range(iterations):
            step(i)
        for group in optimizer.param_groups:  # as a scheduler would
            group['lr'] *= 0.5


def uncompiled(monkeypatch):
    # The compiled step's function, run eagerly: what is compiled.
    monkeypatch.setattr(
        step_module, 'compile_train_step', lambda step, device: step
    )


@pytest.mark.parametrize('graph, training, k_shot', STEP_CASES)
def test_step_function_compiles_without_graph_breaks(
    tiny, monkeypatch, graph, training, k_shot
):
    # fullgraph=True fails on any graph break; one frame for every step,
    # also after the learning rate changed.
    counter = CompileCounter()
    monkeypatch.setattr(
        step_module,
        'compile_train_step',
        lambda step, device: torch.compile(
            step, backend=counter, fullgraph=True
        ),
    )
    config = TINY.replace(graph=graph, training=training, k_shot=k_shot)
    model, optimizer, step = make_step(tiny, config, 4, compile_step=True)
    run_epochs(step, optimizer, 2, 4)
    assert counter.frame_count == 1 and counter.op_count > 50
    assert math.isfinite(float(step.losses.sum()))


@pytest.mark.parametrize('graph, training, k_shot', STEP_CASES)
def test_steps_read_nothing_on_the_host(
    tiny, monkeypatch, graph, training, k_shot
):
    config = TINY.replace(graph=graph, training=training, k_shot=k_shot)
    _, _, eager = make_step(tiny, config, 3, sync_free=True)
    uncompiled(monkeypatch)
    _, _, function = make_step(tiny, config, 3, compile_step=True)
    for step in (eager, function):
        step.start_epoch()
        with no_host_sync():
            for i in range(3):
                step(i)
    # The CPU's default step reads the host (its sparse class graph):
    # the check can fail.
    if graph != 'none':
        _, _, default = make_step(tiny, config, 3)
        default.start_epoch()
        with pytest.raises(HostSync):
            with no_host_sync():
                default(0)


@pytest.mark.parametrize('training', ['episodic', 'minibatch'])
def test_compiled_step_equals_the_eager_step(tiny, monkeypatch, training):
    # The same episodes and computation: what torch.compile (AOTAutograd's
    # graphs, run by eager kernels) makes of the step equals the eager
    # step to rounding, in float64. 7 mini-batches of 4 per epoch: the
    # padded last batch of a pass is in it.
    monkeypatch.setattr(
        step_module,
        'compile_train_step',
        lambda step, device: torch.compile(
            step, backend='aot_eager', fullgraph=True
        ),
    )
    config = TINY.replace(training=training)
    results = []
    for kwargs in ({'sync_free': True}, {'compile_step': True}):
        model, optimizer, step = make_step(
            tiny, config, 7, dtype=torch.float64, **kwargs
        )
        run_epochs(step, optimizer, 2, 7)
        results.append((model, step))
    (eager, eager_step), (compiled, compiled_step) = results
    torch.testing.assert_close(
        compiled_step.losses, eager_step.losses, rtol=1e-9, atol=1e-9
    )
    assert int(compiled_step.correct) == int(eager_step.correct)
    assert compiled_step.seen == eager_step.seen
    for key, value in eager.state_dict().items():
        torch.testing.assert_close(
            compiled.state_dict()[key], value, rtol=1e-7, atol=1e-9
        )


def test_adam_update_equals_torch_adam():
    generator = torch.Generator().manual_seed(0)
    parameter = torch.nn.Parameter(
        torch.randn(50, dtype=torch.float64, generator=generator)
    )
    optimizer = torch.optim.Adam(
        [parameter], lr=1e-3, weight_decay=1e-2, fused=True
    )
    param = parameter.detach().clone()
    state = [
        [torch.zeros_like(param)],
        [torch.zeros_like(param)],
        [torch.zeros(())],
    ]
    for _ in range(5):
        grad = torch.randn(50, dtype=torch.float64, generator=generator)
        parameter.grad = grad.clone()
        optimizer.step()
        adam_update(
            [param],
            [grad],
            *state,
            lr=torch.tensor(1e-3, dtype=torch.float64),
            beta1=0.9,
            beta2=0.999,
            weight_decay=1e-2,
            eps=1e-8,
        )
    torch.testing.assert_close(
        param, parameter.detach(), rtol=1e-14, atol=1e-15
    )
    torch.testing.assert_close(
        state[0][0], optimizer.state[parameter]['exp_avg']
    )


@pytest.mark.filterwarnings('ignore::apnet_pyg.zsl.train.NotLearningWarning')
@pytest.mark.parametrize('training', ['episodic', 'minibatch'])
def test_compiled_training_is_deterministic_and_resumes(
    tiny, tmp_path, monkeypatch, training
):
    uncompiled(monkeypatch)
    config = TINY.replace(iterations_per_epoch=7, training=training)
    images, classes = tiny.trainval_loc, tiny.seen_classes
    straight = []
    for _ in range(2):
        model = build_model(config, tiny, classes)
        history = train_model(
            model,
            tiny,
            images,
            classes,
            config,
            progress=False,
            compile_step=True,
        )
        straight.append((model, history))
    checkpoint = tmp_path / 'checkpoint.pt'
    train_model(
        build_model(config, tiny, classes),
        tiny,
        images,
        classes,
        config,
        epochs=1,
        checkpoint=checkpoint,
        progress=False,
        compile_step=True,
    )
    resumed = build_model(config, tiny, classes)
    history = train_model(
        resumed,
        tiny,
        images,
        classes,
        config,
        checkpoint=checkpoint,
        resume=True,
        progress=False,
        compile_step=True,
    )
    (first, history1), (second, history2) = straight
    assert [h['loss'] for h in history1] == [h['loss'] for h in history2]
    assert [h['loss'] for h in history] == [h['loss'] for h in history1]
    for key, value in first.state_dict().items():
        assert torch.equal(second.state_dict()[key], value), key
        assert torch.equal(resumed.state_dict()[key], value), key
    # It trained: a compiled step that changed nothing would not.
    assert history1[-1]['loss'] < history1[0]['loss']


def test_divergence_is_found_at_the_next_check(tiny, monkeypatch):
    # A step without the host has its losses read every FINITE_CHECK_STEPS
    # steps: training stops at the first check after the loss turned NaN,
    # naming the step it did. (The CPU's default step is checked every
    # step: tests/zsl/test_zsl_bad_input.py, 'train_model/diverged'.)
    uncompiled(monkeypatch)
    monkeypatch.setattr(train_module, 'FINITE_CHECK_STEPS', 4)
    original = TrainStep.__call__
    steps = []

    def poisoning(self, step):
        steps.append(step)
        if step == 5:  # What a learning rate far too high leads to.
            with torch.no_grad():
                self.model.head.lin_out.bias.fill_(math.nan)
        original(self, step)

    monkeypatch.setattr(TrainStep, '__call__', poisoning)
    config = TINY.replace(model_selection='none')
    with pytest.raises(
        TrainingDiverged,
        match=r'training diverged in epoch '
        r'1, step 6: the loss is nan; lower the learning '
        r'rate \(lr=0.001\)',
    ):
        train_model(
            build_model(config, tiny, tiny.seen_classes),
            tiny,
            tiny.trainval_loc,
            tiny.seen_classes,
            config,
            progress=False,
            compile_step=True,
        )
    assert steps == list(range(8))


def test_compile_step_needs_the_dense_class_graph_and_fused_adam(
    tiny, monkeypatch
):
    uncompiled(monkeypatch)
    monkeypatch.setattr(
        step_module, 'use_dense_class_graph', lambda *args: False
    )
    with pytest.raises(
        ValueError,
        match='compile_step needs the dense '
        'class graph, for tasks of at most 1024 classes '
        '\\(this one has 4\\)',
    ):
        make_step(tiny, TINY, 3, compile_step=True)
    monkeypatch.undo()
    uncompiled(monkeypatch)
    model = build_model(TINY, tiny, tiny.seen_classes)
    sampler = make_sampler(tiny, tiny.trainval_loc, tiny.seen_classes, TINY)
    with pytest.raises(
        ValueError, match='compile_step needs the optimizer of make_optimizer'
    ):
        TrainStep(
            model,
            sampler,
            torch.optim.SGD(model.parameters(), 0.1),
            tiny.features,
            tiny.attributes,
            tiny.seen_classes,
            3,
            compile_step=True,
        )


def test_the_compile_flag_reaches_the_training(
    tiny_root, tmp_path, monkeypatch
):
    from apnet_pyg.zsl.cli import main

    calls = []

    def stopping_run(*args, **kwargs):
        calls.append(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(train_module, 'run', stopping_run)
    argv = [
        'train',
        '--dataset',
        'TINY',
        '--root',
        str(tiny_root),
        '--out',
        str(tmp_path / 'run'),
        '--no-progress',
    ]
    for flags, expected in (([], False), (['--compile'], True)):
        assert main(argv + flags) == 130
        assert calls.pop()['compile_step'] is expected


def test_compile_step_off_cuda_runs_the_eager_step_with_a_warning(tiny):
    # Inductor's CPU code is wrong or slow for this step (see
    # compile_train_step): the step without the host runs eagerly.
    with pytest.warns(
        step_module.CompileStepWarning,
        match='compile_step on cpu: the step runs uncompiled',
    ):
        _, _, step = make_step(tiny, TINY, 3, compile_step=True)
    assert step.compiled is None and step.sync_free and step.dense


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason='needs a CUDA device'
)
@pytest.mark.parametrize('graph, training, k_shot', STEP_CASES)
def test_steps_on_cuda_do_not_synchronise(tiny, graph, training, k_shot):
    # The eager step on the GPU and the compiled one (CUDA graphs): no host
    # synchronisation once captured, and the same training to rounding
    # (float64), two epochs with a change of learning rate.
    config = TINY.replace(graph=graph, training=training, k_shot=k_shot)
    results = []
    for kwargs in ({}, {'compile_step': True}):
        model = build_model(config, tiny, tiny.seen_classes).cuda().double()
        sampler = make_sampler(
            tiny, tiny.trainval_loc, tiny.seen_classes, config, 'cuda'
        )
        optimizer = make_optimizer(model, config)
        step = TrainStep(
            model,
            sampler,
            optimizer,
            tiny.features.cuda().double(),
            tiny.attributes.cuda().double(),
            tiny.seen_classes.cuda(),
            6,
            **kwargs,
        )
        assert step.sync_free and (step.dense or graph == 'none')
        assert (step.compiled is not None) == bool(kwargs)
        losses = []
        for epoch in range(2):
            step.start_epoch()
            for i in range(6):
                # The first calls compile, warm up and capture.
                checked = epoch > 0 or i >= 3
                torch.cuda.synchronize()
                torch.cuda.set_sync_debug_mode('error' if checked else 0)
                try:
                    step(i)
                finally:
                    torch.cuda.set_sync_debug_mode(0)
            losses.append(step.losses.clone())
            optimizer.param_groups[0]['lr'] *= 0.5
        results.append((model, torch.cat(losses)))
    (eager, eager_losses), (compiled, compiled_losses) = results
    # Inductor's kernels sum in another order than eager's, and Adam's
    # first steps (m / sqrt(v)) amplify last-bit differences: on an H200
    # the losses of 12 steps differed by up to 1.3e-8 relative. A wrong
    # step (another episode, a missed update or learning rate) differs by
    # orders of magnitude more.
    torch.testing.assert_close(
        compiled_losses, eager_losses, rtol=1e-6, atol=1e-8
    )
    for key, value in eager.state_dict().items():
        torch.testing.assert_close(
            compiled.state_dict()[key], value, rtol=1e-6, atol=1e-8
        )


def test_training_checks_the_data_once(tiny):
    # The steps do not read the data on the host: NaN features are refused
    # before the first one, by name.
    features = tiny.features.clone()
    features[3, 1] = math.nan
    broken = dataclasses.replace(tiny, features=features)
    with pytest.raises(
        ValueError,
        match=r"'data.features' contains NaN or "
        r'infinite values',
    ):
        train_model(
            build_model(TINY, tiny, tiny.seen_classes),
            broken,
            tiny.trainval_loc,
            tiny.seen_classes,
            TINY,
            progress=False,
        )


# Classes scored as wrong answers in every step ###########################
@pytest.mark.parametrize('training', ['episodic', 'minibatch'])
def test_negative_classes_are_scored_in_every_step(
    tiny, monkeypatch, training
):
    # The task is the step's own classes, then the negatives; the loss is
    # the cross-entropy over all of them with the targets among the first.
    negatives = tiny.unseen_classes
    config = TINY.replace(training=training)
    model, _, step = make_step(tiny, config, 2, negative_classes=negatives)
    calls = []
    forward = model.forward

    def recording(images, attributes, classes, **kwargs):
        logits = forward(images, attributes, classes, **kwargs)
        calls.append((classes, logits.detach()))
        return logits

    monkeypatch.setattr(model, 'forward', recording)
    targets = []
    cross_entropy = step_module.F.cross_entropy
    monkeypatch.setattr(
        step_module.F,
        'cross_entropy',
        lambda logits, target: (
            targets.append(target) or cross_entropy(logits, target)
        ),
    )
    step.start_epoch()
    step(0)
    ((classes, logits),) = calls
    own = config.n_way if training == 'episodic' else tiny.seen_classes.numel()
    assert torch.equal(classes[own:], negatives)
    assert not torch.isin(classes[:own], negatives).any()
    assert logits.size(1) == own + negatives.numel()
    assert int(targets[0].max()) < own
    torch.testing.assert_close(
        step.losses[0], cross_entropy(logits, targets[0])
    )


def test_compiled_step_with_negative_classes_equals_the_eager_step(
    tiny, monkeypatch
):
    monkeypatch.setattr(
        step_module,
        'compile_train_step',
        lambda step, device: torch.compile(
            step, backend='aot_eager', fullgraph=True
        ),
    )
    results = []
    for kwargs in ({'sync_free': True}, {'compile_step': True}):
        model, optimizer, step = make_step(
            tiny,
            TINY,
            3,
            dtype=torch.float64,
            negative_classes=tiny.unseen_classes,
            **kwargs,
        )
        run_epochs(step, optimizer, 1, 3)
        results.append(step)
    torch.testing.assert_close(
        results[1].losses, results[0].losses, rtol=1e-9, atol=1e-9
    )


def test_train_model_with_negative_classes(tiny):
    config = TINY.replace(epochs=1)
    model = build_model(config, tiny, tiny.seen_classes)
    history = train_model(
        model,
        tiny,
        tiny.trainval_loc,
        tiny.seen_classes,
        config,
        progress=False,
        negative_classes=tiny.unseen_classes,
    )
    assert len(history) == 1 and math.isfinite(history[0]['loss'])
    seen = tiny.seen_classes
    for negatives, message in (
        (seen[:1], 'must not hold a training class'),
        (torch.tensor([-1]), r'must be class ids in \[0, '),
        (tiny.unseen_classes[[0, 0]], 'has a class twice'),
    ):
        with pytest.raises(ValueError, match=message):
            train_model(
                model,
                tiny,
                tiny.trainval_loc,
                seen,
                config,
                progress=False,
                negative_classes=negatives,
            )
