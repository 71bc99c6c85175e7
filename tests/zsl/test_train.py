import json

import pytest
import torch

from apnet_pyg.data import load_xlsa17
from apnet_pyg.zsl import TrainConfig, load_model, run, train_model
from apnet_pyg.zsl import train as train_module
from apnet_pyg.zsl.train import build_model

TINY = TrainConfig(class_channels=32, hidden_channels=32, proj_channels=16,
                   num_centroids=2, n_way=4, lr=1e-3, epochs=3,
                   lr_decay_epoch=2, iterations_per_epoch=15)


@pytest.fixture(scope='module')
def tiny(tiny_root):
    return load_xlsa17(tiny_root, 'TINY')


def test_run_end_to_end(tiny, tmp_path):
    metrics = run(tiny, TINY, tmp_path, progress=False, data_root='x')
    saved = json.loads((tmp_path / 'metrics.json').read_text())
    for key in ['zsl_acc', 'gzsl_seen', 'gzsl_unseen', 'gzsl_h']:
        assert 0.0 <= saved[key] <= 100.0
        assert saved[key] == metrics[key]
    assert saved['simulated'] is True
    assert 'simulated' in saved['label']
    assert saved['config'] == TINY.to_dict()
    assert saved['data_root'] == 'x'

    selection = saved['model_selection']
    accuracies = selection['val_zsl_acc']
    assert len(accuracies) == TINY.epochs
    assert selection['best_epoch'] == 1 + max(range(3),
                                              key=accuracies.__getitem__)
    assert saved['epochs_trained'] == selection['best_epoch']

    # The saved model reproduces the metrics:
    model = load_model(tmp_path)
    from apnet_pyg.zsl import evaluate
    assert evaluate(model, tiny)['zsl_acc'] == pytest.approx(
        metrics['zsl_acc'])


def test_model_selection_never_sees_test_classes(tiny, tmp_path,
                                                 monkeypatch):
    seen_by_validation = []
    original = train_module.zsl_accuracy

    def recording(model, data, image_index, classes, *args, **kwargs):
        seen_by_validation.append((classes.tolist(), image_index.tolist()))
        return original(model, data, image_index, classes, *args, **kwargs)

    monkeypatch.setattr(train_module, 'zsl_accuracy', recording)
    run(tiny, TINY.replace(epochs=2), tmp_path, progress=False)
    assert len(seen_by_validation) == 2
    val = set(tiny.val_classes.tolist())
    test_images = set(tiny.test_seen_loc.tolist()) | set(
        tiny.test_unseen_loc.tolist())
    for classes, images in seen_by_validation:
        assert set(classes) == val
        assert not set(images) & test_images
        assert set(tiny.labels[images].tolist()) <= val


@pytest.mark.parametrize('graph,training', [('learned', 'episodic'),
                                            ('wordnet', 'episodic'),
                                            ('none', 'minibatch'),
                                            ('learned', 'minibatch')])
def test_training_is_deterministic(tiny, graph, training):
    from apnet_pyg.zsl import ClassPrior
    config = TINY.replace(graph=graph, training=training,
                          iterations_per_epoch=5)
    prior = ClassPrior.wordnet('TINY', tiny.class_names) \
        if graph == 'wordnet' else None
    states = []
    for _ in range(2):
        model = build_model(config, tiny, tiny.seen_classes)
        history = train_model(model, tiny, tiny.seen_classes, config,
                              epochs=2, prior=prior, progress=False)
        states.append((model.state_dict(), history))
    (first, history1), (second, history2) = states
    assert [h['loss'] for h in history1] == [h['loss'] for h in history2]
    for key in first:
        assert torch.equal(first[key], second[key]), key


def test_resume_continues_exactly(tiny, tmp_path):
    config = TINY.replace(iterations_per_epoch=5)
    checkpoint = tmp_path / 'checkpoint.pt'

    straight = build_model(config, tiny, tiny.seen_classes)
    train_model(straight, tiny, tiny.seen_classes, config, progress=False)

    interrupted = build_model(config, tiny, tiny.seen_classes)
    train_model(interrupted, tiny, tiny.seen_classes, config, epochs=1,
                checkpoint=checkpoint, progress=False)
    resumed = build_model(config, tiny, tiny.seen_classes)
    history = train_model(resumed, tiny, tiny.seen_classes, config,
                          checkpoint=checkpoint, resume=True, progress=False)
    assert [h['epoch'] for h in history] == [1, 2, 3]
    for key, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[key]), key

    with pytest.raises(ValueError, match='another configuration'):
        train_model(build_model(config, tiny, tiny.seen_classes), tiny,
                    tiny.seen_classes, config.replace(lr=0.5),
                    checkpoint=checkpoint, resume=True, progress=False)


def test_training_needs_features_and_prior(tiny, tmp_path):
    config = TINY.replace(graph='wordnet')
    with pytest.raises(ValueError, match='WordNet class prior'):
        train_model(build_model(config, tiny, tiny.seen_classes), tiny,
                    tiny.seen_classes, config, progress=False)
    with pytest.raises(FileNotFoundError, match='No trained model'):
        load_model(tmp_path)
