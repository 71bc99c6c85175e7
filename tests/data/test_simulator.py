import json

import numpy as np
import pytest
import scipy.io
import torch

from apnet_pyg.data import load_xlsa17, simulate_xlsa17
from apnet_pyg.data.simulator import (DEFAULT_OPTIONS, class_prototypes,
                                      default_options, simulate_labels)
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

    scipy.io.savemat(folder / 'att_splits.mat', {
        'allclasses_names': names,
        'att': att / np.linalg.norm(att, axis=0, keepdims=True),
        'original_att': att,
        'trainval_loc': loc(trainval),
        'test_seen_loc': loc(test_seen),
        'test_unseen_loc': loc(test_unseen),
        'train_loc': loc(np.concatenate([trainval[:20], test_seen[:6]])),
        'val_loc': loc(np.concatenate([trainval[20:], test_seen[6:]])),
    })
    for filename, names in (('trainvalclasses.txt', NAMES[:6]),
                            ('testclasses.txt', NAMES[6:]),
                            ('trainclasses1.txt', NAMES[:4]),
                            ('valclasses1.txt', NAMES[4:6])):
        (folder / filename).write_text('\n'.join(names) + '\n')
    return folder


def test_writes_real_layout_and_reads_back(tmp_path):
    source = write_class_side(tmp_path / 'real')
    folder = simulate_xlsa17('TOY', tmp_path / 'sim', data_root=tmp_path /
                             'real', seed=3)
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

    data = load_xlsa17(tmp_path / 'sim', 'TOY')  # validates every label
    assert data.simulated and data.simulation['seed'] == 3
    assert not load_xlsa17(tmp_path / 'real', 'TOY',
                           load_features=False).simulated
    assert data.features.shape == (60, 2048)
    assert (data.features >= 0).all()
    # The validation split follows train_loc / val_loc.
    assert torch.isin(data.labels[data.train_loc], data.train_classes).all()
    assert torch.isin(data.labels[data.val_loc], data.val_classes).all()
    # Every seen class has trainval and test_seen images.
    for split, classes in (('trainval', data.seen_classes),
                           ('test_seen', data.seen_classes),
                           ('test_unseen', data.unseen_classes)):
        assert set(data.labels[data.loc(split)].tolist()) == \
            set(classes.tolist())


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
    # The control changes the features but no other random draw.
    control = features(tmp_path / 'd', seed=1, shared_strength=0.0)
    assert np.array_equal(control['labels'], a['labels'])
    assert not np.array_equal(control['features'], a['features'])


def test_labels_partition_the_real_awa2_lists():
    data = load_xlsa17(None, 'AWA2', load_features=False)
    labels, unlisted = simulate_labels(data, np.random.default_rng(0))
    assert unlisted == 0 and labels.shape == (37322, )
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
        folder = simulate_xlsa17('TOY', tmp_path / 'sim',
                                 data_root=tmp_path / 'real')
    assert json.loads((folder / 'SIMULATED.json').read_text())[
        'unlisted_images'] == 1
    data = load_xlsa17(tmp_path / 'sim', 'TOY')
    assert data.num_images == 61
    assert data.labels[29] in data.seen_classes


def test_prototypes_follow_attributes():
    rng = np.random.default_rng(0)
    attributes = rng.random((12, 6))
    attributes[11] = attributes[10]

    def prototypes(**options):
        rngs = {k: np.random.default_rng(1) for k in
                ('g', 'shared', 'residual')}
        return class_prototypes(attributes, rngs,
                                {**DEFAULT_OPTIONS, **options})

    # Without the residual, equal attributes give equal prototypes (g and
    # the shared field are functions of the attribute neighbourhood).
    p = prototypes(residual_strength=0.0)
    assert p.shape == (12, 2048) and (p >= 0).all()
    assert np.allclose(p[10], p[11])
    assert not np.allclose(p[0], p[1])
    assert not np.allclose(prototypes()[10], prototypes()[11])
    # The shared field alone correlates close classes only.
    p = prototypes(attribute_strength=0.0, residual_strength=0.0,
                   offset_spread=0.0, offset=100.0) - 100.0
    assert np.corrcoef(p[10], p[11])[0, 1] > 0.99
    assert not np.allclose(p, prototypes(
        attribute_strength=0.0, residual_strength=0.0, offset_spread=0.0,
        offset=100.0, shared_strength=0.0) - 100.0)


def test_bad_options_and_real_files(tmp_path):
    write_class_side(tmp_path / 'real')
    with pytest.raises(TypeError, match='Unknown simulator options'):
        simulate_xlsa17('TOY', tmp_path, data_root=tmp_path / 'real',
                        noise=1.0)
    with pytest.raises(ValueError, match="'residual_strength' must be"):
        simulate_xlsa17('TOY', tmp_path / 'sim', data_root=tmp_path / 'real',
                        residual_strength=-1.0)
    # Never overwrite real features.
    (tmp_path / 'real' / 'TOY' / 'res101.mat').write_bytes(b'real')
    with pytest.raises(FileExistsError, match='refusing'):
        simulate_xlsa17('TOY', tmp_path / 'real',
                        data_root=tmp_path / 'real')


def test_command_line(tmp_path, capsys):
    write_class_side(tmp_path / 'real')
    cli_main(['simulate', '--dataset', 'TOY', '--out', str(tmp_path / 'sim'),
              '--data-root', str(tmp_path / 'real'), '--seed', '4',
              '--shared-strength', '0'])
    assert 'wrote' in capsys.readouterr().out
    data = load_xlsa17(tmp_path / 'sim', 'TOY')
    assert data.simulation['seed'] == 4
    assert data.simulation['options']['shared_strength'] == 0


def test_dataset_defaults(tmp_path):
    assert default_options('AWA2') == DEFAULT_OPTIONS
    assert default_options('cub')['isotropic_noise'] == 8.0
    write_class_side(tmp_path / 'real', name='CUB')
    # Unset command-line flags keep the dataset's values; set ones win.
    cli_main(['simulate', '--dataset', 'CUB', '--out', str(tmp_path / 'sim'),
              '--data-root', str(tmp_path / 'real'),
              '--residual-strength', '0.5'])
    options = load_xlsa17(tmp_path / 'sim', 'CUB').simulation['options']
    assert options['isotropic_noise'] == 8.0
    assert options['residual_strength'] == 0.5
    folder = simulate_xlsa17('CUB', tmp_path / 'sim2',
                             data_root=tmp_path / 'real', isotropic_noise=1.0)
    sidecar = json.loads((folder / 'SIMULATED.json').read_text())
    assert sidecar['options']['isotropic_noise'] == 1.0
