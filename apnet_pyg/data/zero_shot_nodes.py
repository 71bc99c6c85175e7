r"""Zero-shot node classification data in the layout of DGPN (Wang et al.,
"Zero-shot Node Classification with Decomposed Graph Prototype Network",
KDD 2021): the nodes of a graph are the samples, each class is described
by a vector (a class semantic description, CSD), and the classes are split
by id into seen, validation and unseen classes.

The layout, for a dataset :obj:`name` (any folder name)::

    <root>/<name>/feature.txt    one line per node: node id, then features
    <root>/<name>/graph.txt      one line per edge: source and target ids
    <root>/<name>/group.txt      one line per node: node id and class id
    <root>/<name>/class_names.json              the class names, by id
    <root>/csd_files/<name>_text_csds.txt       one row per class (TEXT)
    <root>/csd_files/<name>_label_csds.txt      one row per class (LABEL)

Node :math:`i` is the :math:`i`-th line of :obj:`group.txt` (DGPN's order);
feature rows are matched to nodes by their id. Edges are read as undirected
(DGPN symmetrises the adjacency); repeated edges count once. Features and
descriptions are returned as stored: DGPN row-normalises the features and
L2-normalises the descriptions, which :mod:`apnet_pyg.zsl.nodes.protocol`
does as a named option.

The named class splits (:func:`class_split`) are DGPN's: the first classes
by id are seen, then the validation classes, the rest unseen. Split I is
DGPN's table for its three datasets (Cora 3 / 0 / 4, Citeseer 2 / 0 / 4,
C-M10-M 3 / 0 / 3) and :math:`\lfloor C / 2 \rfloor` seen classes for any
other; Split II is 2 / 2 / rest for every dataset.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, to_undirected

PathLike = Union[str, Path]

#: The kinds of class descriptions: TEXT-CSDs (a text about the class) and
#: LABEL-CSDs (its name), in :obj:`csd_files/<name>_<kind>_csds.txt`.
DESCRIPTION_KINDS = ('text', 'label')

#: The named class splits.
SPLITS = ('I', 'II')

#: DGPN's Split I (seen, validation classes) for its datasets, by folder
#: name in lower case (the DGPN repository's README, --train-val-class).
DGPN_SPLIT_I = {'cora': (3, 0), 'citeseer': (2, 0), 'c-m10-m': (3, 0)}

#: Split II: (seen, validation) classes for every dataset (DGPN, Table 2).
SPLIT_II = (2, 2)


class ClassSplit(NamedTuple):
    r"""Seen, validation and unseen classes (sorted int64 tensors; the
    validation classes may be empty) and the split's name."""

    seen: Tensor
    val: Tensor
    unseen: Tensor
    name: str

    def describe(self) -> str:
        def ids(classes: Tensor) -> str:
            return ','.join(map(str, classes.tolist())) or '-'

        return (
            f'split {self.name}: seen {ids(self.seen)}, validation '
            f'{ids(self.val)}, unseen {ids(self.unseen)}'
        )


@dataclass(eq=False, repr=False)
class ZeroShotNodes:
    r"""A zero-shot node classification dataset.

    Attributes:
        name (str): The dataset's folder name.
        data (Data): :obj:`x` :math:`(N, F)` float32 node features,
            :obj:`edge_index` :math:`(2, E)` undirected (both directions,
            coalesced), :obj:`y` :math:`(N)` class ids.
        class_names (List[str]): The :math:`C` class names, by id.
        descriptions (Dict[str, Tensor]): The class descriptions
            :math:`(C, D)` of each kind found (:data:`DESCRIPTION_KINDS`).
        files (Dict[str, Path]): The files read, by role.
    """

    name: str
    data: Data
    class_names: List[str]
    descriptions: Dict[str, Tensor]
    files: Dict[str, Path] = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def description(self, kind: str) -> Tensor:
        r"""The class descriptions of :obj:`kind` (:obj:`"text"` or
        :obj:`"label"`), :math:`(C, D)`."""
        if kind not in DESCRIPTION_KINDS:
            raise ValueError(
                f"'kind' must be one of "
                f'{", ".join(DESCRIPTION_KINDS)} (got {kind!r})'
            )
        if kind not in self.descriptions:
            raise FileNotFoundError(
                f"'{self.files.get(kind + '_csds', kind)}' is missing: no "
                f'{kind.upper()}-CSDs for {self.name}'
            )
        return self.descriptions[kind]

    def split(
        self,
        split: Optional[str] = None,
        seen: Optional[Sequence[int]] = None,
        val: Optional[Sequence[int]] = None,
        unseen: Optional[Sequence[int]] = None,
    ) -> ClassSplit:
        r"""The named split (:obj:`"I"`, :obj:`"II"`) or the explicit
        class lists (see :func:`class_split`)."""
        return class_split(
            self.num_classes, split, self.name, seen, val, unseen
        )

    def __repr__(self) -> str:
        kinds = '+'.join(
            k for k in DESCRIPTION_KINDS if k in self.descriptions
        )
        return (
            f'{self.__class__.__name__}({self.name}, nodes='
            f'{self.data.num_nodes}, edges={self.data.num_edges // 2} '
            f'undirected, features={self.data.num_features}, classes='
            f'{self.num_classes}, descriptions={kinds})'
        )


def class_split(
    num_classes: int,
    split: Optional[str] = None,
    name: Optional[str] = None,
    seen: Optional[Sequence[int]] = None,
    val: Optional[Sequence[int]] = None,
    unseen: Optional[Sequence[int]] = None,
) -> ClassSplit:
    r"""The class split of a dataset with :obj:`num_classes` classes.

    Either :obj:`split` names one (:obj:`"I"`: DGPN's table for
    :obj:`name` in :data:`DGPN_SPLIT_I`, else :math:`\lfloor C/2 \rfloor`
    seen and no validation class; :obj:`"II"`: 2 seen, 2 validation), the
    first classes by id seen, then validation, the rest unseen; or
    :obj:`seen` and :obj:`unseen` (and optionally :obj:`val`) list the
    classes. A split needs 2 seen and 2 unseen classes (one unseen class
    would make the task trivial), and no class in two roles.
    """
    if split is not None and any(v is not None for v in (seen, val, unseen)):
        raise ValueError(
            'give either a named split or the class lists '
            '(seen / val / unseen), not both'
        )
    if split is not None:
        if split not in SPLITS:
            raise ValueError(
                f"'split' must be one of {', '.join(SPLITS)} (got {split!r})"
            )
        if split == 'I':
            num_seen, num_val = DGPN_SPLIT_I.get(
                (name or '').lower(), (num_classes // 2, 0)
            )
        else:
            num_seen, num_val = SPLIT_II
        if num_seen < 2 or num_classes - num_seen - num_val < 2:
            raise ValueError(
                f'split {split} ({num_seen} seen, {num_val} validation '
                f'classes) leaves fewer than 2 seen or 2 unseen classes of '
                f'the {num_classes} of {name or "the dataset"}: give the '
                f'classes explicitly (seen / val / unseen)'
            )
        ids = torch.arange(num_classes)
        return ClassSplit(
            ids[:num_seen],
            ids[num_seen : num_seen + num_val],
            ids[num_seen + num_val :],
            split,
        )
    if seen is None or unseen is None:
        raise ValueError(
            "give a named split ('I' or 'II') or at least the "
            'seen and unseen class lists'
        )
    roles = {}
    for role, classes in (
        ('seen', seen),
        ('val', val or []),
        ('unseen', unseen),
    ):
        tensor = torch.as_tensor(list(classes), dtype=torch.long)
        if tensor.numel() and (
            int(tensor.min()) < 0 or int(tensor.max()) >= num_classes
        ):
            raise ValueError(
                f"'{role}' classes must be ids in [0, "
                f'{num_classes - 1}] (got {tensor.tolist()})'
            )
        if tensor.unique().numel() != tensor.numel():
            raise ValueError(
                f"'{role}' names a class twice ({tensor.tolist()})"
            )
        roles[role] = tensor.sort().values
    everything = torch.cat(list(roles.values()))
    if everything.unique().numel() != everything.numel():
        raise ValueError('a class is in two of seen / val / unseen')
    for role in ('seen', 'unseen'):
        if roles[role].numel() < 2:
            raise ValueError(
                f"'{role}' needs at least 2 classes (got "
                f'{roles[role].tolist()})'
            )
    if roles['val'].numel() == 1:
        raise ValueError(
            f"'val' needs 0 or at least 2 classes (got "
            f'{roles["val"].tolist()}): one class cannot be '
            f'told apart from anything'
        )
    return ClassSplit(roles['seen'], roles['val'], roles['unseen'], 'custom')


def read_zero_shot_nodes(root: PathLike, name: str) -> ZeroShotNodes:
    r"""Reads the dataset :obj:`name` from :obj:`root` in DGPN's layout
    (see the module docstring).

    Args:
        root (str or Path): The folder holding :obj:`<name>/` and
            :obj:`csd_files/`.
        name (str): The dataset's folder name (e.g. :obj:`"cora"`).

    Raises:
        FileNotFoundError: A folder or file is missing (named).
        ValueError: A file does not parse, or the files do not fit
            together (the message names the file and the line).
    """
    if (
        not isinstance(name, str)
        or not name.strip()
        or Path(name).name != name
    ):
        raise ValueError(
            f"'name' must be a dataset folder name such as "
            f"'cora' (got {name!r})"
        )
    root = Path(root)
    folder = root / name
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no dataset folder '{folder}' (root "
            f"'{root}' holds <name>/ and csd_files/)"
        )
    files = {
        part: folder / f'{part}.txt' for part in ('feature', 'graph', 'group')
    }
    files['class_names'] = folder / 'class_names.json'
    for kind in DESCRIPTION_KINDS:
        files[f'{kind}_csds'] = root / 'csd_files' / f'{name}_{kind}_csds.txt'
    for part in ('feature', 'graph', 'group', 'class_names', 'text_csds'):
        if not files[part].is_file():
            raise FileNotFoundError(f"'{files[part]}' is missing")

    class_names = read_class_names(files['class_names'])
    num_classes = len(class_names)
    node_ids, y = _read_groups(files['group'], num_classes)
    position = {node: i for i, node in enumerate(node_ids)}
    x = read_features(files['feature'], position)
    edge_index = _read_edges(files['graph'], position)
    descriptions = {}
    for kind in DESCRIPTION_KINDS:
        path = files[f'{kind}_csds']
        if path.is_file():
            descriptions[kind] = _read_descriptions(path, num_classes)
    data = Data(x=x, edge_index=edge_index, y=y, num_nodes=len(node_ids))
    return ZeroShotNodes(name, data, class_names, descriptions, files)


def _lines(path: Path) -> List[str]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read '{path}' ({error})") from None
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"'{path}' is empty")
    return lines


def _integer(token: str, path: Path, line: int, what: str) -> int:
    try:
        return int(token)
    except ValueError:
        raise ValueError(
            f"'{path}' line {line}: {what} {token!r} is not an integer"
        ) from None


def read_class_names(path: Path) -> List[str]:
    try:
        names = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read '{path}' as JSON ({error})") from None
    if (
        not isinstance(names, list)
        or len(names) < 2
        or not all(isinstance(n, str) for n in names)
    ):
        raise ValueError(
            f"'{path}' must hold a JSON list of at least 2 "
            f'class names (strings)'
        )
    return names


def _read_groups(path: Path, num_classes: int):
    node_ids, labels = [], []
    for number, line in enumerate(_lines(path), 1):
        tokens = line.split()
        if len(tokens) != 2:
            raise ValueError(
                f"'{path}' line {number}: expected 'node "
                f"class', got {len(tokens)} fields"
            )
        node_ids.append(_integer(tokens[0], path, number, 'node id'))
        label = _integer(tokens[1], path, number, 'class id')
        if not 0 <= label < num_classes:
            raise ValueError(
                f"'{path}' line {number}: class {label} is not "
                f'one of the {num_classes} classes of '
                f'class_names.json'
            )
        labels.append(label)
    if len(set(node_ids)) != len(node_ids):
        raise ValueError(f"'{path}' lists a node twice")
    return node_ids, torch.tensor(labels, dtype=torch.long)


def read_features(path: Path, position: Dict[int, int]) -> Tensor:
    lines = _lines(path)
    if len(lines) != len(position):
        raise ValueError(
            f"'{path}' has {len(lines)} rows for the "
            f'{len(position)} nodes of group.txt'
        )
    rows = [line.split() for line in lines]
    width = len(rows[0])
    for number, row in enumerate(rows, 1):
        if len(row) != width:
            raise ValueError(
                f"'{path}' line {number}: {len(row) - 1} "
                f'features, line 1 has {width - 1}'
            )
    if width < 2:
        raise ValueError(f"'{path}' has no feature column after the id")
    order = []
    for number, row in enumerate(rows, 1):
        node = _integer(row[0], path, number, 'node id')
        if node not in position:
            raise ValueError(
                f"'{path}' line {number}: node {node} is not in group.txt"
            )
        order.append(position[node])
    try:
        values = np.array([row[1:] for row in rows], dtype=np.float32)
    except ValueError as error:
        raise ValueError(
            f"'{path}' holds a value that is not a number ({error})"
        ) from None
    if not np.isfinite(values).all():
        raise ValueError(f"'{path}' holds a NaN or infinite feature")
    if len(set(order)) != len(order):
        raise ValueError(f"'{path}' lists a node twice")
    x = torch.empty(len(order), width - 1)
    x[torch.tensor(order)] = torch.from_numpy(values)
    return x


def _read_edges(path: Path, position: Dict[int, int]) -> Tensor:
    pairs = []
    for number, line in enumerate(_lines(path), 1):
        tokens = line.split()
        if len(tokens) != 2:
            raise ValueError(
                f"'{path}' line {number}: expected 'source "
                f"target', got {len(tokens)} fields"
            )
        pair = []
        for token in tokens:
            node = _integer(token, path, number, 'node id')
            if node not in position:
                raise ValueError(
                    f"'{path}' line {number}: node {node} is not in group.txt"
                )
            pair.append(position[node])
        pairs.append(pair)
    edge_index = torch.tensor(pairs, dtype=torch.long).t()
    return coalesce(
        to_undirected(edge_index, num_nodes=len(position)),
        num_nodes=len(position),
    )


def _read_descriptions(path: Path, num_classes: int) -> Tensor:
    rows = [line.split() for line in _lines(path)]
    if len(rows) != num_classes:
        raise ValueError(
            f"'{path}' has {len(rows)} rows for the "
            f'{num_classes} classes of class_names.json'
        )
    if len({len(row) for row in rows}) != 1:
        raise ValueError(f"'{path}': the rows have different lengths")
    try:
        values = np.array(rows, dtype=np.float64)
    except ValueError as error:
        raise ValueError(
            f"'{path}' holds a value that is not a number ({error})"
        ) from None
    if not np.isfinite(values).all():
        raise ValueError(f"'{path}' holds a NaN or infinite value")
    return torch.from_numpy(values).float()
