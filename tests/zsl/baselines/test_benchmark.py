import dataclasses

import pytest
import torch

from apnet_pyg.data import load_xlsa17
from apnet_pyg.data.splits import seen_validation_split
from apnet_pyg.zsl.baselines.benchmark import (
    BASELINES,
    eszsl_metrics,
    hyper_parameters,
    sae_metrics,
)
from apnet_pyg.zsl.baselines.eszsl import (
    eszsl_scores,
    fit_eszsl,
    fit_eszsl_validated,
    predict_eszsl,
)
from apnet_pyg.zsl.baselines.sae import (
    fit_sae,
    fit_sae_validated,
    predict_sae,
    sae_scores,
)
from apnet_pyg.zsl.metrics import (
    CALIBRATED_METRICS,
    harmonic_mean,
    per_class_accuracy,
)


@pytest.fixture(scope='module')
def tiny(tiny_root):
    return load_xlsa17(tiny_root, 'TINY')


def split(data):
    return (
        data.features,
        data.labels,
        data.attributes,
        data.train_classes,
        data.images_of(data.train_classes),
        data.val_classes,
        data.images_of(data.val_classes),
        data.seen_classes,
        data.trainval_loc,
    )


def protocol(data, predict):
    # The benchmark's protocol written out: ZSL among the unseen classes,
    # GZSL among all classes, per-class mean accuracy in %.
    unseen_images, seen_images = data.test_unseen_loc, data.test_seen_loc
    everything = torch.arange(data.num_classes)

    def accuracy(images, candidates, classes):
        return 100 * per_class_accuracy(
            predict(images, candidates), data.labels[images], classes
        )

    u = accuracy(unseen_images, everything, data.unseen_classes)
    s = accuracy(seen_images, everything, data.seen_classes)
    return dict(
        zsl_acc=accuracy(
            unseen_images, data.unseen_classes, data.unseen_classes
        ),
        gzsl_unseen=u,
        gzsl_seen=s,
        gzsl_h=harmonic_mean(s, u),
    )


def test_eszsl_metrics(tiny):
    metrics = eszsl_metrics(tiny)
    v, gamma, lam, accuracy = fit_eszsl_validated(*split(tiny))
    assert (metrics['gamma'], metrics['lam']) == (gamma, lam)
    assert metrics['val_zsl_acc'] == accuracy
    expected = protocol(
        tiny,
        lambda images, classes: predict_eszsl(
            v, tiny.features[images], tiny.attributes, classes
        ),
    )
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value)
    assert hyper_parameters(metrics) == f'gamma={gamma:g}, lam={lam:g}'


def test_sae_metrics(tiny):
    metrics = sae_metrics(tiny)
    w, lam, space, accuracy = fit_sae_validated(*split(tiny))
    assert (metrics['lam'], metrics['space']) == (lam, space)
    assert metrics['val_zsl_acc'] == accuracy
    assert space in ('semantic', 'feature')
    expected = protocol(
        tiny,
        lambda images, classes: predict_sae(
            w, tiny.features[images], tiny.attributes, classes, space
        ),
    )
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
    features[test] = torch.rand(test.numel(), features.size(1), generator=gen)
    labels = tiny.labels.clone()
    unseen = tiny.unseen_classes
    labels[tiny.test_unseen_loc] = unseen[
        torch.randint(
            unseen.numel(), (tiny.test_unseen_loc.numel(),), generator=gen
        )
    ]
    scrambled = dataclasses.replace(tiny, features=features, labels=labels)
    metrics, other = BASELINES[name](tiny), BASELINES[name](scrambled)
    assert hyper_parameters(other) == hyper_parameters(metrics)
    # Nor the calibration constant: it comes from the validation task.
    assert other['calibration'] == metrics['calibration']
    # (while the test figures it gives do change)
    assert [other[key] for key in CALIBRATED_METRICS[1:]] != [
        metrics[key] for key in CALIBRATED_METRICS[1:]
    ]


def scorer(data, name, metrics, images):
    # The baseline with its chosen hyper-parameters fitted on 'images' (of
    # their own classes), as scores(image_index, classes).
    features, labels = data.features[images], data.labels[images]
    classes = labels.unique()
    if name == 'ESZSL':
        v = fit_eszsl(
            features,
            labels,
            data.attributes,
            classes,
            metrics['gamma'],
            metrics['lam'],
        )
        return lambda index, candidates: eszsl_scores(
            v, data.features[index], data.attributes, candidates
        )
    w = fit_sae(features, labels, data.attributes, classes, metrics['lam'])
    return lambda index, candidates: sae_scores(
        w, data.features[index], data.attributes, candidates, metrics['space']
    )


def stacked(
    data,
    scores,
    seen_images,
    unseen_images,
    seen_classes,
    unseen_classes,
    constant,
):
    # Calibrated stacking written out: the constant off every seen class's
    # score, then the argmax over all classes; (S, U, H) in %.
    classes = torch.cat([seen_classes, unseen_classes])

    def accuracy(images, own):
        candidate = scores(images, classes).clone()
        candidate[:, : seen_classes.numel()] -= constant
        return 100 * per_class_accuracy(
            classes[candidate.argmax(1)], data.labels[images], own
        )

    s = accuracy(seen_images, seen_classes)
    u = accuracy(unseen_images, unseen_classes)
    return s, u, harmonic_mean(s, u)


@pytest.mark.parametrize('name', sorted(BASELINES))
def test_calibrated_stacking(tiny, name):
    metrics = BASELINES[name](tiny)
    # The constant is the best one on the validation task, for the
    # baseline fitted on that task's training images ...
    split = seen_validation_split(tiny)
    validation = (
        split.seen_val_images,
        split.unseen_val_images,
        split.train_classes,
        split.val_classes,
    )
    scores = scorer(tiny, name, metrics, split.train_images)
    everything = torch.cat(validation[:2])
    classes = torch.cat(validation[2:])
    all_scores = scores(everything, classes)
    seen = split.train_classes.numel()
    margin = (
        (
            all_scores[:, :seen].max(1).values
            - all_scores[:, seen:].max(1).values
        )
        .sort()
        .values
    )
    # Every distinct outcome of the constant: below, between and above
    # the images' margins.
    candidates = torch.cat(
        [margin[:1] - 1, (margin[1:] + margin[:-1]) / 2, margin[-1:] + 1]
    )
    best = max(
        stacked(tiny, scores, *validation, float(c))[2] for c in candidates
    )
    chosen = stacked(tiny, scores, *validation, metrics['calibration'])
    assert chosen[2] == pytest.approx(best)
    # ... and is applied to the baseline fitted on all seen classes.
    scores = scorer(tiny, name, metrics, tiny.trainval_loc)
    s, u, h = stacked(
        tiny,
        scores,
        tiny.test_seen_loc,
        tiny.test_unseen_loc,
        tiny.seen_classes,
        tiny.unseen_classes,
        metrics['calibration'],
    )
    assert (
        metrics['gzsl_cal_seen'],
        metrics['gzsl_cal_unseen'],
        metrics['gzsl_cal_h'],
    ) == pytest.approx((s, u, h))
    assert hyper_parameters(metrics) == ', '.join(
        f'{key}={metrics[key]:g}'
        if isinstance(metrics[key], float)
        else f'{key}={metrics[key]}'
        for key in (('gamma', 'lam') if name == 'ESZSL' else ('lam', 'space'))
    )


def test_calibration_task_of_another_dataset(tiny):
    split = seen_validation_split(tiny)
    other = split._replace(train_classes=split.train_classes[1:])
    with pytest.raises(
        ValueError,
        match="'split' must be a validation task of 'TINY'.*its classes",
    ):
        eszsl_metrics(tiny, other)
    # Test images among the validation images would let test data choose
    # the constant.
    for field, test in (
        ('seen_val_images', tiny.test_seen_loc),
        ('unseen_val_images', tiny.test_unseen_loc),
    ):
        with pytest.raises(
            ValueError,
            match="'split' must be a validation task of 'TINY'.*its images",
        ):
            sae_metrics(tiny, split._replace(**{field: test}))


def test_bad_input(tiny_root):
    class_side = load_xlsa17(tiny_root, 'TINY', load_features=False)
    with pytest.raises(ValueError, match='load_features=True'):
        eszsl_metrics(class_side)
    no_split = dataclasses.replace(
        load_xlsa17(tiny_root, 'TINY'), train_classes=None, val_classes=None
    )
    with pytest.raises(ValueError, match='valclasses1.txt'):
        sae_metrics(no_split)
