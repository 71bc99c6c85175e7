import dataclasses
import json
import sys
import warnings

import numpy as np
import pytest
import scipy.io
import torch

from apnet_pyg.data import ZSLDataset, load_xlsa17, packaged_root
from apnet_pyg.data.xlsa17 import DATASETS
from tests.helpers.xlsa17_toy import (
    LABELS,
    MAT_V73_HEADER,
    NAMES,
    TEST_UNSEEN,
    TRAINVAL,
    VAL,
    convert_to_v73,
    index_list,
    names_cell,
    write_dataset,
)


def test_load_tiny_dataset(tmp_path):
    write_dataset(tmp_path)
    data = load_xlsa17(tmp_path, 'TOY')
    assert isinstance(data, ZSLDataset)
    assert data.name == 'TOY' and data.class_names == NAMES
    assert data.attributes.shape == (5, 7)
    assert data.attributes.dtype == torch.float32
    assert torch.allclose(data.attributes.norm(dim=1), torch.ones(5))
    assert data.features.shape == (12, 2048)
    assert data.features.dtype == torch.float32
    assert data.labels.tolist() == (LABELS - 1).tolist()
    assert data.trainval_loc.tolist() == (TRAINVAL - 1).tolist()
    assert data.test_unseen_loc.tolist() == (TEST_UNSEEN - 1).tolist()
    assert data.val_loc.tolist() == (VAL - 1).tolist()
    assert data.seen_classes.tolist() == [0, 1, 2]
    assert data.unseen_classes.tolist() == [3, 4]
    assert data.train_classes.tolist() == [0, 1]
    assert data.val_classes.tolist() == [2]
    assert not data.simulated and data.simulation is None
    assert data.num_classes == 5 and data.attribute_dim == 7
    assert data.num_images == 12
    # features[i] is column i of the 2048 x N matrix in the file.
    raw = scipy.io.loadmat(tmp_path / 'TOY' / 'res101.mat')['features']
    assert np.array_equal(data.features[4].numpy(), raw[:, 4])
    # images_of: the training images of the train classes within trainval.
    assert data.images_of(data.train_classes).tolist() == [0, 2, 1, 3]
    assert data.images_of([2], 'test_seen').tolist() == [8]
    for outside in ([-1], [data.num_classes]):  # Once: no images.
        with pytest.raises(
            ValueError, match="'classes' must be class indices in"
        ):
            data.images_of(outside)
    assert 'TOY' in repr(data)


def test_original_att_and_lowercase_name(tmp_path):
    write_dataset(tmp_path, name='TOY')
    data = load_xlsa17(tmp_path, 'toy', attributes='original_att')
    raw = scipy.io.loadmat(tmp_path / 'TOY' / 'att_splits.mat')
    assert np.allclose(data.attributes.numpy(), raw['original_att'].T)
    with pytest.raises(ValueError, match="'attributes' must be one of"):
        load_xlsa17(tmp_path, 'TOY', attributes='w2v')


@pytest.mark.parametrize(
    'dataset,scaled',
    [('AWA2', False), ('CUB', False), ('SUN', True), ('APY', True)],
)
def test_percent_attributes(dataset, scaled):
    # The authors' scale: original_att as stored for AWA and CUB (0-100),
    # SUN's and APY's fractions in [0, 1] times 100.
    raw = load_xlsa17(
        None, dataset, attributes='original_att', load_features=False
    ).attributes
    percent = load_xlsa17(
        None, dataset, attributes='percent', load_features=False
    ).attributes
    assert torch.allclose(percent, raw * 100 if scaled else raw)
    assert float(percent.max()) == pytest.approx(100.0)


def test_class_side_only(tmp_path):
    write_dataset(tmp_path)
    data = load_xlsa17(tmp_path, 'TOY', load_features=False)
    assert data.features is None and data.labels is None
    assert data.seen_classes.tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match='load_features=False'):
        data.images_of([0])


def test_classes_derived_from_labels_without_lists(tmp_path):
    write_dataset(
        tmp_path,
        lists={
            'trainvalclasses.txt': None,
            'testclasses.txt': None,
            'trainclasses1.txt': None,
            'valclasses1.txt': None,
        },
    )
    for f in (
        'trainvalclasses',
        'testclasses',
        'trainclasses1',
        'valclasses1',
    ):
        (tmp_path / 'TOY' / f'{f}.txt').unlink(missing_ok=True)
    data = load_xlsa17(tmp_path, 'TOY')
    assert data.seen_classes.tolist() == [0, 1, 2]
    assert data.unseen_classes.tolist() == [3, 4]
    assert data.train_classes is None and data.val_classes is None
    with pytest.raises(FileNotFoundError, match='testclasses.txt'):
        load_xlsa17(tmp_path, 'TOY', load_features=False)


def test_packaged_root_needs_load_features_false():
    with pytest.raises(FileNotFoundError, match='res101.mat.*not shipped'):
        load_xlsa17(None, 'AWA2')


# Bad input: one test per case -----------------------------------------------


def test_missing_dataset_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="No dataset folder 'TOY'"):
        load_xlsa17(tmp_path, 'TOY')


def test_missing_features_file(tmp_path):
    (write_dataset(tmp_path) / 'res101.mat').unlink()
    with pytest.raises(FileNotFoundError, match='res101.mat'):
        load_xlsa17(tmp_path, 'TOY')


def test_missing_splits_file(tmp_path):
    (write_dataset(tmp_path) / 'att_splits.mat').unlink()
    with pytest.raises(FileNotFoundError, match='att_splits.mat'):
        load_xlsa17(tmp_path, 'TOY')


@pytest.mark.parametrize(
    'key', ['att', 'allclasses_names', 'trainval_loc', 'test_unseen_loc']
)
def test_missing_split_key(tmp_path, key):
    write_dataset(tmp_path, drop=[key])
    with pytest.raises(ValueError, match=f"no variable '{key}'"):
        load_xlsa17(tmp_path, 'TOY')


@pytest.mark.parametrize('key', ['features', 'labels'])
def test_missing_feature_key(tmp_path, key):
    write_dataset(tmp_path, drop=[key])
    with pytest.raises(
        ValueError, match=f"res101.mat' has no variable '{key}'"
    ):
        load_xlsa17(tmp_path, 'TOY')


def test_wrong_key_type(tmp_path):
    write_dataset(tmp_path, splits={'att': names_cell(NAMES)})
    with pytest.raises(ValueError, match="'att' .* numeric"):
        load_xlsa17(tmp_path, 'TOY')
    write_dataset(tmp_path, splits={'allclasses_names': np.ones((5, 1))})
    with pytest.raises(ValueError, match='cell array of strings'):
        load_xlsa17(tmp_path, 'TOY')


def test_features_not_2048_by_n(tmp_path):
    write_dataset(
        tmp_path,
        features={'features': np.ones((LABELS.size, 2048), dtype=np.float32)},
    )
    with pytest.raises(ValueError, match='2048 x N.*looks transposed'):
        load_xlsa17(tmp_path, 'TOY')
    write_dataset(
        tmp_path,
        features={'features': np.ones((512, LABELS.size), dtype=np.float32)},
    )
    with pytest.raises(ValueError, match='2048 x N'):
        load_xlsa17(tmp_path, 'TOY')


def test_labels_not_n_by_1(tmp_path):
    write_dataset(tmp_path, features={'labels': np.ones((12, 2))})
    with pytest.raises(ValueError, match="'labels' .* N x 1"):
        load_xlsa17(tmp_path, 'TOY')


def test_att_not_a_by_c(tmp_path):
    rng = np.random.default_rng(0)
    write_dataset(tmp_path, splits={'att': rng.random((5, 7))})
    with pytest.raises(ValueError, match='A x C.*looks transposed'):
        load_xlsa17(tmp_path, 'TOY')


@pytest.mark.parametrize('bad', [0, 13])
def test_index_outside_range(tmp_path, bad):
    write_dataset(
        tmp_path, splits={'test_unseen_loc': index_list([10, 11, bad])}
    )
    with pytest.raises(ValueError, match=r'test_unseen_loc.*outside 1\.\.12'):
        load_xlsa17(tmp_path, 'TOY')


def test_overlapping_split_lists(tmp_path):
    write_dataset(tmp_path, splits={'test_seen_loc': index_list([7, 8, 1])})
    with pytest.raises(
        ValueError,
        match="'trainval_loc' and 'test_seen_loc' in .* share 1 images",
    ):
        load_xlsa17(tmp_path, 'TOY')


@pytest.mark.parametrize('bad', [0, 6])
def test_label_outside_range(tmp_path, bad):
    labels = LABELS.astype(np.float64).copy()
    labels[0] = bad
    write_dataset(tmp_path, features={'labels': labels.reshape(-1, 1)})
    with pytest.raises(ValueError, match=r"'labels' .* outside 1\.\.5"):
        load_xlsa17(tmp_path, 'TOY')


def test_non_integer_label(tmp_path):
    labels = LABELS.astype(np.float64).copy()
    labels[0] = 1.5
    write_dataset(tmp_path, features={'labels': labels.reshape(-1, 1)})
    with pytest.raises(ValueError, match='integers'):
        load_xlsa17(tmp_path, 'TOY')


def test_seen_unseen_overlap(tmp_path):
    write_dataset(tmp_path, lists={'testclasses.txt': NAMES[2:]})
    with pytest.raises(ValueError, match='overlap.*killer\\+whale'):
        load_xlsa17(tmp_path, 'TOY')


@pytest.mark.parametrize(
    'image, label, match',
    [
        (9, 1, 'test_unseen_loc.*with seen'),  # image 10 is in test_unseen_loc
        (0, 4, 'trainval_loc.*with unseen'),  # image 1 is in trainval_loc
    ],
)
def test_split_labelled_with_class_of_other_side(
    tmp_path, image, label, match
):
    labels = LABELS.copy()
    labels[image] = label
    write_dataset(
        tmp_path, features={'labels': labels.astype(np.float64).reshape(-1, 1)}
    )
    with pytest.raises(ValueError, match=match):
        load_xlsa17(tmp_path, 'TOY')


def test_unknown_class_name_in_list(tmp_path):
    write_dataset(tmp_path, lists={'testclasses.txt': ['beaver', 'unicorn']})
    with pytest.raises(ValueError, match='testclasses.txt.*unicorn'):
        load_xlsa17(tmp_path, 'TOY')


def test_validation_classes_outside_seen(tmp_path):
    write_dataset(tmp_path, lists={'valclasses1.txt': ['beaver']})
    with pytest.raises(ValueError, match='valclasses1.txt.*not seen'):
        load_xlsa17(tmp_path, 'TOY')


@pytest.mark.parametrize('value', [np.nan, np.inf])
def test_features_not_finite(tmp_path, value):
    features = np.ones((2048, LABELS.size), dtype=np.float32)
    features[3, 5] = value
    write_dataset(tmp_path, features={'features': features})
    with pytest.raises(ValueError, match=r'NaN or infinite .* \[6\]'):
        load_xlsa17(tmp_path, 'TOY')


def test_matlab_v73_without_h5py(tmp_path, monkeypatch):
    folder = write_dataset(tmp_path)
    # Writing a whole v7.3 file needs h5py; the header is what tells the
    # reader it needs h5py, so the header alone makes the case.
    (folder / 'res101.mat').write_bytes(MAT_V73_HEADER.ljust(512, b'\x00'))
    monkeypatch.setitem(sys.modules, 'h5py', None)  # import h5py fails
    with pytest.raises(ValueError, match='v7.3 \\(HDF5\\).*h5py'):
        load_xlsa17(tmp_path, 'TOY')


def _same_dataset(a, b):
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), field.name
        else:
            assert x == y, field.name


@pytest.mark.parametrize('attributes', ['att', 'original_att'])
def test_matlab_v73_reads_as_v5(tmp_path, attributes):
    pytest.importorskip('h5py')
    folder = write_dataset(tmp_path)
    v5 = load_xlsa17(tmp_path, 'TOY', attributes=attributes)
    for filename in ('att_splits.mat', 'res101.mat'):
        convert_to_v73(folder, filename)
    assert open(folder / 'res101.mat', 'rb').read(19) == b'MATLAB 7.3 MAT-file'
    _same_dataset(load_xlsa17(tmp_path, 'TOY', attributes=attributes), v5)


def test_matlab_v73_char_matrix_names(tmp_path):
    # A C x L char matrix (padded rows) instead of a cell array of names.
    pytest.importorskip('h5py')
    width = max(map(len, NAMES))
    folder = write_dataset(
        tmp_path,
        splits={
            'allclasses_names': np.array([name.ljust(width) for name in NAMES])
        },
    )
    assert load_xlsa17(tmp_path, 'TOY').class_names == NAMES
    convert_to_v73(folder, 'att_splits.mat')
    assert load_xlsa17(tmp_path, 'TOY').class_names == NAMES


@pytest.mark.parametrize('version', ['v5', 'v7.3'])
def test_empty_index_list(tmp_path, version):
    # MATLAB stores an empty v7.3 array as its dimensions: read as empty.
    folder = write_dataset(tmp_path, splits={'val_loc': index_list([])})
    if version == 'v7.3':
        pytest.importorskip('h5py')
        convert_to_v73(folder, 'att_splits.mat')
    with pytest.raises(ValueError, match="'val_loc' in .* is empty"):
        load_xlsa17(tmp_path, 'TOY')


def test_matlab_v73_truncated(tmp_path):
    pytest.importorskip('h5py')
    folder = write_dataset(tmp_path)
    convert_to_v73(folder, 'res101.mat')
    path = folder / 'res101.mat'
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(
        ValueError,
        match="Cannot read '.*res101.mat' with "
        'h5py: .*damaged, download it again',
    ):
        load_xlsa17(tmp_path, 'TOY')


def test_not_a_mat_file(tmp_path):
    folder = write_dataset(tmp_path)
    (folder / 'att_splits.mat').write_bytes(b'hello')
    with pytest.raises(ValueError, match='att_splits.mat'):
        load_xlsa17(tmp_path, 'TOY')


# Packaged class side --------------------------------------------------------

# classes, seen, unseen, attribute dim, trainval, test seen, test unseen
COUNTS = {
    'SUN': (717, 645, 72, 102, 10320, 2580, 1440),
    'CUB': (200, 150, 50, 312, 7057, 1764, 2967),
    'AWA1': (50, 40, 10, 85, 19832, 4958, 5685),
    'AWA2': (50, 40, 10, 85, 23527, 5882, 7913),
    'APY': (32, 20, 12, 64, 5932, 1483, 7924),
}


@pytest.mark.parametrize('name', DATASETS)
def test_packaged_class_side(name):
    assert (packaged_root() / name / 'att_splits.mat').is_file()
    data = load_xlsa17(None, name, load_features=False)
    classes, seen, unseen, dim, trainval, test_seen, test_unseen = COUNTS[name]
    assert data.num_classes == classes
    assert data.seen_classes.numel() == seen
    assert data.unseen_classes.numel() == unseen
    assert data.attribute_dim == dim
    assert data.trainval_loc.numel() == trainval
    assert data.test_seen_loc.numel() == test_seen
    assert data.test_unseen_loc.numel() == test_unseen
    assert torch.allclose(
        data.attributes.norm(dim=1), torch.ones(classes), atol=1e-5
    )
    train_val = torch.cat([data.train_classes, data.val_classes]).sort()[0]
    assert torch.equal(train_val, data.seen_classes)
    # The three lists partition the images 0..N-1.
    every = torch.cat(
        [data.trainval_loc, data.test_seen_loc, data.test_unseen_loc]
    ).sort()[0]
    assert torch.equal(every, torch.arange(every.numel()))


def test_class_without_images_when_sides_come_from_labels(tmp_path):
    # No class lists: seen and unseen classes are read from the labels, and
    # a class of allclasses_names without images is on neither side.
    write_dataset(
        tmp_path,
        splits={
            'allclasses_names': names_cell(NAMES + ['zebra']),
            'att': np.random.default_rng(0).random((7, 6)),
            'original_att': np.random.default_rng(0).random((7, 6)),
        },
        lists={
            name: None
            for name in (
                'trainvalclasses.txt',
                'testclasses.txt',
                'trainclasses1.txt',
                'valclasses1.txt',
            )
        },
    )
    data = load_xlsa17(tmp_path, 'TOY')
    assert data.num_classes == 6
    assert data.seen_classes.tolist() == [0, 1, 2]
    assert data.unseen_classes.tolist() == [3, 4]


def test_features_beyond_float32_fail_in_one_line_without_a_warning(tmp_path):
    write_dataset(tmp_path, features={'features': np.full((2048, 12), 1e300)})
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # NumPy's overflow warning included
        with pytest.raises(
            ValueError, match='contain NaN or infinite values in 12 images'
        ):
            load_xlsa17(tmp_path, 'TOY')


def test_fingerprint_tells_the_splits_apart(tiny_root):
    data = load_xlsa17(tiny_root, 'TINY')
    fingerprint = data.fingerprint()
    assert load_xlsa17(tiny_root, 'TINY').fingerprint() == fingerprint
    assert json.loads(json.dumps(fingerprint)) == fingerprint  # data.json
    # One image moved from the end of one list to the start of the next:
    # the lists joined end to end are the same.
    moved = dataclasses.replace(
        data,
        trainval_loc=data.trainval_loc[:-1],
        test_seen_loc=torch.cat([data.trainval_loc[-1:], data.test_seen_loc]),
    )
    # A class moved from the validation task's training classes to its
    # validation classes: the images are the same, the task is not.
    roles = dataclasses.replace(
        data,
        train_classes=data.train_classes[:-1],
        val_classes=torch.cat([data.train_classes[-1:], data.val_classes]),
    )
    features = dataclasses.replace(data, features=data.features + 1.0)
    for other, key in (
        (moved, 'splits'),
        (roles, 'class_splits'),
        (features, 'features'),
    ):
        changed = other.fingerprint()
        assert [k for k in fingerprint if changed[k] != fingerprint[k]] == [
            key
        ]
