r"""Reading and checking the files of one xlsa17 dataset folder (the
layout is described in :mod:`apnet_pyg.data.xlsa17`, which assembles them
into a :class:`~apnet_pyg.data.xlsa17.ZSLDataset`): the .mat files (v5
through :obj:`scipy`, v7.3 through :obj:`h5py`), the class lists and the
simulator's sidecar. Every inconsistency raises a :class:`ValueError` (or
:class:`FileNotFoundError`) naming the file and the problem.
"""

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

FEATURE_DIM = 2048
FEATURES_FILE = 'res101.mat'
SPLITS_FILE = 'att_splits.mat'
SIMULATED_SIDECAR = 'SIMULATED.json'
SPLIT_KEYS = ('trainval', 'test_seen', 'test_unseen', 'train', 'val')
CLASS_LIST_FILES = {
    'seen': 'trainvalclasses.txt',
    'unseen': 'testclasses.txt',
    'train': 'trainclasses1.txt',
    'val': 'valclasses1.txt',
}


def read_class_names(splits: Dict[str, Any], path: Path) -> List[str]:
    class_names = _read_names(splits, 'allclasses_names', path)
    if len(set(class_names)) != len(class_names):
        raise ValueError(
            f"'allclasses_names' in '{path}' contains duplicate names"
        )
    return class_names


def read_attributes(
    splits: Dict[str, Any], kind: str, num_classes: int, path: Path
) -> np.ndarray:
    r"""The :obj:`A x C` attribute matrix of :obj:`kind` (see
    :data:`~apnet_pyg.data.xlsa17.ATTRIBUTE_KINDS`)."""
    stored = 'original_att' if kind == 'percent' else kind
    att = _numeric(splits, stored, path)
    if att.ndim != 2 or att.shape[1] != num_classes:
        hint = (
            ' (it looks transposed: the file stores attributes x classes)'
            if att.ndim == 2 and att.shape[0] == num_classes
            else ''
        )
        raise ValueError(
            f"'{stored}' in '{path}' must be A x C "
            f'(attributes x classes) with C={num_classes} '
            f'classes, got shape {att.shape}{hint}'
        )
    if not np.isfinite(att).all():
        raise ValueError(
            f"'{stored}' in '{path}' contains NaN or infinite values"
        )
    if kind == 'percent' and att.min() >= 0 and att.max() <= 1:
        att = att * 100.0  # Fractions (SUN, APY) to the 0-100 scale.
    return att


def read_split_indices(
    splits: Dict[str, Any], path: Path, num_images: Optional[int]
) -> Dict[str, Optional[np.ndarray]]:
    r"""The 0-based image index lists :obj:`<split>_loc` of
    :data:`SPLIT_KEYS` (:obj:`None` for a missing optional one), checked
    against :obj:`num_images` when the labels are loaded."""
    locs: Dict[str, Optional[np.ndarray]] = {}
    for split in SPLIT_KEYS:
        key = f'{split}_loc'
        required = split in ('trainval', 'test_seen', 'test_unseen')
        if key not in splits:
            if required:
                raise ValueError(
                    f"'{path}' has no variable '{key}' "
                    f'(found: {_keys(splits)})'
                )
            locs[split] = None
            continue
        locs[split] = _index_list(splits[key], key, path, num_images)
    _check_disjoint(locs, path)
    return locs


def read_class_roles(
    folder: Path,
    class_names: List[str],
    labels: Optional[np.ndarray],
    locs: Dict[str, Optional[np.ndarray]],
) -> Dict[str, Optional[np.ndarray]]:
    r"""The seen, unseen, train and val classes from the class lists (the
    seen and unseen ones from the labels of the splits when their lists
    are missing), checked for consistency."""
    name_to_index = {name: i for i, name in enumerate(class_names)}
    lists = {
        role: _read_class_list(folder / filename, name_to_index)
        for role, filename in CLASS_LIST_FILES.items()
    }
    seen, unseen = lists['seen'], lists['unseen']
    if seen is None or unseen is None:
        if labels is None:
            missing = [
                CLASS_LIST_FILES[r]
                for r in ('seen', 'unseen')
                if lists[r] is None
            ]
            raise FileNotFoundError(
                f"Cannot tell seen from unseen classes in '{folder}': "
                f'{", ".join(missing)} missing and no labels loaded '
                f'(load_features=False)'
            )
        if seen is None:
            seen = np.unique(
                labels[np.concatenate([locs['trainval'], locs['test_seen']])]
            )
        if unseen is None:
            unseen = np.unique(labels[locs['test_unseen']])
    overlap = np.intersect1d(seen, unseen)
    if overlap.size:
        raise ValueError(
            f"Seen and unseen classes overlap in '{folder}' "
            f'({CLASS_LIST_FILES["seen"]} vs {CLASS_LIST_FILES["unseen"]}): '
            f'{_names(overlap, class_names)}'
        )
    # Every class is seen or unseen (so in every benchmark file); a class
    # in neither list would silently get no images. (Sides read from the
    # labels instead leave out a class without images, as they should.)
    orphans = np.setdiff1d(
        np.arange(len(class_names)), np.union1d(seen, unseen)
    )
    if (
        orphans.size
        and lists['seen'] is not None
        and lists['unseen'] is not None
    ):
        raise ValueError(
            f"{orphans.size} classes of 'allclasses_names' are neither seen "
            f"nor unseen in '{folder}' ({CLASS_LIST_FILES['seen']}, "
            f'{CLASS_LIST_FILES["unseen"]}): '
            f'{_names(orphans[:5], class_names)}'
        )
    train, val = lists['train'], lists['val']
    for role, cls in (('train', train), ('val', val)):
        if cls is not None and np.setdiff1d(cls, seen).size:
            raise ValueError(
                f"'{folder / CLASS_LIST_FILES[role]}' lists classes that are "
                f'not seen classes: '
                f'{_names(np.setdiff1d(cls, seen), class_names)}'
            )
    if train is not None and val is not None:
        if np.intersect1d(train, val).size:
            raise ValueError(
                f"'{CLASS_LIST_FILES['train']}' and "
                f"'{CLASS_LIST_FILES['val']}' in '{folder}' overlap: "
                f'{_names(np.intersect1d(train, val), class_names)}'
            )
        # They split the seen classes (as in every benchmark dataset); a
        # seen class in neither would be left out of validation.
        left_out = np.setdiff1d(seen, np.union1d(train, val))
        if left_out.size:
            raise ValueError(
                f'{left_out.size} seen classes are in neither '
                f"'{CLASS_LIST_FILES['train']}' nor "
                f"'{CLASS_LIST_FILES['val']}' in '{folder}': "
                f'{_names(left_out[:5], class_names)}'
            )
    return {'seen': seen, 'unseen': unseen, 'train': train, 'val': val}


def check_labels_match_splits(
    folder: Path,
    class_names: List[str],
    labels: np.ndarray,
    locs: Dict[str, Optional[np.ndarray]],
    classes: Dict[str, Optional[np.ndarray]],
) -> None:
    # Images of a split must carry classes of the matching side, else the
    # label file and the split file do not belong together.
    for split, allowed, side in (
        ('trainval', classes['seen'], 'unseen'),
        ('test_seen', classes['seen'], 'unseen'),
        ('test_unseen', classes['unseen'], 'seen'),
    ):
        split_labels = labels[locs[split]]
        bad = ~np.isin(split_labels, allowed)
        if bad.any():
            raise ValueError(
                f"{int(bad.sum())} images of '{split}_loc' "
                f"('{folder / SPLITS_FILE}') are labelled in "
                f"'{folder / FEATURES_FILE}' with {side} (or unlisted) "
                f'classes, e.g. '
                f'{_names(np.unique(split_labels[bad])[:5], class_names)}'
            )


def read_simulation_sidecar(folder: Path) -> Optional[Dict[str, Any]]:
    r"""The simulator's sidecar (:obj:`None` for real features)."""
    sidecar = folder / SIMULATED_SIDECAR
    if not sidecar.exists():
        return None
    _check_is_file(sidecar)
    try:
        content = json.loads(sidecar.read_text())
    except ValueError as error:  # UnicodeDecodeError too.
        raise ValueError(
            f"'{sidecar}' is not valid JSON: {error}; "
            f'simulate the dataset again'
        ) from None
    if not isinstance(content, dict):
        raise ValueError(
            f"'{sidecar}' must hold a JSON object (got "
            f'{type(content).__name__}); simulate the dataset '
            f'again'
        )
    return content


# Reading ---------------------------------------------------------------------


def read_mat(
    path: Path, variable_names: Optional[Sequence[str]] = None
) -> Dict[str, Any]:
    from scipy.io import loadmat
    from scipy.io.matlab import matfile_version

    _check_is_file(path)
    try:
        major, _ = matfile_version(str(path))
    except Exception as error:  # scipy raises several types here
        raise ValueError(
            f"'{path}' is not a MATLAB .mat file ({error})"
        ) from error
    if major == 2:
        return _read_mat_v73(path, variable_names)
    try:
        return loadmat(str(path), variable_names=variable_names)
    except Exception as error:
        raise ValueError(
            f"Cannot read '{path}' with scipy.io.loadmat: {error}"
        ) from error


def _read_mat_v73(
    path: Path, variable_names: Optional[Sequence[str]]
) -> Dict[str, Any]:
    # MATLAB v7.3 files are HDF5: scipy cannot read them. h5py is optional.
    try:
        import h5py
    except ImportError:
        raise ValueError(
            f"'{path}' is a MATLAB v7.3 (HDF5) file, which scipy.io.loadmat "
            f'cannot read. Install h5py to read it, or re-save it in MATLAB '
            f"as v7 (save(..., '-v7')); the benchmark's own files are v5."
        ) from None

    def convert(file, node):
        if h5py.check_dtype(ref=node.dtype) is not None:  # a cell array
            refs = node[()]
            cells = np.empty(refs.shape, dtype=object)
            for index in np.ndindex(refs.shape):
                cells[index] = convert(file, file[refs[index]])
            return cells.T
        data = np.asarray(node[()])
        if node.attrs.get('MATLAB_empty', 0):
            # An empty array is stored as its dimensions.
            return np.zeros(tuple(int(d) for d in data.ravel()))
        if node.attrs.get('MATLAB_class') in (b'char', 'char'):
            # One string per row, as scipy.io.loadmat reads a char matrix.
            rows = np.atleast_2d(data.T)
            return np.array([''.join(map(chr, row)) for row in rows])
        return data.T  # h5py sees MATLAB arrays transposed

    try:
        with h5py.File(path, 'r') as file:
            return {
                key: convert(file, file[key])
                for key in file.keys()
                if not key.startswith('#')
                and (variable_names is None or key in variable_names)
            }
    except OSError as error:  # a truncated or corrupt HDF5 file
        raise ValueError(
            f"Cannot read '{path}' with h5py: {error}; the "
            f'file is damaged, download it again'
        ) from None


def _check_is_file(path: Path) -> None:
    if path.is_dir():
        raise IsADirectoryError(
            f"'{path}' is a directory where a file is "
            f'expected: replace it with the file'
        )
    if not path.is_file():
        raise FileNotFoundError(f"Missing file '{path}'")


def _keys(mat: Dict[str, Any]) -> List[str]:
    return sorted(k for k in mat if not k.startswith('__'))


def _numeric(mat: Dict[str, Any], key: str, path: Path) -> np.ndarray:
    if key not in mat:
        raise ValueError(
            f"'{path}' has no variable '{key}' (found: {_keys(mat)})"
        )
    value = mat[key]
    if not isinstance(value, np.ndarray):
        # e.g. a MATLAB sparse matrix, which scipy reads as a sparse array
        # of a numeric dtype.
        raise ValueError(
            f"'{key}' in '{path}' must be a dense numeric "
            f'array (got {type(value).__name__}): save it as a '
            f'full matrix'
        )
    if value.dtype.kind not in 'biuf':
        raise ValueError(
            f"'{key}' in '{path}' must be a numeric array (got {value.dtype})"
        )
    return value


def _integers(value: np.ndarray, key: str, path: Path) -> np.ndarray:
    if value.dtype.kind == 'f':
        if not np.isfinite(value).all() or (value != np.round(value)).any():
            raise ValueError(
                f"'{key}' in '{path}' must hold integers "
                f'(found non-integral values)'
            )
    return value.astype(np.int64).reshape(-1)


def _index_list(
    value: Any, key: str, path: Path, num_images: Optional[int]
) -> np.ndarray:
    value = _numeric({key: value}, key, path)
    if value.ndim != 2 or 1 not in value.shape:
        raise ValueError(
            f"'{key}' in '{path}' must be an N x 1 index list "
            f'(got shape {value.shape})'
        )
    index = _integers(value, key, path)
    upper = num_images if num_images is not None else np.iinfo(np.int64).max
    bad = (index < 1) | (index > upper)
    if bad.any():
        bound = f'1..{num_images}' if num_images is not None else '>= 1'
        raise ValueError(
            f"'{key}' in '{path}' has {int(bad.sum())} indices "
            f'outside {bound} (1-based; e.g. '
            f'{index[bad][:3].tolist()})'
        )
    if np.unique(index).size != index.size:
        raise ValueError(f"'{key}' in '{path}' contains duplicate indices")
    if not index.size:
        raise ValueError(
            f"'{key}' in '{path}' is empty: every split of the "
            f'benchmark lists images'
        )
    return index - 1


def _check_disjoint(locs: Dict[str, Optional[np.ndarray]], path: Path) -> None:
    # train_loc and val_loc overlap test_seen_loc in the benchmark's own
    # files (see ZSLDataset), so only these pairs must be disjoint.
    pairs = (
        ('trainval', 'test_seen'),
        ('trainval', 'test_unseen'),
        ('test_seen', 'test_unseen'),
        ('train', 'val'),
        ('train', 'test_unseen'),
        ('val', 'test_unseen'),
    )
    for a, b in pairs:
        if locs[a] is not None and locs[b] is not None:
            shared = np.intersect1d(locs[a], locs[b])
            if shared.size:
                raise ValueError(
                    f"'{a}_loc' and '{b}_loc' in '{path}' share "
                    f'{shared.size} images (e.g. 1-based '
                    f'{(shared[:3] + 1).tolist()})'
                )


def _cell_to_str(value: Any) -> str:
    while (
        isinstance(value, np.ndarray)
        and value.dtype == object
        and value.size == 1
    ):
        value = value.reshape(-1)[0]
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind == 'U':
        return ''.join(value.reshape(-1).tolist())
    if isinstance(value, np.ndarray) and value.size == 0:
        return ''
    raise TypeError(type(value).__name__)


def _read_names(mat: Dict[str, Any], key: str, path: Path) -> List[str]:
    if key not in mat:
        raise ValueError(
            f"'{path}' has no variable '{key}' (found: {_keys(mat)})"
        )
    value = mat[key]
    if isinstance(value, np.ndarray) and value.dtype.kind == 'U':
        return [s.rstrip() for s in value.reshape(-1).tolist()]  # char matrix
    if (
        not isinstance(value, np.ndarray)
        or value.dtype != object
        or value.ndim != 2
        or 1 not in value.shape
    ):
        raise ValueError(
            f"'{key}' in '{path}' must be a C x 1 cell array of "
            f'strings (got {getattr(value, "dtype", value)} '
            f'{getattr(value, "shape", "")})'
        )
    try:
        return [_cell_to_str(v).strip() for v in value.reshape(-1)]
    except TypeError as error:
        raise ValueError(
            f"'{key}' in '{path}' must be a cell array of "
            f'strings (found an element of type {error})'
        ) from error


def _read_class_list(
    path: Path, name_to_index: Dict[str, int]
) -> Optional[np.ndarray]:
    if not path.exists():
        return None
    _check_is_file(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError as error:
        raise ValueError(
            f"'{path}' is not a text file of class names "
            f'({error.reason} at byte {error.start})'
        ) from None
    names = [line.strip() for line in text.splitlines() if line.strip()]
    unknown = [name for name in names if name not in name_to_index]
    if unknown:
        raise ValueError(
            f"'{path}' lists {len(unknown)} class names that are "
            f"not in 'allclasses_names': {unknown[:5]}"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"'{path}' lists a class more than once")
    if not names:
        raise ValueError(
            f"'{path}' lists no classes: restore it from the "
            f'benchmark or delete it'
        )
    return np.array([name_to_index[name] for name in names], dtype=np.int64)


def read_features(path: Path, num_classes: int):
    mat = read_mat(path, variable_names=['features', 'labels'])
    for key in ('features', 'labels'):
        if key not in mat:
            raise ValueError(
                f"'{path}' has no variable '{key}' (found: {_whos(path)})"
            )
    features = _numeric(mat, 'features', path)
    labels = _numeric(mat, 'labels', path)
    if labels.ndim != 2 or labels.shape[1] != 1:
        raise ValueError(
            f"'labels' in '{path}' must be N x 1 (got shape {labels.shape})"
        )
    num_images = labels.shape[0]
    if features.shape != (FEATURE_DIM, num_images):
        hint = (
            ' (it looks transposed)'
            if features.shape == (num_images, FEATURE_DIM)
            else ''
        )
        raise ValueError(
            f"'features' in '{path}' must be {FEATURE_DIM} x N "
            f"with N={num_images} (the rows of 'labels'), got "
            f'shape {features.shape}{hint}'
        )
    labels = _integers(labels, 'labels', path)
    bad = (labels < 1) | (labels > num_classes)
    if bad.any():
        raise ValueError(
            f"'labels' in '{path}' has {int(bad.sum())} values "
            f'outside 1..{num_classes} (1-based into '
            f"'allclasses_names'; e.g. "
            f'{labels[bad][:3].tolist()})'
        )
    # The file stores features column-major as 2048 x N, so the transpose is
    # a C-contiguous N x 2048 view: no copy unless the dtype changes.
    # Values beyond float32's range become inf, reported below (not as
    # NumPy's overflow warning).
    with np.errstate(over='ignore'):
        features = np.ascontiguousarray(features.T, dtype=np.float32)
    if not np.isfinite(features).all():
        rows = np.flatnonzero(~np.isfinite(features).all(axis=1))
        raise ValueError(
            f"'features' in '{path}' contain NaN or infinite "
            f'values in {rows.size} images (e.g. 1-based '
            f'{(rows[:3] + 1).tolist()})'
        )
    if features.size and not features.any():
        raise ValueError(
            f"'features' in '{path}' are all zero: no image "
            f'can be told from another; re-extract them'
        )
    return features, labels - 1


def _whos(path: Path) -> List[str]:
    from scipy.io import whosmat

    try:
        return sorted(name for name, _, _ in whosmat(str(path)))
    except Exception:  # the v7.3 path or an unreadable header
        return []


def _names(classes: np.ndarray, class_names: List[str]) -> List[str]:
    return [class_names[int(c)] for c in np.asarray(classes).reshape(-1)]
