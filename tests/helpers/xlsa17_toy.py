r"""A tiny xlsa17 dataset in the exact real layout, written for tests of
the reader (tests/data/test_xlsa17.py) and of its bad inputs
(tests/data/test_data_bad_input.py)."""

import numpy as np
import scipy.io

# A tiny dataset in the exact real layout: 5 classes (0, 1, 2 seen; 3, 4
# unseen), 12 images, attributes x classes, uint16 N x 1 index lists, C x 1
# object array of names, features 2048 x N, labels N x 1 double.
NAMES = ['antelope', 'grizzly+bear', 'killer+whale', 'beaver', 'dalmatian']
LABELS = np.array([1, 1, 2, 2, 3, 3, 1, 2, 3, 4, 4, 5])  # 1-based
TRAINVAL = np.array([1, 3, 5, 2, 4, 6])
TEST_SEEN = np.array([7, 8, 9])
TEST_UNSEEN = np.array([10, 11, 12])
TRAIN = np.array([1, 2, 3, 4, 7, 8])  # classes 1, 2 (1-based)
VAL = np.array([5, 6, 9])  # class 3


def names_cell(names):
    cell = np.empty((len(names), 1), dtype=object)
    for i, name in enumerate(names):
        cell[i, 0] = np.array([name])
    return cell


def index_list(index):
    return np.asarray(index, dtype=np.uint16).reshape(-1, 1)


def write_dataset(
    root, name='TOY', splits=None, features=None, lists=None, drop=(), seed=0
):
    rng = np.random.default_rng(seed)
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    att = rng.random((7, len(NAMES)))
    mat = {
        'allclasses_names': names_cell(NAMES),
        'att': att / np.linalg.norm(att, axis=0, keepdims=True),
        'original_att': 100 * att,
        'trainval_loc': index_list(TRAINVAL),
        'test_seen_loc': index_list(TEST_SEEN),
        'test_unseen_loc': index_list(TEST_UNSEEN),
        'train_loc': index_list(TRAIN),
        'val_loc': index_list(VAL),
    }
    mat.update(splits or {})
    for key in drop:
        mat.pop(key, None)
    scipy.io.savemat(folder / 'att_splits.mat', mat)
    res = {
        'features': rng.random((2048, LABELS.size)).astype(np.float32),
        'labels': LABELS.astype(np.float64).reshape(-1, 1),
        'image_files': names_cell(
            [f'img_{i}.jpg' for i in range(LABELS.size)]
        ),
    }
    res.update(features or {})
    for key in drop:
        res.pop(key, None)
    scipy.io.savemat(folder / 'res101.mat', res)
    class_lists = {
        'trainvalclasses.txt': NAMES[:3],
        'testclasses.txt': NAMES[3:],
        'trainclasses1.txt': NAMES[:2],
        'valclasses1.txt': NAMES[2:3],
    }
    class_lists.update(lists or {})
    for filename, names in class_lists.items():
        if names is not None:
            (folder / filename).write_text('\n'.join(names) + '\n')
    return folder


def write_mat_v73(path, variables):
    r"""Writes :obj:`variables` as MATLAB's `save -v7.3` does: an HDF5 file
    behind a 512-byte MATLAB header, arrays stored transposed with their
    MATLAB_class, cell arrays as object references into `#refs#`, char
    arrays as uint16 codes, empty arrays as their dimensions with
    MATLAB_empty."""
    import h5py

    classes = {
        'f': 'double',
        'u': 'uint16',
        'i': 'int32',
        'U': 'char',
        'O': 'cell',
    }

    def store(group, name, value):
        value = np.asarray(value)
        kind = value.dtype.kind
        if kind == 'f' and value.dtype == np.float32:
            matlab_class = 'single'
        else:
            matlab_class = classes[kind]
        if kind == 'U':  # MATLAB char: a rows x length matrix of codes
            value = np.array(
                [[ord(c) for c in row] for row in value.reshape(-1)],
                dtype=np.uint16,
            )
        if value.size == 0:
            node = group.create_dataset(
                name, data=np.array(value.shape, dtype=np.uint64)
            )
            node.attrs['MATLAB_empty'] = np.uint8(1)
        elif kind == 'O':
            refs = np.empty(value.shape, dtype=h5py.ref_dtype)
            for index in np.ndindex(value.shape):
                cell = f'{name}_{"_".join(map(str, index))}'
                refs[index] = store(
                    file.require_group('#refs#'), cell, value[index]
                ).ref
            node = group.create_dataset(name, data=refs.T)
        else:
            node = group.create_dataset(name, data=value.T)
        node.attrs['MATLAB_class'] = np.bytes_(matlab_class)
        return node

    with h5py.File(path, 'w', userblock_size=512) as file:
        for name, value in variables.items():
            store(file, name, value)
    with open(path, 'r+b') as file:
        file.write(MAT_V73_HEADER)


#: The header scipy's matfile_version reads in a v7.3 file: 116 bytes of
#: text, 8 of subsystem offset, version 0x0200 and the endian indicator.
MAT_V73_HEADER = (
    b'MATLAB 7.3 MAT-file, Platform: GLNXA64'.ljust(116, b' ')
    + b'\x00' * 8
    + b'\x00\x02'
    + b'IM'
)


def convert_to_v73(folder, filename):
    r"""Rewrites :obj:`folder/filename` (a v5 .mat file) in v7.3."""
    path = folder / filename
    variables = {
        key: value
        for key, value in scipy.io.loadmat(path).items()
        if not key.startswith('__')
    }
    path.unlink()
    write_mat_v73(path, variables)
