import dataclasses
import json

import pytest
import torch

from apnet_pyg.data import load_xlsa17
import apnet_pyg.zsl.train as train_module
from apnet_pyg.zsl import TrainConfig, evaluate, load_model, run, train_model
from apnet_pyg.environment import describe_environment
from apnet_pyg.zsl.evaluate import class_graph_edges
from apnet_pyg.zsl.train import (ROWS, ValidationEpisodeWarning, build_model,
                                 load_run, run_dataset, select_epochs,
                                 select_on_validation)

TINY = TrainConfig(class_channels=32, hidden_channels=32, proj_channels=16,
                   num_centroids=2, n_way=4, lr=1e-3, epochs=3,
                   lr_decay_epoch=2, iterations_per_epoch=15,
                   seen_val_fraction=0.25)


@pytest.fixture(scope='module')
def tiny(tiny_root):
    return load_xlsa17(tiny_root, 'TINY', attributes='percent')


def test_run_end_to_end(tiny, tmp_path):
    metrics = run(tiny, TINY, tmp_path, progress=False, data_root='x')
    saved = json.loads((tmp_path / 'metrics.json').read_text())
    for key in ['zsl_acc', 'gzsl_seen', 'gzsl_unseen', 'gzsl_h',
                'gzsl_cal_seen', 'gzsl_cal_unseen', 'gzsl_cal_h']:
        assert 0.0 <= saved[key] <= 100.0
        assert saved[key] == metrics[key]
    assert saved['simulated'] is True
    assert 'simulated' in saved['label']
    assert saved['config'] == TINY.to_dict()
    assert saved['data_root'] == 'x'
    assert 'test_selected' not in saved  # opt-in only
    # Where it ran: a run repeats bit for bit only there.
    assert saved['environment'] == describe_environment('cpu')
    assert saved['resumed'] is False  # wall_seconds covers the whole run.
    # On what: the data's fingerprint, also written when the run started.
    assert saved['data'] == tiny.fingerprint() == json.loads(
        (tmp_path / 'data.json').read_text())

    # Each row reports the selection's epoch (chosen by the rule that
    # test_select_epochs_* check), and the final phase ran to the latest.
    selection = saved['model_selection']
    assert len(saved['history']) == max(saved['epochs'].values())
    for row, metric in ROWS.items():
        assert saved['epochs'][row] == selection[row]['epoch']
        assert selection[row][metric] >= 0
    assert saved['calibration'] == selection['gzsl_calibrated'][
        'calibration']
    task = selection['validation_task']
    assert task['seen_val_images'] > 0 and task['unseen_val_images'] > 0

    # The learned graph's size before training and after every epoch; the
    # GZSL row reports its epoch's.
    edges = [h['class_graph_edges'] for h in saved['history']]
    assert all(isinstance(n, int) and n >= 0 for n in edges)
    assert saved['class_graph_edges'] == edges[saved['epochs']['gzsl'] - 1]
    fresh = build_model(TINY, tiny, tiny.seen_classes)
    assert saved['class_graph_edges_initial'] == class_graph_edges(fresh,
                                                                   tiny)

    # The saved models reproduce the metrics:
    model = load_model(tmp_path, 'zsl')
    assert evaluate(model, tiny)['zsl_acc'] == pytest.approx(
        metrics['zsl_acc'])
    calibrated = evaluate(load_model(tmp_path, 'gzsl_calibrated'), tiny,
                          saved['calibration'])
    assert calibrated['gzsl_cal_h'] == pytest.approx(metrics['gzsl_cal_h'])


def test_select_epochs_takes_each_rows_earliest_best_epoch():
    history = [
        {'epoch': 1, 'loss': 3.0, 'val_zsl_acc': 40.0, 'val_gzsl_h': 10.0,
         'val_gzsl_cal_h': 50.0, 'val_calibration': 1.5},
        {'epoch': 2, 'loss': 2.0, 'val_zsl_acc': 60.0, 'val_gzsl_h': 20.0,
         'val_gzsl_cal_h': 45.0, 'val_calibration': 2.5},
        {'epoch': 3, 'loss': 1.0, 'val_zsl_acc': 55.0, 'val_gzsl_h': 30.0,
         'val_gzsl_cal_h': 50.0, 'val_calibration': 3.5},
        {'epoch': 4, 'loss': 0.5, 'val_zsl_acc': 60.0, 'val_gzsl_h': 25.0,
         'val_gzsl_cal_h': 40.0, 'val_calibration': 4.5},
    ]
    selection = select_epochs(history)
    # ZSL: 60 at epochs 2 and 4, the earliest wins; H: 30 at epoch 3;
    # calibrated H: 50 at epochs 1 and 3, with epoch 1's constant.
    assert {row: selection[row]['epoch'] for row in ROWS} == {
        'zsl': 2, 'gzsl': 3, 'gzsl_calibrated': 1}
    assert selection['gzsl_calibrated']['calibration'] == 1.5
    assert selection['zsl'] == {key: value for key, value in
                                history[1].items() if key != 'loss'}


def test_select_on_validation_selects_from_its_history(tiny, tmp_path):
    selection, history = select_on_validation(tiny, TINY, tmp_path,
                                              progress=False)
    assert [h['epoch'] for h in history] == list(range(1, TINY.epochs + 1))
    for row, metric in ROWS.items():
        values = [h[metric] for h in history]
        best = history[values.index(max(values))]
        assert selection[row]['epoch'] == best['epoch']
        assert selection[row][metric] == best[metric]
    assert selection['gzsl_calibrated']['calibration'] == \
        history[selection['gzsl_calibrated']['epoch'] - 1]['val_calibration']


def corrupt_test_labels(data):
    r"""A copy of :obj:`data` whose test images carry wrong labels (each
    shifted to another class of its own side): whatever reads them gets a
    different answer."""
    labels = data.labels.clone()
    for images, classes in ((data.test_seen_loc, data.seen_classes),
                            (data.test_unseen_loc, data.unseen_classes)):
        position = torch.searchsorted(classes, labels[images])
        labels[images] = classes[(position + 1) % classes.numel()]
    return dataclasses.replace(data, labels=labels)


def test_selection_never_reads_test_labels(tiny, tmp_path):
    # The selection (epochs and calibration constant, with every
    # validation metric behind them) is the same when the test labels are
    # wrong: it never read them. The test metrics are not.
    config = TINY.replace(epochs=2)
    honest = run(tiny, config, tmp_path / 'a', progress=False)
    corrupt = run(corrupt_test_labels(tiny), config, tmp_path / 'b',
                  progress=False)
    assert corrupt['model_selection'] == honest['model_selection']
    assert corrupt['epochs'] == honest['epochs']
    assert corrupt['calibration'] == honest['calibration']
    test_metrics = ['zsl_acc', 'gzsl_seen', 'gzsl_unseen', 'gzsl_cal_seen',
                    'gzsl_cal_unseen']
    assert [corrupt[key] for key in test_metrics] != \
        [honest[key] for key in test_metrics]
    # It learned (chance: 10% among the 10 classes), so wrong labels tell:
    assert honest['gzsl_seen'] > 25


def test_test_selected_report_is_labelled(tiny, tmp_path):
    metrics = run(tiny, TINY.replace(report_test_selected=True), tmp_path,
                  progress=False)
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
@pytest.mark.parametrize('graph,training', [('learned', 'episodic'),
                                            ('wordnet', 'episodic'),
                                            ('none', 'minibatch'),
                                            ('learned', 'minibatch')])
def test_training_is_deterministic(tiny, graph, training):
    config = TINY.replace(graph=graph, training=training,
                          iterations_per_epoch=5)
    states = []
    for _ in range(2):
        model = build_model(config, tiny, tiny.seen_classes)
        history = train_model(model, tiny, tiny.trainval_loc,
                              tiny.seen_classes, config, epochs=2,
                              progress=False)
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
    train_model(interrupted, tiny, images, classes, config, epochs=1,
                checkpoint=checkpoint, progress=False)
    resumed = build_model(config, tiny, classes)
    history = train_model(resumed, tiny, images, classes, config,
                          checkpoint=checkpoint, resume=True, progress=False)
    assert [h['epoch'] for h in history] == [1, 2, 3]
    for key, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[key]), key

    with pytest.raises(ValueError, match='another configuration'):
        train_model(build_model(config, tiny, classes), tiny, images,
                    classes, config.replace(lr=0.5), checkpoint=checkpoint,
                    resume=True, progress=False)
    # The checkpoint now holds 3 epochs: resuming it for 2 would return the
    # third epoch's model and history as the second's.
    with pytest.raises(ValueError, match="saved after epoch 3, past the 2 "
                       "epochs asked for: resume with epochs >= 3"):
        train_model(build_model(config, tiny, classes), tiny, images,
                    classes, config, epochs=2, checkpoint=checkpoint,
                    resume=True, progress=False)


TIMING = ('wall_seconds', 'peak_rss_mb', 'ms_per_episode',
          'episodes_per_second', 'resumed')


def without_timing(value):
    if isinstance(value, dict):
        return {key: without_timing(item) for key, item in value.items()
                if key not in TIMING}
    if isinstance(value, list):
        return [without_timing(item) for item in value]
    return value


# validate: once per selection epoch; class_graph_edges: once before the
# final phase, then once per final epoch (all three with the test-selected
# report; else only up to the latest selected epoch, which may be the first).
@pytest.mark.parametrize('name, call, config', [
    ('validate', 2, TINY),
    ('class_graph_edges', 3, TINY.replace(report_test_selected=True)),
])
def test_interrupted_run_resumes_to_the_same_result(tiny, tmp_path,
                                                    monkeypatch, name, call,
                                                    config):
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
    resumed = run(tiny, config, tmp_path / 'cut', resume=True,
                  progress=False)
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
            assert without_timing(saved['history']) == \
                without_timing(again['history'])


def test_resume_with_another_configuration_keeps_config_json(tiny,
                                                              tmp_path):
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    (run_dir / 'config.json').write_text(json.dumps(TINY.to_dict()))
    (run_dir / 'selection.pt').write_bytes(b'')  # an interrupted run
    with pytest.raises(ValueError, match=r"config.json' was written with "
                       r"another configuration \(differs in: lr\)"):
        run(tiny, TINY.replace(lr=0.5), run_dir, resume=True, progress=False)
    # Still the configuration of the checkpoints:
    assert json.loads((run_dir / 'config.json').read_text()) == \
        TINY.to_dict()


def test_data_differences_reads_earlier_records(tiny):
    from apnet_pyg.zsl.train import data_differences
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
    assert data_differences(earlier, fingerprint) == ['attributes',
                                                      'features']


def test_resume_or_evaluate_on_other_data_is_refused(tiny, tiny_root,
                                                     tmp_path):
    other = dataclasses.replace(tiny, features=tiny.features + 1.0)
    assert other.fingerprint() != tiny.fingerprint()
    run_dir = tmp_path / 'run'
    run_dir.mkdir()
    (run_dir / 'config.json').write_text(json.dumps(TINY.to_dict()))
    (run_dir / 'data.json').write_text(json.dumps(tiny.fingerprint()))
    (run_dir / 'selection.pt').write_bytes(b'')  # an interrupted run
    with pytest.raises(ValueError, match=r"data.json': the run was started "
                       r"on other data \(differs in: features\); resume "
                       r"with the --root"):
        run(other, TINY, run_dir, resume=True, progress=False)
    assert json.loads((run_dir / 'data.json').read_text()) == \
        tiny.fingerprint()

    # A finished run, evaluated on other data than it was trained on:
    finished = tmp_path / 'finished'
    run(tiny, TINY.replace(epochs=1, lr_decay_epoch=1), finished,
        progress=False, data_root=str(tiny_root))
    saved = json.loads((finished / 'metrics.json').read_text())
    run_dataset(finished, saved)  # its own data: fine
    saved['data']['labels'] = '00000000'
    with pytest.raises(ValueError, match=r"is not the data the run in "
                       r".* was trained on \(differs in: labels\): pass "
                       r"the folder it was trained on"):
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
        train_model(None, data, torch.arange(3), torch.arange(2), TINY,
                    progress=False)
    with pytest.raises(FileNotFoundError, match='No metrics.json'):
        load_model(tmp_path)


def test_validation_episodes_are_capped_with_a_warning(tiny, tmp_path):
    # TINY's validation task trains on 4 classes (trainclasses1): 5-way
    # episodes there are 4-way, said and recorded; the final phase has 6.
    with pytest.warns(ValidationEpisodeWarning, match='4-way'):
        metrics = run(tiny, TINY.replace(n_way=5, epochs=1), tmp_path,
                      progress=False)
    assert metrics['model_selection']['validation_task']['n_way'] == 4
    assert metrics['config']['n_way'] == 5


def test_load_run(tiny_root, tiny, tmp_path):
    run(tiny, TINY.replace(epochs=1, model_selection='none'), tmp_path,
        progress=False)
    with pytest.raises(ValueError, match='does not say where'):
        load_run(tmp_path)  # No data_root recorded, none given.
    saved, data = load_run(tmp_path, tiny_root)
    assert saved['dataset'] == 'TINY'
    assert torch.equal(data.attributes, tiny.attributes)  # the run's kind
    # A variant's configuration reads its own kind, from the recorded root.
    saved['data_root'] = str(tiny_root)
    variant = run_dataset(tmp_path, saved,
                          config=TINY.replace(attributes='att'))
    assert torch.equal(variant.attributes, load_xlsa17(
        tiny_root, 'TINY', attributes='att').attributes)
    assert not torch.equal(variant.attributes, tiny.attributes)
    (tmp_path / 'metrics.json').write_text('{}')
    with pytest.raises(ValueError, match='is not the metrics.json'):
        load_run(tmp_path, tiny_root)
