import dataclasses

import pytest
import torch

from apnet_pyg.data import load_xlsa17
from apnet_pyg.zsl.baselines import (BASELINES, eszsl_metrics,
                                     hyper_parameters, sae_metrics)
from apnet_pyg.zsl.eszsl import fit_eszsl_validated, predict_eszsl
from apnet_pyg.zsl.metrics import harmonic_mean, per_class_accuracy
from apnet_pyg.zsl.sae import fit_sae_validated, predict_sae


@pytest.fixture(scope='module')
def tiny(tiny_root):
    return load_xlsa17(tiny_root, 'TINY')


def split(data):
    return (data.features, data.labels, data.attributes, data.train_classes,
            data.images_of(data.train_classes), data.val_classes,
            data.images_of(data.val_classes), data.seen_classes,
            data.trainval_loc)


def protocol(data, predict):
    # The benchmark's protocol written out: ZSL among the unseen classes,
    # GZSL among all classes, per-class mean accuracy in %.
    unseen_images, seen_images = data.test_unseen_loc, data.test_seen_loc
    everything = torch.arange(data.num_classes)

    def accuracy(images, candidates, classes):
        return 100 * per_class_accuracy(predict(images, candidates),
                                        data.labels[images], classes)

    u = accuracy(unseen_images, everything, data.unseen_classes)
    s = accuracy(seen_images, everything, data.seen_classes)
    return dict(zsl_acc=accuracy(unseen_images, data.unseen_classes,
                                 data.unseen_classes),
                gzsl_unseen=u, gzsl_seen=s, gzsl_h=harmonic_mean(s, u))


def test_eszsl_metrics(tiny):
    metrics = eszsl_metrics(tiny)
    v, gamma, lam, accuracy = fit_eszsl_validated(*split(tiny))
    assert (metrics['gamma'], metrics['lam']) == (gamma, lam)
    assert metrics['val_zsl_acc'] == accuracy
    expected = protocol(tiny, lambda images, classes: predict_eszsl(
        v, tiny.features[images], tiny.attributes, classes))
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value)
    assert hyper_parameters(metrics) == f'gamma={gamma:g}, lam={lam:g}'


def test_sae_metrics(tiny):
    metrics = sae_metrics(tiny)
    w, lam, space, accuracy = fit_sae_validated(*split(tiny))
    assert (metrics['lam'], metrics['space']) == (lam, space)
    assert metrics['val_zsl_acc'] == accuracy
    assert space in ('semantic', 'feature')
    expected = protocol(tiny, lambda images, classes: predict_sae(
        w, tiny.features[images], tiny.attributes, classes, space))
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value)
    assert hyper_parameters(metrics) == f'lam={lam:g}, space={space}'


@pytest.mark.parametrize('name', sorted(BASELINES))
def test_choice_ignores_the_test_images(tiny, name):
    # Scrambling the features of every test image (seen and unseen) and
    # relabelling the unseen ones must not change the chosen
    # hyper-parameters: they come from the validation classes only.
    gen = torch.Generator().manual_seed(0)
    test = torch.cat([tiny.test_seen_loc, tiny.test_unseen_loc])
    features = tiny.features.clone()
    features[test] = torch.rand(test.numel(), features.size(1),
                                generator=gen)
    labels = tiny.labels.clone()
    unseen = tiny.unseen_classes
    labels[tiny.test_unseen_loc] = unseen[torch.randint(
        unseen.numel(), (tiny.test_unseen_loc.numel(), ), generator=gen)]
    scrambled = dataclasses.replace(tiny, features=features, labels=labels)
    metrics, other = BASELINES[name](tiny), BASELINES[name](scrambled)
    assert hyper_parameters(other) == hyper_parameters(metrics)


def test_bad_input(tiny_root):
    class_side = load_xlsa17(tiny_root, 'TINY', load_features=False)
    with pytest.raises(ValueError, match='load_features=True'):
        eszsl_metrics(class_side)
    no_split = dataclasses.replace(load_xlsa17(tiny_root, 'TINY'),
                                   train_classes=None, val_classes=None)
    with pytest.raises(ValueError, match='valclasses1.txt'):
        sae_metrics(no_split)
