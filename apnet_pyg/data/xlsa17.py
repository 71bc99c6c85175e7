r"""Reader for the xlsa17 zero-shot learning benchmark ("Proposed Split" of
Xian et al., TPAMI 2018), the data APNet is evaluated on.

One dataset folder holds, exactly as distributed by the benchmark's authors::

    <DATASET>/res101.mat        features (2048 x N), labels (N x 1,
                                1-based), image_files (N x 1 cell)
    <DATASET>/att_splits.mat    att / original_att (A x C),
                                allclasses_names (C x 1 cell), 1-based
                                index lists trainval_loc, test_seen_loc,
                                test_unseen_loc, train_loc, val_loc
    <DATASET>/trainvalclasses.txt, testclasses.txt, trainclasses1.txt,
              valclasses1.txt   (class lists, optional)

The class side of AWA1, AWA2, CUB, SUN and APY ships with the package
(:func:`packaged_root`); the image side (:obj:`res101.mat`) does not, and is
either downloaded from the benchmark or simulated with
:func:`apnet_pyg.data.simulate_xlsa17`, which writes a :obj:`SIMULATED.json`
sidecar that sets :obj:`ZSLDataset.simulated`.

Everything returned is 0-based; every inconsistency between the files raises
a :class:`ValueError` (or :class:`FileNotFoundError`) naming the file and the
problem, because a silently shifted label or leaked unseen class would make
any accuracy meaningless.
"""
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor

from apnet_pyg.utils import as_index_tensor, check_bool

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
DATASETS = ('AWA1', 'AWA2', 'CUB', 'SUN', 'APY')
#: The attribute matrices a dataset can be read with: the benchmark's
#: L2-normalised :obj:`att`, the raw :obj:`original_att`, and
#: :obj:`original_att` on a 0-100 scale (:obj:`"percent"`): AWA and CUB
#: store it so, SUN and APY store fractions in [0, 1], which the APNet
#: authors' data preparation multiplies by 100. AWA1's and AWA2's files
#: hold -1 (an unknown value) for antelope's first four attributes in
#: :obj:`original_att` (so in :obj:`"percent"` too) and a small negative
#: value there in :obj:`att`, its normalised copy; they are read as stored.
ATTRIBUTE_KINDS = ('att', 'original_att', 'percent')

PathLike = Union[str, Path]


def packaged_root() -> Path:
    r"""Returns the folder of the class side of AWA1, AWA2, CUB, SUN and APY
    shipped with the package (:obj:`att_splits.mat` and the class lists, no
    :obj:`res101.mat`)."""
    return Path(__file__).resolve().parent / 'xlsa17'


@dataclass(eq=False, repr=False)
class ZSLDataset:
    r"""One xlsa17 dataset, 0-based throughout.

    Attributes:
        name (str): Dataset name (e.g. :obj:`'AWA2'`).
        class_names (List[str]): The :obj:`C` class names, in
            :obj:`allclasses_names` order (class :obj:`i` is
            :obj:`class_names[i]`).
        attributes (Tensor): Class attributes, one row per class.
            Shape :obj:`[C, A]`, float32.
        features (Tensor, optional): Image features. Shape
            :obj:`[N, 2048]`, float32. :obj:`None` when not loaded.
        labels (Tensor, optional): Class of each image. Shape :obj:`[N]`,
            int64 in :obj:`[0, C)`. :obj:`None` when not loaded.
        trainval_loc, test_seen_loc, test_unseen_loc (Tensor): Image indices
            of the three benchmark splits, int64 in :obj:`[0, N)`.
        train_loc, val_loc (Tensor, optional): Image indices of the
            benchmark's validation split (:obj:`None` when absent). In the
            benchmark's AWA1, AWA2, CUB and SUN files they also hold
            :obj:`test_seen_loc` images (AWA2: 4,031 and 1,851), so a model
            trained on them has seen test images; this package's validation
            uses the class lists and :obj:`trainval_loc` instead
            (:func:`apnet_pyg.data.splits.seen_validation_split`).
        seen_classes, unseen_classes (Tensor): Sorted class indices of the
            seen (trainval) and unseen (test) classes.
        train_classes, val_classes (Tensor, optional): Sorted class indices
            of the class-level validation split of the seen classes
            (:obj:`trainclasses1.txt` / :obj:`valclasses1.txt`).
        simulated (bool): :obj:`True` when the folder holds the simulator's
            :obj:`SIMULATED.json` sidecar: the features are synthetic.
        simulation (dict, optional): The sidecar's content (seed, options,
            simulator version).
    """
    name: str
    class_names: List[str]
    attributes: Tensor
    features: Optional[Tensor]
    labels: Optional[Tensor]
    trainval_loc: Tensor
    test_seen_loc: Tensor
    test_unseen_loc: Tensor
    train_loc: Optional[Tensor]
    val_loc: Optional[Tensor]
    seen_classes: Tensor
    unseen_classes: Tensor
    train_classes: Optional[Tensor] = None
    val_classes: Optional[Tensor] = None
    simulated: bool = False
    simulation: Optional[Dict[str, Any]] = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def attribute_dim(self) -> int:
        return self.attributes.size(1)

    @property
    def num_images(self) -> Optional[int]:
        return None if self.labels is None else self.labels.numel()

    def loc(self, split: str) -> Tensor:
        r"""Returns the image indices of :obj:`split`, one of
        :obj:`'trainval'`, :obj:`'test_seen'`, :obj:`'test_unseen'`,
        :obj:`'train'`, :obj:`'val'`."""
        if split not in SPLIT_KEYS:
            raise ValueError(f"Unknown split {split!r} for 'split' "
                             f"(expected one of {', '.join(SPLIT_KEYS)})")
        index = getattr(self, f'{split}_loc')
        if index is None:
            raise ValueError(f"Dataset '{self.name}' has no '{split}_loc'")
        return index

    def fingerprint(self) -> Dict[str, Any]:
        r"""What identifies the data a model was trained on: the name,
        sizes and CRC-32 checksums of the class names, attributes, image
        features, labels, each image split and each class split (the
        validation task's :obj:`train` and :obj:`val` ones included;
        :obj:`None` for what is not loaded).
        A run records it, so that resuming or evaluating it on other data
        (another simulation, another folder) is refused rather than mixed.
        """
        def crc(value: Union[Tensor, bytes, None]) -> Optional[str]:
            if value is None:
                return None
            if isinstance(value, Tensor):
                # Read in place through the buffer protocol: AWA2's
                # features are 305 MB, which tobytes() would copy.
                value = value.detach().cpu().contiguous().numpy()
            return f'{zlib.crc32(value):08x}'

        return {
            'dataset': self.name,
            'classes': self.num_classes,
            'class_names': crc('\n'.join(self.class_names).encode()),
            'attributes': crc(self.attributes),
            'images': self.num_images,
            'features': crc(self.features),
            'labels': crc(self.labels),
            # One checksum per list: an image or class moved from one list
            # to the next changes them.
            'splits': {split: crc(getattr(self, f'{split}_loc'))
                       for split in ('trainval', 'test_seen', 'test_unseen',
                                     'train', 'val')},
            'class_splits': {split: crc(getattr(self, f'{split}_classes'))
                             for split in ('seen', 'unseen', 'train',
                                           'val')},
        }

    def images_of(self, classes: Union[Tensor, Sequence[int]],
                  split: str = 'trainval') -> Tensor:
        r"""Returns the indices of the images of :obj:`split` whose label is
        one of :obj:`classes` (e.g. the training images of
        :obj:`train_classes` within :obj:`'trainval'`), in split order.

        Args:
            classes (Tensor or Sequence[int]): Class indices.
            split (str, optional): The split to select from.
                (default: :obj:`'trainval'`)

        Returns:
            Tensor: Image indices, int64.
        """
        if self.labels is None:
            raise ValueError(f"Dataset '{self.name}' was loaded without "
                             f"features/labels (load_features=False)")
        index = self.loc(split)
        classes = as_index_tensor(classes, 'classes')
        outside = (classes < 0) | (classes >= self.num_classes)
        if bool(outside.any()):
            raise ValueError(f"'classes' must be class indices in "
                             f"[0, {self.num_classes - 1}] (got "
                             f"{int(classes[outside][0])})")
        keep = torch.isin(self.labels[index], classes)
        return index[keep]

    def __repr__(self) -> str:
        images = ('no images' if self.labels is None else
                  f'images={self.num_images}')
        tag = ', simulated' if self.simulated else ''
        return (f'{self.__class__.__name__}({self.name}, '
                f'classes={self.num_classes} '
                f'({self.seen_classes.numel()} seen, '
                f'{self.unseen_classes.numel()} unseen), '
                f'attributes={self.attribute_dim}, {images}{tag})')


def load_xlsa17(root: Optional[PathLike], dataset: str,
                attributes: str = 'att',
                load_features: bool = True) -> ZSLDataset:
    r"""Reads one dataset of the xlsa17 benchmark in its original layout.

    Args:
        root (str or Path, optional): Folder holding :obj:`<DATASET>/`.
            :obj:`None` reads the class side shipped with the package (then
            :obj:`load_features` must be :obj:`False`).
        dataset (str): Dataset folder name (:obj:`'AWA1'`, :obj:`'AWA2'`,
            :obj:`'CUB'`, :obj:`'SUN'`, :obj:`'APY'`; case-insensitive when
            only the upper-case folder exists).
        attributes (str, optional): :obj:`'att'` (L2-normalised per class,
            the benchmark's default), :obj:`'original_att'` (raw values as
            stored) or :obj:`'percent'` (:obj:`original_att` on a 0-100
            scale: multiplied by 100 when every stored value lies in
            [0, 1], as for SUN and APY; the APNet authors' input).
            (default: :obj:`'att'`)
        load_features (bool, optional): Read :obj:`res101.mat` (features and
            labels). Without them, the seen/unseen classes come from
            :obj:`trainvalclasses.txt` / :obj:`testclasses.txt` alone.
            (default: :obj:`True`)

    Returns:
        ZSLDataset

    Shapes:
        - attributes: :obj:`[C, A]`; features: :obj:`[N, 2048]`;
          labels: :obj:`[N]`.
    """
    if attributes not in ATTRIBUTE_KINDS:
        raise ValueError(f"'attributes' must be one of "
                         f"{', '.join(ATTRIBUTE_KINDS)} (got '{attributes}')")
    check_dataset_name(dataset)
    check_bool(load_features, 'load_features')
    if root is None:
        if load_features:
            raise FileNotFoundError(
                f"The package ships only the class side of xlsa17 "
                f"(att_splits.mat and class lists); '{FEATURES_FILE}' is not "
                f"shipped. Pass load_features=False for the class side, "
                f"simulate the image side with "
                f"apnet_pyg.data.simulate_xlsa17('{dataset}', out_dir) (or "
                f"'apnet-zsl simulate') and load from out_dir, or download "
                f"the benchmark (xlsa17.zip from Xian et al.) and pass its "
                f"folder as 'root'.")
        root = packaged_root()
    folder = dataset_dir(root, dataset)
    splits_path = folder / SPLITS_FILE
    splits = _read_mat(splits_path)

    class_names = _read_class_names(splits, splits_path)
    att = _read_attributes(splits, attributes, len(class_names), splits_path)
    features = labels = None
    if load_features:
        features, labels = _read_features(folder / FEATURES_FILE,
                                          len(class_names))
    locs = _read_split_indices(splits, splits_path,
                               None if labels is None else labels.shape[0])
    classes = _read_class_roles(folder, class_names, labels, locs)
    if labels is not None:
        _check_labels_match_splits(folder, class_names, labels, locs,
                                   classes)
    simulation = _read_simulation_sidecar(folder)

    def tensor(array: Optional[np.ndarray]) -> Optional[Tensor]:
        return None if array is None else torch.from_numpy(
            np.ascontiguousarray(array, dtype=np.int64))

    return ZSLDataset(
        name=folder.name,
        class_names=class_names,
        attributes=torch.from_numpy(np.ascontiguousarray(
            att.T, dtype=np.float32)),
        features=None if features is None else torch.from_numpy(features),
        labels=tensor(labels),
        trainval_loc=tensor(locs['trainval']),
        test_seen_loc=tensor(locs['test_seen']),
        test_unseen_loc=tensor(locs['test_unseen']),
        train_loc=tensor(locs['train']),
        val_loc=tensor(locs['val']),
        seen_classes=tensor(np.sort(classes['seen'])),
        unseen_classes=tensor(np.sort(classes['unseen'])),
        train_classes=tensor(None if classes['train'] is None else
                             np.sort(classes['train'])),
        val_classes=tensor(None if classes['val'] is None else
                           np.sort(classes['val'])),
        simulated=simulation is not None,
        simulation=simulation,
    )


def _read_class_names(splits: Dict[str, Any], path: Path) -> List[str]:
    class_names = _read_names(splits, 'allclasses_names', path)
    if len(set(class_names)) != len(class_names):
        raise ValueError(f"'allclasses_names' in '{path}' contains "
                         f"duplicate names")
    return class_names


def _read_attributes(splits: Dict[str, Any], kind: str, num_classes: int,
                     path: Path) -> np.ndarray:
    r"""The :obj:`A x C` attribute matrix of :obj:`kind` (see
    :data:`ATTRIBUTE_KINDS`)."""
    stored = 'original_att' if kind == 'percent' else kind
    att = _numeric(splits, stored, path)
    if att.ndim != 2 or att.shape[1] != num_classes:
        hint = (' (it looks transposed: the file stores attributes x '
                'classes)' if att.ndim == 2 and att.shape[0] == num_classes
                else '')
        raise ValueError(f"'{stored}' in '{path}' must be A x C "
                         f"(attributes x classes) with C={num_classes} "
                         f"classes, got shape {att.shape}{hint}")
    if not np.isfinite(att).all():
        raise ValueError(f"'{stored}' in '{path}' contains NaN or infinite "
                         f"values")
    if kind == 'percent' and att.min() >= 0 and att.max() <= 1:
        att = att * 100.0  # Fractions (SUN, APY) to the 0-100 scale.
    return att


def _read_split_indices(splits: Dict[str, Any], path: Path,
                        num_images: Optional[int]
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
                raise ValueError(f"'{path}' has no variable '{key}' "
                                 f"(found: {_keys(splits)})")
            locs[split] = None
            continue
        locs[split] = _index_list(splits[key], key, path, num_images)
    _check_disjoint(locs, path)
    return locs


def _read_class_roles(folder: Path, class_names: List[str],
                      labels: Optional[np.ndarray],
                      locs: Dict[str, Optional[np.ndarray]]
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
            missing = [CLASS_LIST_FILES[r] for r in ('seen', 'unseen')
                       if lists[r] is None]
            raise FileNotFoundError(
                f"Cannot tell seen from unseen classes in '{folder}': "
                f"{', '.join(missing)} missing and no labels loaded "
                f"(load_features=False)")
        if seen is None:
            seen = np.unique(labels[np.concatenate(
                [locs['trainval'], locs['test_seen']])])
        if unseen is None:
            unseen = np.unique(labels[locs['test_unseen']])
    overlap = np.intersect1d(seen, unseen)
    if overlap.size:
        raise ValueError(
            f"Seen and unseen classes overlap in '{folder}' "
            f"({CLASS_LIST_FILES['seen']} vs {CLASS_LIST_FILES['unseen']}): "
            f"{_names(overlap, class_names)}")
    # Every class is seen or unseen (so in every benchmark file); a class
    # in neither list would silently get no images. (Sides read from the
    # labels instead leave out a class without images, as they should.)
    orphans = np.setdiff1d(np.arange(len(class_names)),
                           np.union1d(seen, unseen))
    if orphans.size and lists['seen'] is not None and \
            lists['unseen'] is not None:
        raise ValueError(
            f"{orphans.size} classes of 'allclasses_names' are neither seen "
            f"nor unseen in '{folder}' ({CLASS_LIST_FILES['seen']}, "
            f"{CLASS_LIST_FILES['unseen']}): "
            f"{_names(orphans[:5], class_names)}")
    train, val = lists['train'], lists['val']
    for role, cls in (('train', train), ('val', val)):
        if cls is not None and np.setdiff1d(cls, seen).size:
            raise ValueError(
                f"'{folder / CLASS_LIST_FILES[role]}' lists classes that are "
                f"not seen classes: "
                f"{_names(np.setdiff1d(cls, seen), class_names)}")
    if train is not None and val is not None:
        if np.intersect1d(train, val).size:
            raise ValueError(
                f"'{CLASS_LIST_FILES['train']}' and "
                f"'{CLASS_LIST_FILES['val']}' in '{folder}' overlap: "
                f"{_names(np.intersect1d(train, val), class_names)}")
        # They split the seen classes (as in every benchmark dataset); a
        # seen class in neither would be left out of validation.
        left_out = np.setdiff1d(seen, np.union1d(train, val))
        if left_out.size:
            raise ValueError(
                f"{left_out.size} seen classes are in neither "
                f"'{CLASS_LIST_FILES['train']}' nor "
                f"'{CLASS_LIST_FILES['val']}' in '{folder}': "
                f"{_names(left_out[:5], class_names)}")
    return {'seen': seen, 'unseen': unseen, 'train': train, 'val': val}


def _check_labels_match_splits(folder: Path, class_names: List[str],
                               labels: np.ndarray,
                               locs: Dict[str, Optional[np.ndarray]],
                               classes: Dict[str, Optional[np.ndarray]]
                               ) -> None:
    # Images of a split must carry classes of the matching side, else the
    # label file and the split file do not belong together.
    for split, allowed, side in (('trainval', classes['seen'], 'unseen'),
                                 ('test_seen', classes['seen'], 'unseen'),
                                 ('test_unseen', classes['unseen'], 'seen')):
        split_labels = labels[locs[split]]
        bad = ~np.isin(split_labels, allowed)
        if bad.any():
            raise ValueError(
                f"{int(bad.sum())} images of '{split}_loc' "
                f"('{folder / SPLITS_FILE}') are labelled in "
                f"'{folder / FEATURES_FILE}' with {side} (or unlisted) "
                f"classes, e.g. "
                f"{_names(np.unique(split_labels[bad])[:5], class_names)}")


def _read_simulation_sidecar(folder: Path) -> Optional[Dict[str, Any]]:
    r"""The simulator's sidecar (:obj:`None` for real features)."""
    sidecar = folder / SIMULATED_SIDECAR
    if not sidecar.exists():
        return None
    _check_is_file(sidecar)
    try:
        content = json.loads(sidecar.read_text())
    except ValueError as error:  # UnicodeDecodeError too.
        raise ValueError(f"'{sidecar}' is not valid JSON: {error}; "
                         f"simulate the dataset again") from None
    if not isinstance(content, dict):
        raise ValueError(f"'{sidecar}' must hold a JSON object (got "
                         f"{type(content).__name__}); simulate the dataset "
                         f"again")
    return content


def check_dataset_name(dataset: Any) -> None:
    r"""Raises unless :obj:`dataset` is a folder name (not empty, not a
    path: :obj:`<root>/<dataset>` must stay inside :obj:`root`)."""
    if not isinstance(dataset, str) or not dataset or \
            dataset in ('.', '..') or '/' in dataset or '\\' in dataset:
        raise ValueError(f"'dataset' must be a dataset folder name such as "
                         f"'AWA2' (got {dataset!r})")


def dataset_dir(root: PathLike, dataset: str) -> Path:
    r"""Returns :obj:`<root>/<dataset>` (trying the upper-case name too)."""
    check_dataset_name(dataset)
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"The data root '{root}' is a file: pass "
                                 f"the folder holding <DATASET>/")
    for name in (dataset, dataset.upper()):
        if (root / name).is_dir():
            return root / name
    found = sorted(p.name for p in root.iterdir() if p.is_dir()) \
        if root.is_dir() else []
    raise FileNotFoundError(f"No dataset folder '{dataset}' in '{root}' "
                            f"(found: {found or 'nothing'})")


# Reading ---------------------------------------------------------------------

def _read_mat(path: Path,
              variable_names: Optional[Sequence[str]] = None
              ) -> Dict[str, Any]:
    from scipy.io import loadmat
    from scipy.io.matlab import matfile_version

    _check_is_file(path)
    try:
        major, _ = matfile_version(str(path))
    except Exception as error:  # scipy raises several types here
        raise ValueError(f"'{path}' is not a MATLAB .mat file ({error})")
    if major == 2:
        return _read_mat_v73(path, variable_names)
    try:
        return loadmat(str(path), variable_names=variable_names)
    except Exception as error:
        raise ValueError(f"Cannot read '{path}' with scipy.io.loadmat: "
                         f"{error}")


def _read_mat_v73(path: Path,
                  variable_names: Optional[Sequence[str]]) -> Dict[str, Any]:
    # MATLAB v7.3 files are HDF5: scipy cannot read them. h5py is optional.
    try:
        import h5py
    except ImportError:
        raise ValueError(
            f"'{path}' is a MATLAB v7.3 (HDF5) file, which scipy.io.loadmat "
            f"cannot read. Install h5py to read it, or re-save it in MATLAB "
            f"as v7 (save(..., '-v7')); the benchmark's own files are v5.")

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
            return {key: convert(file, file[key]) for key in file.keys()
                    if not key.startswith('#') and
                    (variable_names is None or key in variable_names)}
    except OSError as error:  # a truncated or corrupt HDF5 file
        raise ValueError(f"Cannot read '{path}' with h5py: {error}; the "
                         f"file is damaged, download it again") from None


def _check_is_file(path: Path) -> None:
    if path.is_dir():
        raise IsADirectoryError(f"'{path}' is a directory where a file is "
                                f"expected: replace it with the file")
    if not path.is_file():
        raise FileNotFoundError(f"Missing file '{path}'")


def _keys(mat: Dict[str, Any]) -> List[str]:
    return sorted(k for k in mat if not k.startswith('__'))


def _numeric(mat: Dict[str, Any], key: str, path: Path) -> np.ndarray:
    if key not in mat:
        raise ValueError(f"'{path}' has no variable '{key}' "
                         f"(found: {_keys(mat)})")
    value = mat[key]
    if not isinstance(value, np.ndarray):
        # e.g. a MATLAB sparse matrix, which scipy reads as a sparse array
        # of a numeric dtype.
        raise ValueError(f"'{key}' in '{path}' must be a dense numeric "
                         f"array (got {type(value).__name__}): save it as a "
                         f"full matrix")
    if value.dtype.kind not in 'biuf':
        raise ValueError(f"'{key}' in '{path}' must be a numeric array "
                         f"(got {value.dtype})")
    return value


def _integers(value: np.ndarray, key: str, path: Path) -> np.ndarray:
    if value.dtype.kind == 'f':
        if not np.isfinite(value).all() or (value != np.round(value)).any():
            raise ValueError(f"'{key}' in '{path}' must hold integers "
                             f"(found non-integral values)")
    return value.astype(np.int64).reshape(-1)


def _index_list(value: Any, key: str, path: Path,
                num_images: Optional[int]) -> np.ndarray:
    value = _numeric({key: value}, key, path)
    if value.ndim != 2 or 1 not in value.shape:
        raise ValueError(f"'{key}' in '{path}' must be an N x 1 index list "
                         f"(got shape {value.shape})")
    index = _integers(value, key, path)
    upper = num_images if num_images is not None else np.iinfo(np.int64).max
    bad = (index < 1) | (index > upper)
    if bad.any():
        bound = f'1..{num_images}' if num_images is not None else '>= 1'
        raise ValueError(f"'{key}' in '{path}' has {int(bad.sum())} indices "
                         f"outside {bound} (1-based; e.g. "
                         f"{index[bad][:3].tolist()})")
    if np.unique(index).size != index.size:
        raise ValueError(f"'{key}' in '{path}' contains duplicate indices")
    if not index.size:
        raise ValueError(f"'{key}' in '{path}' is empty: every split of the "
                         f"benchmark lists images")
    return index - 1


def _check_disjoint(locs: Dict[str, Optional[np.ndarray]],
                    path: Path) -> None:
    # train_loc and val_loc overlap test_seen_loc in the benchmark's own
    # files (see ZSLDataset), so only these pairs must be disjoint.
    pairs = (('trainval', 'test_seen'), ('trainval', 'test_unseen'),
             ('test_seen', 'test_unseen'), ('train', 'val'),
             ('train', 'test_unseen'), ('val', 'test_unseen'))
    for a, b in pairs:
        if locs[a] is not None and locs[b] is not None:
            shared = np.intersect1d(locs[a], locs[b])
            if shared.size:
                raise ValueError(f"'{a}_loc' and '{b}_loc' in '{path}' share "
                                 f"{shared.size} images (e.g. 1-based "
                                 f"{(shared[:3] + 1).tolist()})")


def _cell_to_str(value: Any) -> str:
    while isinstance(value, np.ndarray) and value.dtype == object and \
            value.size == 1:
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
        raise ValueError(f"'{path}' has no variable '{key}' "
                         f"(found: {_keys(mat)})")
    value = mat[key]
    if isinstance(value, np.ndarray) and value.dtype.kind == 'U':
        return [s.rstrip() for s in value.reshape(-1).tolist()]  # char matrix
    if not isinstance(value, np.ndarray) or value.dtype != object or \
            value.ndim != 2 or 1 not in value.shape:
        raise ValueError(f"'{key}' in '{path}' must be a C x 1 cell array of "
                         f"strings (got {getattr(value, 'dtype', value)} "
                         f"{getattr(value, 'shape', '')})")
    try:
        return [_cell_to_str(v).strip() for v in value.reshape(-1)]
    except TypeError as error:
        raise ValueError(f"'{key}' in '{path}' must be a cell array of "
                         f"strings (found an element of type {error})")


def _read_class_list(path: Path,
                     name_to_index: Dict[str, int]) -> Optional[np.ndarray]:
    if not path.exists():
        return None
    _check_is_file(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError as error:
        raise ValueError(f"'{path}' is not a text file of class names "
                         f"({error.reason} at byte {error.start})") from None
    names = [line.strip() for line in text.splitlines() if line.strip()]
    unknown = [name for name in names if name not in name_to_index]
    if unknown:
        raise ValueError(f"'{path}' lists {len(unknown)} class names that are "
                         f"not in 'allclasses_names': {unknown[:5]}")
    if len(set(names)) != len(names):
        raise ValueError(f"'{path}' lists a class more than once")
    if not names:
        raise ValueError(f"'{path}' lists no classes: restore it from the "
                         f"benchmark or delete it")
    return np.array([name_to_index[name] for name in names], dtype=np.int64)


def _read_features(path: Path, num_classes: int):
    mat = _read_mat(path, variable_names=['features', 'labels'])
    for key in ('features', 'labels'):
        if key not in mat:
            raise ValueError(f"'{path}' has no variable '{key}' "
                             f"(found: {_whos(path)})")
    features = _numeric(mat, 'features', path)
    labels = _numeric(mat, 'labels', path)
    if labels.ndim != 2 or labels.shape[1] != 1:
        raise ValueError(f"'labels' in '{path}' must be N x 1 "
                         f"(got shape {labels.shape})")
    num_images = labels.shape[0]
    if features.shape != (FEATURE_DIM, num_images):
        hint = (' (it looks transposed)' if features.shape ==
                (num_images, FEATURE_DIM) else '')
        raise ValueError(f"'features' in '{path}' must be {FEATURE_DIM} x N "
                         f"with N={num_images} (the rows of 'labels'), got "
                         f"shape {features.shape}{hint}")
    labels = _integers(labels, 'labels', path)
    bad = (labels < 1) | (labels > num_classes)
    if bad.any():
        raise ValueError(f"'labels' in '{path}' has {int(bad.sum())} values "
                         f"outside 1..{num_classes} (1-based into "
                         f"'allclasses_names'; e.g. "
                         f"{labels[bad][:3].tolist()})")
    # The file stores features column-major as 2048 x N, so the transpose is
    # a C-contiguous N x 2048 view: no copy unless the dtype changes.
    # Values beyond float32's range become inf, reported below (not as
    # NumPy's overflow warning).
    with np.errstate(over='ignore'):
        features = np.ascontiguousarray(features.T, dtype=np.float32)
    if not np.isfinite(features).all():
        rows = np.flatnonzero(~np.isfinite(features).all(axis=1))
        raise ValueError(f"'features' in '{path}' contain NaN or infinite "
                         f"values in {rows.size} images (e.g. 1-based "
                         f"{(rows[:3] + 1).tolist()})")
    if features.size and not features.any():
        raise ValueError(f"'features' in '{path}' are all zero: no image "
                         f"can be told from another; re-extract them")
    return features, labels - 1


def _whos(path: Path) -> List[str]:
    from scipy.io import whosmat
    try:
        return sorted(name for name, _, _ in whosmat(str(path)))
    except Exception:  # the v7.3 path or an unreadable header
        return []


def _names(classes: np.ndarray, class_names: List[str]) -> List[str]:
    return [class_names[int(c)] for c in np.asarray(classes).reshape(-1)]


def load_attributes(root: Optional[PathLike], dataset: str,
                    attributes: str) -> Tensor:
    r"""The class attributes :math:`(C, A)` of one kind (see
    :data:`ATTRIBUTE_KINDS`) of a dataset, read from its
    :obj:`att_splits.mat` alone: to give a loaded :class:`ZSLDataset`
    another kind without reading its image features again
    (:obj:`dataclasses.replace(data, attributes=...)`)."""
    return load_xlsa17(root, dataset, attributes=attributes,
                       load_features=False).attributes
