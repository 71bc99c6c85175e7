import json

import numpy as np
import pytest
import scipy.io
import torch

from apnet_pyg.data import load_xlsa17, simulate_xlsa17
from apnet_pyg.data.simulator import (
    DATASET_OPTIONS,
    DEFAULT_OPTIONS,
    SIMULATOR_VERSION,
    class_prototypes,
    default_options,
    simulate_dataset,
    simulate_labels,
)
from apnet_pyg.zsl.cli import main as cli_main

# A tiny class side in the real layout: 8 classes (0-5 seen, 6-7 unseen),
# 60 images. train_loc / val_loc hold the seen images of the train (0-3) /
# validation (4-5) classes, as in the real files.
NAMES = [f'class{c}' for c in range(8)]


def write_class_side(root, gap=False, seed=0, name='TOY'):
    rng = np.random.default_rng(seed)
    folder = root / name
    folder.mkdir(parents=True)
    att = rng.random((10, 8))
    att[:, 7] = att[:, 6]  # classes 6 and 7 share their attributes
    order = rng.permutation(np.arange(1, 61 + gap))
    if gap:  # index 30 is listed nowhere
        order = order[order != 30]
    trainval, test_seen, test_unseen = order[:30], order[30:40], order[40:]
    names = np.empty((8, 1), dtype=object)
    for i, name in enumerate(NAMES):
        names[i, 0] = np.array([name])

    def loc(index):
        return np.sort(index).astype(np.uint16).reshape(-1, 1)

    scipy.io.savemat(
        folder / 'att_splits.mat',
        {
            'allclasses_names': names,
            'att': att / np.linalg.norm(att, axis=0, keepdims=True),
            'original_att': att,
            'trainval_loc': loc(trainval),
            'test_seen_loc': loc(test_seen),
            'test_unseen_loc': loc(test_unseen),
            'train_loc': loc(np.concatenate([trainval[:20], test_seen[:6]])),
            'val_loc': loc(np.concatenate([trainval[20:], test_seen[6:]])),
        },
    )
    for filename, names in (
        ('trainvalclasses.txt', NAMES[:6]),
        ('testclasses.txt', NAMES[6:]),
        ('trainclasses1.txt', NAMES[:4]),
        ('valclasses1.txt', NAMES[4:6]),
    ):
        (folder / filename).write_text('\n'.join(names) + '\n')
    return folder


def test_writes_real_layout_and_reads_back(tmp_path):
    source = write_class_side(tmp_path / 'real')
    folder = simulate_xlsa17(
        'TOY', tmp_path / 'sim', data_root=tmp_path / 'real', seed=3
    )
    assert folder == tmp_path / 'sim' / 'TOY'
    res = scipy.io.loadmat(folder / 'res101.mat')
    assert res['features'].shape == (2048, 60)
    assert res['features'].dtype == np.float32
    assert res['labels'].shape == (60, 1)
    assert res['image_files'].shape == (60, 1)
    assert res['image_files'].dtype == object
    assert str(res['image_files'][0, 0][0]).startswith('SIMULATED/class')
    for name in ('att_splits.mat', 'trainvalclasses.txt', 'valclasses1.txt'):
        assert (folder / name).read_bytes() == (source / name).read_bytes()
    sidecar = json.loads((folder / 'SIMULATED.json').read_text())
    assert sidecar['seed'] == 3 and sidecar['unlisted_images'] == 0
    assert sidecar['options'] == DEFAULT_OPTIONS
    assert sidecar['version'] == SIMULATOR_VERSION

    data = load_xlsa17(tmp_path / 'sim', 'TOY')  # validates every label
    assert data.simulated and data.simulation['seed'] == 3
    assert not load_xlsa17(
        tmp_path / 'real', 'TOY', load_features=False
    ).simulated
    assert data.features.shape == (60, 2048)
    assert (data.features >= 0).all()
    # The validation split follows train_loc / val_loc.
    assert torch.isin(data.labels[data.train_loc], data.train_classes).all()
    assert torch.isin(data.labels[data.val_loc], data.val_classes).all()
    # Every seen class has trainval and test_seen images.
    for split, classes in (
        ('trainval', data.seen_classes),
        ('test_seen', data.seen_classes),
        ('test_unseen', data.unseen_classes),
    ):
        assert set(data.labels[data.loc(split)].tolist()) == set(
            classes.tolist()
        )


def test_deterministic_per_seed(tmp_path):
    write_class_side(tmp_path / 'real')

    def features(out, **kwargs):
        simulate_xlsa17('TOY', out, data_root=tmp_path / 'real', **kwargs)
        return scipy.io.loadmat(out / 'TOY' / 'res101.mat')

    a = features(tmp_path / 'a', seed=1)
    b = features(tmp_path / 'b', seed=1)
    c = features(tmp_path / 'c', seed=2)
    assert a['features'].tobytes() == b['features'].tobytes()
    assert np.array_equal(a['labels'], b['labels'])
    assert a['features'].tobytes() != c['features'].tobytes()
    # The controls change the features but no other random draw.
    for option in ('shared_weight', 'shared_strength'):
        control = features(tmp_path / option, seed=1, **{option: 0.0})
        assert np.array_equal(control['labels'], a['labels'])
        assert not np.array_equal(control['features'], a['features'])


def test_in_memory_simulation_equals_the_files(tmp_path):
    write_class_side(tmp_path / 'real')
    folder = simulate_xlsa17(
        'TOY',
        tmp_path / 'sim',
        data_root=tmp_path / 'real',
        seed=5,
        shared_weight=0.5,
    )
    data = simulate_dataset(
        'TOY', tmp_path / 'real', seed=5, shared_weight=0.5
    )
    written = load_xlsa17(folder.parent, 'TOY')
    assert data.simulated and data.features.dtype == torch.float32
    assert torch.equal(data.features, written.features)
    assert torch.equal(data.labels, written.labels)
    assert data.simulation == json.loads(
        (folder / 'SIMULATED.json').read_text()
    )
    assert torch.equal(data.trainval_loc, written.trainval_loc)


def test_features_in_the_range_of_resnet_activations():
    # On a real class side with its calibrated defaults: non-negative
    # pooled-activation-like values (ResNet-101 average-pooled features
    # are >= 0 with a mean of order 0.5).
    data = simulate_dataset('CUB', seed=0)
    features = data.features
    assert features.shape == (11788, 2048)
    assert bool((features >= 0).all())
    assert 0.2 < float(features.mean()) < 1.5
    assert 0.05 < float((features == 0).double().mean()) < 0.6


def test_labels_partition_the_real_awa2_lists():
    data = load_xlsa17(None, 'AWA2', load_features=False)
    labels, unlisted = simulate_labels(data, np.random.default_rng(0))
    assert unlisted == 0 and labels.shape == (37322,)
    labels = torch.from_numpy(labels)
    seen, unseen = data.seen_classes, data.unseen_classes
    assert torch.isin(labels[data.trainval_loc], seen).all()
    assert torch.isin(labels[data.test_seen_loc], seen).all()
    assert torch.isin(labels[data.test_unseen_loc], unseen).all()
    assert torch.isin(labels[data.train_loc], data.train_classes).all()
    assert torch.isin(labels[data.val_loc], data.val_classes).all()
    trainval = torch.bincount(labels[data.trainval_loc], minlength=50)[seen]
    test_seen = torch.bincount(labels[data.test_seen_loc], minlength=50)[seen]
    assert (trainval > 0).all() and (test_seen > 0).all()
    share = test_seen / (trainval + test_seen)
    assert ((share > 0.17) & (share < 0.23)).all()  # ~80 : 20 per class


def test_unlisted_indices_get_seen_classes(tmp_path):
    write_class_side(tmp_path / 'real', gap=True)
    with pytest.warns(UserWarning, match='1 image indices'):
        folder = simulate_xlsa17(
            'TOY', tmp_path / 'sim', data_root=tmp_path / 'real'
        )
    assert (
        json.loads((folder / 'SIMULATED.json').read_text())['unlisted_images']
        == 1
    )
    data = load_xlsa17(tmp_path / 'sim', 'TOY')
    assert data.num_images == 61
    assert data.labels[29] in data.seen_classes


def test_prototypes_follow_attributes():
    rng = np.random.default_rng(0)
    attributes = rng.random((12, 6))
    attributes[11] = attributes[10]

    def prototypes(**options):
        rngs = {
            k: np.random.default_rng(1) for k in ('g', 'shared', 'residual')
        }
        return class_prototypes(
            attributes, rngs, {**DEFAULT_OPTIONS, **options}
        )

    # g is a function of the attributes: without the class-specific
    # components, equal attributes give equal prototypes.
    p = prototypes(shared_strength=0.0, residual_strength=0.0)
    assert p.shape == (12, 2048) and (p >= 0).all()
    assert np.allclose(p[10], p[11])
    assert not np.allclose(p[0], p[1])
    assert not np.allclose(prototypes()[10], prototypes()[11])


def shared_field(attributes, **options):
    # The shared component alone: no g, no residual, a constant offset
    # large enough that the ReLU never clips.
    rngs = {k: np.random.default_rng(1) for k in ('g', 'shared', 'residual')}
    options = {
        **DEFAULT_OPTIONS,
        'attribute_strength': 0.0,
        'residual_strength': 0.0,
        'offset_spread': 0.0,
        'offset': 100.0,
        'shared_strength': 1.0,
        **options,
    }
    return class_prototypes(attributes, rngs, options) - 100.0


def test_shared_field_borrows_from_the_nearest_classes():
    rng = np.random.default_rng(0)
    attributes = rng.random((9, 5))
    innovations = np.random.default_rng(1).standard_normal((9, 2048))
    unit = attributes / np.linalg.norm(attributes, axis=1, keepdims=True)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    nearest = similarity.argmax(1)
    # One neighbour: m_c = (z_c + w z_nn(c)) / sqrt(1 + w^2).
    m = shared_field(attributes, shared_neighbours=1, shared_weight=2.0)
    expected = (innovations + 2.0 * innovations[nearest]) / np.sqrt(5.0)
    assert np.allclose(m, expected)
    # Two neighbours, softmax(cos / tau) between them.
    m = shared_field(
        attributes,
        shared_neighbours=2,
        shared_weight=1.5,
        shared_temperature=0.2,
    )
    order = np.argsort(-similarity, axis=1)[:, :2]
    logits = np.take_along_axis(similarity, order, 1) / 0.2
    share = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    mix = np.eye(9)
    np.put_along_axis(mix, order, 1.5 * share, 1)
    mix /= np.linalg.norm(mix, axis=1, keepdims=True)
    assert np.allclose(m, mix @ innovations)
    # The control: every class its own innovation, nothing shared.
    assert np.allclose(
        shared_field(attributes, shared_weight=0.0), innovations
    )


def test_bad_options_and_real_files(tmp_path):
    write_class_side(tmp_path / 'real')
    with pytest.raises(TypeError, match='Unknown simulator options'):
        simulate_xlsa17(
            'TOY', tmp_path, data_root=tmp_path / 'real', noise=1.0
        )
    with pytest.raises(ValueError, match="'residual_strength' must be"):
        simulate_xlsa17(
            'TOY',
            tmp_path / 'sim',
            data_root=tmp_path / 'real',
            residual_strength=-1.0,
        )
    # Never overwrite real features.
    (tmp_path / 'real' / 'TOY' / 'res101.mat').write_bytes(b'real')
    with pytest.raises(FileExistsError, match='refusing'):
        simulate_xlsa17('TOY', tmp_path / 'real', data_root=tmp_path / 'real')


def test_command_line(tmp_path, capsys):
    write_class_side(tmp_path / 'real')
    cli_main(
        [
            'simulate',
            '--dataset',
            'TOY',
            '--out',
            str(tmp_path / 'sim'),
            '--data-root',
            str(tmp_path / 'real'),
            '--seed',
            '4',
            '--shared-strength',
            '0',
        ]
    )
    assert 'wrote' in capsys.readouterr().out
    data = load_xlsa17(tmp_path / 'sim', 'TOY')
    assert data.simulation['seed'] == 4
    assert data.simulation['options']['shared_strength'] == 0


def test_dataset_defaults(tmp_path):
    assert set(DATASET_OPTIONS) <= {'AWA1', 'AWA2', 'CUB', 'SUN', 'APY'}
    for dataset, overrides in DATASET_OPTIONS.items():
        assert set(overrides) <= set(DEFAULT_OPTIONS)
        assert default_options(dataset.lower()) == {
            **DEFAULT_OPTIONS,
            **overrides,
        }
    assert default_options('TOY') == DEFAULT_OPTIONS
    cub = default_options('CUB')
    write_class_side(tmp_path / 'real', name='CUB')
    # Unset command-line flags keep the dataset's values; set ones win.
    cli_main(
        [
            'simulate',
            '--dataset',
            'CUB',
            '--out',
            str(tmp_path / 'sim'),
            '--data-root',
            str(tmp_path / 'real'),
            '--residual-strength',
            '0.5',
        ]
    )
    options = load_xlsa17(tmp_path / 'sim', 'CUB').simulation['options']
    assert options == {**cub, 'residual_strength': 0.5}
    folder = simulate_xlsa17(
        'CUB',
        tmp_path / 'sim2',
        data_root=tmp_path / 'real',
        shared_weight=0.25,
    )
    sidecar = json.loads((folder / 'SIMULATED.json').read_text())
    assert sidecar['options'] == {**cub, 'shared_weight': 0.25}


def test_whole_float_options_equal_ints(tmp_path):
    write_class_side(tmp_path / 'real')
    sizes = dict(hidden_dim=16, noise_rank=4, shared_neighbours=2)
    as_ints = simulate_dataset('TOY', tmp_path / 'real', **sizes)
    as_floats = simulate_dataset(
        'TOY', tmp_path / 'real', **{k: float(v) for k, v in sizes.items()}
    )
    assert torch.equal(as_floats.features, as_ints.features)
    assert as_floats.simulation['options'] == as_ints.simulation['options']


def test_failed_write_leaves_no_unmarked_features(tmp_path, monkeypatch):
    import apnet_pyg.data.simulator as simulator

    write_class_side(tmp_path / 'real')
    simulate_xlsa17('TOY', tmp_path / 'sim', data_root=tmp_path / 'real')

    def fail(*args):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(simulator, '_write_features', fail)
    with pytest.raises(OSError, match='No space'):
        simulate_xlsa17(
            'TOY', tmp_path / 'sim', data_root=tmp_path / 'real', seed=1
        )
    # The earlier features are gone, not left beside the new sidecar; the
    # folder is never features without a sidecar.
    folder = tmp_path / 'sim' / 'TOY'
    assert not (folder / 'res101.mat').exists()
    assert json.loads((folder / 'SIMULATED.json').read_text())['seed'] == 1
    monkeypatch.undo()
    simulate_xlsa17(
        'TOY', tmp_path / 'sim', data_root=tmp_path / 'real', seed=1
    )
    assert load_xlsa17(tmp_path / 'sim', 'TOY').simulated


def test_numpy_scalar_options_and_bad_compress(tmp_path):
    # NumPy scalars are options like any number: they once passed the
    # checks, deleted the earlier features and failed in the JSON sidecar.
    write_class_side(tmp_path / 'real')
    simulate_xlsa17('TOY', tmp_path / 'sim', data_root=tmp_path / 'real')
    folder = simulate_xlsa17(
        'TOY',
        tmp_path / 'sim',
        data_root=tmp_path / 'real',
        offset=np.float32(10.0),
        hidden_dim=np.int64(16),
    )
    sidecar = json.loads((folder / 'SIMULATED.json').read_text())
    assert sidecar['options']['offset'] == 10.0
    assert sidecar['options']['hidden_dim'] == 16
    assert (folder / 'res101.mat').is_file()
    with pytest.raises(ValueError, match="'compress' must be"):
        simulate_xlsa17(
            'TOY', tmp_path / 'sim', data_root=tmp_path / 'real', compress='no'
        )
    with pytest.raises(ValueError, match="'dataset' must be a dataset name"):
        default_options(5)


@pytest.mark.parametrize(
    'options, message',
    [
        ({'scale': 1e-320}, 'all zero with these options'),
        ({'offset': 1e300}, 'not finite with these options'),
        ({'shared_temperature': 1e-320}, 'not finite with these options'),
        ({'class_size_spread': 1000.0}, "'class_size_spread' is too large"),
    ],
)
def test_extreme_options_are_refused(tmp_path, options, message):
    write_class_side(tmp_path / 'real')
    with pytest.raises(ValueError, match=message):
        simulate_dataset('TOY', tmp_path / 'real', **options)
