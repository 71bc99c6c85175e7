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

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor

from apnet_pyg.checks import as_index_tensor, check_bool
from apnet_pyg.data.xlsa17_files import (
    FEATURES_FILE,
    SPLIT_KEYS,
    SPLITS_FILE,
    check_labels_match_splits,
    read_attributes,
    read_class_names,
    read_class_roles,
    read_features,
    read_mat,
    read_simulation_sidecar,
    read_split_indices,
)

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
            raise ValueError(
                f"Unknown split {split!r} for 'split' "
                f'(expected one of {", ".join(SPLIT_KEYS)})'
            )
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
            'splits': {
                split: crc(getattr(self, f'{split}_loc'))
                for split in (
                    'trainval',
                    'test_seen',
                    'test_unseen',
                    'train',
                    'val',
                )
            },
            'class_splits': {
                split: crc(getattr(self, f'{split}_classes'))
                for split in ('seen', 'unseen', 'train', 'val')
            },
        }

    def images_of(
        self, classes: Union[Tensor, Sequence[int]], split: str = 'trainval'
    ) -> Tensor:
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
            raise ValueError(
                f"Dataset '{self.name}' was loaded without "
                f'features/labels (load_features=False)'
            )
        index = self.loc(split)
        classes = as_index_tensor(classes, 'classes')
        outside = (classes < 0) | (classes >= self.num_classes)
        if bool(outside.any()):
            raise ValueError(
                f"'classes' must be class indices in "
                f'[0, {self.num_classes - 1}] (got '
                f'{int(classes[outside][0])})'
            )
        keep = torch.isin(self.labels[index], classes)
        return index[keep]

    def __repr__(self) -> str:
        images = (
            'no images' if self.labels is None else f'images={self.num_images}'
        )
        tag = ', simulated' if self.simulated else ''
        return (
            f'{self.__class__.__name__}({self.name}, '
            f'classes={self.num_classes} '
            f'({self.seen_classes.numel()} seen, '
            f'{self.unseen_classes.numel()} unseen), '
            f'attributes={self.attribute_dim}, {images}{tag})'
        )


def load_xlsa17(
    root: Optional[PathLike],
    dataset: str,
    attributes: str = 'att',
    load_features: bool = True,
) -> ZSLDataset:
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
        raise ValueError(
            f"'attributes' must be one of "
            f"{', '.join(ATTRIBUTE_KINDS)} (got '{attributes}')"
        )
    check_dataset_name(dataset)
    check_bool(load_features, 'load_features')
    if root is None:
        if load_features:
            raise FileNotFoundError(
                f'The package ships only the class side of xlsa17 '
                f"(att_splits.mat and class lists); '{FEATURES_FILE}' is not "
                f'shipped. Pass load_features=False for the class side, '
                f'simulate the image side with '
                f"apnet_pyg.data.simulate_xlsa17('{dataset}', out_dir) (or "
                f"'apnet-zsl simulate') and load from out_dir, or download "
                f'the benchmark (xlsa17.zip from Xian et al.) and pass its '
                f"folder as 'root'."
            )
        root = packaged_root()
    folder = dataset_dir(root, dataset)
    splits_path = folder / SPLITS_FILE
    splits = read_mat(splits_path)

    class_names = read_class_names(splits, splits_path)
    att = read_attributes(splits, attributes, len(class_names), splits_path)
    features = labels = None
    if load_features:
        features, labels = read_features(
            folder / FEATURES_FILE, len(class_names)
        )
    locs = read_split_indices(
        splits, splits_path, None if labels is None else labels.shape[0]
    )
    classes = read_class_roles(folder, class_names, labels, locs)
    if labels is not None:
        check_labels_match_splits(folder, class_names, labels, locs, classes)
    simulation = read_simulation_sidecar(folder)

    def tensor(array: Optional[np.ndarray]) -> Optional[Tensor]:
        return (
            None
            if array is None
            else torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64))
        )

    return ZSLDataset(
        name=folder.name,
        class_names=class_names,
        attributes=torch.from_numpy(
            np.ascontiguousarray(att.T, dtype=np.float32)
        ),
        features=None if features is None else torch.from_numpy(features),
        labels=tensor(labels),
        trainval_loc=tensor(locs['trainval']),
        test_seen_loc=tensor(locs['test_seen']),
        test_unseen_loc=tensor(locs['test_unseen']),
        train_loc=tensor(locs['train']),
        val_loc=tensor(locs['val']),
        seen_classes=tensor(np.sort(classes['seen'])),
        unseen_classes=tensor(np.sort(classes['unseen'])),
        train_classes=tensor(
            None if classes['train'] is None else np.sort(classes['train'])
        ),
        val_classes=tensor(
            None if classes['val'] is None else np.sort(classes['val'])
        ),
        simulated=simulation is not None,
        simulation=simulation,
    )


def check_dataset_name(dataset: Any) -> None:
    r"""Raises unless :obj:`dataset` is a folder name (not empty, not a
    path: :obj:`<root>/<dataset>` must stay inside :obj:`root`)."""
    if (
        not isinstance(dataset, str)
        or not dataset
        or dataset in ('.', '..')
        or '/' in dataset
        or '\\' in dataset
    ):
        raise ValueError(
            f"'dataset' must be a dataset folder name such as "
            f"'AWA2' (got {dataset!r})"
        )


def dataset_dir(root: PathLike, dataset: str) -> Path:
    r"""Returns :obj:`<root>/<dataset>` (trying the upper-case name too)."""
    check_dataset_name(dataset)
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(
            f"The data root '{root}' is a file: pass "
            f'the folder holding <DATASET>/'
        )
    for name in (dataset, dataset.upper()):
        if (root / name).is_dir():
            return root / name
    found = (
        sorted(p.name for p in root.iterdir() if p.is_dir())
        if root.is_dir()
        else []
    )
    raise FileNotFoundError(
        f"No dataset folder '{dataset}' in '{root}' "
        f'(found: {found or "nothing"})'
    )


def load_attributes(
    root: Optional[PathLike], dataset: str, attributes: str
) -> Tensor:
    r"""The class attributes :math:`(C, A)` of one kind (see
    :data:`ATTRIBUTE_KINDS`) of a dataset, read from its
    :obj:`att_splits.mat` alone: to give a loaded :class:`ZSLDataset`
    another kind without reading its image features again
    (:obj:`dataclasses.replace(data, attributes=...)`)."""
    return load_xlsa17(
        root, dataset, attributes=attributes, load_features=False
    ).attributes
