r"""Class graphs from the WordNet 3.0 noun hierarchy.

APNet (Liu et al., AAAI 2020) propagates class attributes over a fully
connected graph of the classes whose edge weights come from the WordNet
distance between the classes' synsets. This module maps class names to
WordNet noun synsets (:func:`resolve_synsets`; hand-checked mappings for the
five xlsa17 datasets are in :mod:`apnet_pyg.data.wordnet_mappings`), builds
that
class graph (:func:`wordnet_graph`) and, as a large test graph, the whole
noun hierarchy (:func:`wordnet_noun_graph`).
"""

import numbers
import os
import os.path as osp
import re
import warnings
from collections import defaultdict, deque
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from apnet_pyg.files import replace_atomically
from apnet_pyg.graph.wordnet_corpus import (
    WORDNET30_LEXNAMES,
    default_cache_dir,
    load_wordnet,
)

#: The 26 noun lexicographer files, in order: the labels ``y`` of
#: :func:`wordnet_noun_graph` index into this tuple.
NOUN_LEXNAMES: Tuple[str, ...] = tuple(
    name for _, name, category in WORDNET30_LEXNAMES if category == 1
)

# Bump when the content or layout of the cached noun graph changes.
_NOUN_GRAPH_VERSION = 1
_NOUN_GRAPH_FILE = 'wordnet30_noun_graph.pt'

_SYNSET_NAME_RE = re.compile(r'^.+\.([nvasr])\.\d+$')  # 'zebra.n.01'
_OFFSET_RE = re.compile(r'^([nvasr])(\d{8})$')  # 'n02391049'
_INDEX_PREFIX_RE = re.compile(r'^\d+\.')  # CUB's '002.' in '002.Laysan...'

ClassMapping = Mapping[str, str]


class _Unresolved(Exception):
    pass


def _noun_synset_from_spec(wordnet, spec: str):
    r"""Resolves a synset name, a noun offset / wnid or a plain name."""
    from nltk.corpus.reader.wordnet import WordNetError

    spec = spec.strip()
    if not spec:
        raise _Unresolved('empty name')

    match = _SYNSET_NAME_RE.match(spec)
    if match is not None:
        try:
            synset = wordnet.synset(spec)
        except (WordNetError, ValueError, IndexError, KeyError):
            raise _Unresolved(f"no WordNet synset named '{spec}'") from None
        if synset.pos() != 'n':
            raise _Unresolved(f"'{synset.name()}' is not a noun synset")
        return synset

    match = _OFFSET_RE.match(spec)
    if match is not None:
        pos, offset = match.group(1), int(match.group(2))
        if pos != 'n':
            raise _Unresolved(f"'{spec}' is not a noun offset")
        with warnings.catch_warnings():
            # nltk warns and returns None for an unknown offset.
            warnings.simplefilter('ignore')
            try:
                synset = wordnet.synset_from_pos_and_offset('n', offset)
            except (WordNetError, ValueError, IndexError, KeyError):
                synset = None
        if synset is None:
            raise _Unresolved(f'no noun synset at offset {offset:08d}')
        return synset

    # A plain class name: drop a numeric prefix ('002.'), join words with
    # '_' (WordNet's separator), keep a hyphenated form first since WordNet
    # has lemmas like 'four-poster'. `synsets` lower-cases and applies
    # morphy, which handles case and plurals.
    name = _INDEX_PREFIX_RE.sub('', spec)
    name = re.sub(r'[+\s]+', '_', name)
    for candidate in dict.fromkeys([name, name.replace('-', '_')]):
        synsets = wordnet.synsets(candidate, pos='n')
        if synsets:
            return synsets[0]  # Senses are sorted by frequency.
    raise _Unresolved('no WordNet noun with this name')


def _as_class_list(classes: Sequence[str]) -> List[str]:
    if isinstance(classes, (str, bytes)):
        raise ValueError(
            "'classes' must be a sequence of class names, "
            f'got the single string {classes!r}'
        )
    classes = list(classes)
    bad = [c for c in classes if not isinstance(c, str)]
    if bad:
        raise ValueError(
            f"'classes' must contain strings only, got "
            f'{", ".join(repr(c) for c in bad[:5])}'
        )
    return classes


def _as_mapping(mapping: Optional[ClassMapping]) -> Dict[str, str]:
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        hint = (
            ' (for an xlsa17 dataset: apnet_pyg.data.wordnet_mappings.'
            'dataset_wordnet_mapping(name))'
            if isinstance(mapping, str)
            else ''
        )
        raise ValueError(
            f"'mapping' must be a dict from class name to "
            f'synset, got {type(mapping).__name__}{hint}'
        )
    bad = [
        (k, v)
        for k, v in mapping.items()
        if not isinstance(k, str) or not isinstance(v, str)
    ]
    if bad:
        raise ValueError(
            f"'mapping' must map strings to strings, got "
            f'{", ".join(f"{k!r}: {v!r}" for k, v in bad[:5])}'
        )
    return dict(mapping)


def resolve_synsets(
    classes: Sequence[str], mapping: Optional[ClassMapping] = None
) -> list:
    r"""Maps class names to WordNet 3.0 noun synsets.

    Each class may be

    * an :mod:`nltk` synset name, *e.g.*, :obj:`"zebra.n.01"`,
    * a noun offset / ImageNet wnid, *e.g.*, :obj:`"n02391049"`,
    * a plain class name, *e.g.*, :obj:`"giant+panda"`,
      :obj:`"German_shepherd"` or :obj:`"029.American_Crow"`: a leading
      numeric prefix like :obj:`"029."` is removed, :obj:`"+"` and spaces
      become :obj:`"_"`, the name is looked up as it is and then with
      :obj:`"-"` as :obj:`"_"` (WordNet has both :obj:`"four-poster"` and
      :obj:`"access_road"`), and the first (most frequent) noun sense is
      taken, case-insensitively and with plurals reduced by :mod:`nltk`'s
      morphy.

    The first noun sense is often not the intended one (:obj:`"seal"` is
    first the wax, :obj:`"otter"` the fur), and many dataset class names
    (SUN's :obj:`"temple_south_asia"`) are no WordNet lemma at all. For the
    xlsa17 datasets pass the hand-checked mappings of
    :func:`apnet_pyg.data.wordnet_mappings.dataset_wordnet_mapping`.

    Args:
        classes (Sequence[str]): The class names.
        mapping (dict, optional): A dictionary from class name to any of
            the accepted synset forms, overriding the automatic rule for the
            classes it names (other keys are ignored).
            (default: :obj:`None`)

    Returns:
        list[nltk.corpus.reader.wordnet.Synset]: One noun synset per class,
        in the order of :obj:`classes`.

    Raises:
        ValueError: Listing all classes that could not be mapped (unknown
            names, unknown synsets or offsets, non-noun synsets).
    """
    classes = _as_class_list(classes)
    mapping = _as_mapping(mapping)
    wordnet = load_wordnet()

    synsets, failures = [], []
    for name in classes:
        spec = mapping.get(name, name)
        try:
            synsets.append(_noun_synset_from_spec(wordnet, spec))
        except _Unresolved as e:
            via = f' (mapped to {spec!r})' if name in mapping else ''
            failures.append(f'{name!r}{via}: {e}')
    if failures:
        shown = 10  # One line, readable even for SUN's 717 classes.
        listed = '; '.join(failures[:shown])
        if len(failures) > shown:
            listed += f'; and {len(failures) - shown} more'
        raise ValueError(
            f'Could not map {len(failures)} of {len(classes)} classes of '
            f"'classes' to a WordNet noun synset: {listed}. Pass "
            f"'mapping={{class name: synset}}' with synset names like "
            f"'zebra.n.01' or wnids like 'n02391049' for these classes (the "
            f"xlsa17 datasets' mappings: apnet_pyg.data.wordnet_mappings."
            f'dataset_wordnet_mapping).'
        )
    return synsets


def _hypernym_depths(synset) -> dict:
    r"""Returns the hop distance from :obj:`synset` to each of its ancestors
    (itself at 0), following hypernyms and instance hypernyms breadth-first
    exactly as :mod:`nltk`'s :meth:`Synset._shortest_hypernym_paths`."""
    depths = {}
    queue = deque([(synset, 0)])
    while queue:
        node, depth = queue.popleft()
        if node in depths:
            continue
        depths[node] = depth
        for parent in node.hypernyms() + node.instance_hypernyms():
            queue.append((parent, depth + 1))
    return depths


def _pairwise_distances(synsets: list) -> np.ndarray:
    r"""Returns the matrix of :meth:`Synset.shortest_path_distance` values
    (:obj:`inf` where two synsets share no ancestor)."""
    # d_ij = min over common ancestors a of depth_i(a) + depth_j(a): group
    # the classes by ancestor and take each group's outer sum once.
    members = defaultdict(list)
    for i, synset in enumerate(synsets):
        for ancestor, depth in _hypernym_depths(synset).items():
            members[ancestor].append((i, depth))

    dist = np.full((len(synsets), len(synsets)), np.inf)
    for group in members.values():
        index = np.array([i for i, _ in group])
        depth = np.array([d for _, d in group], dtype=np.float64)
        block = np.ix_(index, index)
        dist[block] = np.minimum(dist[block], depth[:, None] + depth[None, :])
    return dist


def wordnet_graph(
    classes: Sequence[str],
    max_hops: Optional[int] = None,
    mapping: Optional[ClassMapping] = None,
) -> Tuple[Tensor, Tensor]:
    r"""Returns the WordNet class graph of APNet: nodes are the classes in
    the given order, and the edge between classes :math:`i` and :math:`j`
    has weight

    .. math::
        w_{ij} = \frac{1}{\max(d_{ij}, 1)},

    where :math:`d_{ij}` is the hop distance between their synsets as
    defined by :mod:`nltk`'s :meth:`Synset.shortest_path_distance` (the
    shortest path up to a common hypernym and down again, instance
    hypernyms included). The graph is fully connected, as in the APNet
    paper, unless :obj:`max_hops` is given. It is symmetric and has no self
    loops (the propagation operators add them).

    Two distinct classes mapped to the same synset have :math:`d_{ij} = 0`;
    they are joined with weight :math:`1` and a warning names them.

    Args:
        classes (Sequence[str]): The class names, in any form accepted by
            :func:`resolve_synsets`.
        max_hops (int, optional): If set, keeps only the pairs with
            :math:`d_{ij} \leq` :obj:`max_hops`. (default: :obj:`None`)
        mapping (dict, optional): Overrides of the class-to-synset rule,
            see :func:`resolve_synsets`. (default: :obj:`None`)

    Returns:
        (torch.Tensor, torch.Tensor): :obj:`edge_index` of shape
        :obj:`[2, num_edges]` (:obj:`torch.long`, sorted by source then
        target) and :obj:`edge_weight` of shape :obj:`[num_edges]`
        (:obj:`torch.float`).
    """
    if max_hops is not None:
        if (
            isinstance(max_hops, bool)
            or not isinstance(max_hops, numbers.Integral)
            or max_hops < 1
        ):
            raise ValueError(
                f"'max_hops' must be a positive integer or "
                f'None, got {max_hops!r}'
            )
        max_hops = int(max_hops)
    classes = _as_class_list(classes)
    duplicates = sorted({c for c in classes if classes.count(c) > 1})
    if duplicates:
        raise ValueError(
            f"'classes' contains duplicate names: "
            f'{", ".join(map(repr, duplicates))}'
        )

    synsets = resolve_synsets(classes, mapping)

    by_synset = defaultdict(list)
    for name, synset in zip(classes, synsets):
        by_synset[synset].append(name)
    collisions = [
        (synset, names)
        for synset, names in by_synset.items()
        if len(names) > 1
    ]
    if collisions:
        shown = 10  # SUN has ~100 such groups; keep the warning readable.
        text = '; '.join(
            f"{', '.join(map(repr, names))} -> '{synset.name()}'"
            for synset, names in collisions[:shown]
        )
        if len(collisions) > shown:
            text += f'; and {len(collisions) - shown} more groups'
        num_classes = sum(len(names) for _, names in collisions)
        warnings.warn(
            f'{num_classes} distinct classes map to a WordNet synset shared '
            f'with another class (distance 0, joined with weight 1): '
            f"{text}. Pass 'mapping' to separate them.",
            stacklevel=2,
        )

    dist = _pairwise_distances(synsets)
    keep = np.isfinite(dist)
    np.fill_diagonal(keep, False)
    if max_hops is not None:
        keep &= dist <= max_hops
    row, col = np.nonzero(keep)  # Row-major order, i.e., coalesced.
    edge_index = torch.from_numpy(np.stack([row, col])).long()
    edge_weight = torch.from_numpy(1.0 / np.maximum(dist[row, col], 1.0))
    return edge_index, edge_weight.float()


def _build_noun_graph() -> dict:
    from torch_geometric.utils import coalesce

    wordnet = load_wordnet()
    synsets = list(wordnet.all_synsets('n'))  # data.noun order == by offset.
    synsets.sort(key=lambda s: s.offset())
    node_of = {synset: i for i, synset in enumerate(synsets)}
    lexname_index = {name: i for i, name in enumerate(NOUN_LEXNAMES)}

    child, parent = [], []
    for i, synset in enumerate(synsets):
        for hypernym in synset.hypernyms() + synset.instance_hypernyms():
            child.append(i)
            parent.append(node_of[hypernym])
    edge_index = torch.tensor([child + parent, parent + child])
    edge_index = coalesce(edge_index, num_nodes=len(synsets))

    return {
        'version': _NOUN_GRAPH_VERSION,
        'edge_index': edge_index,
        'offsets': torch.tensor([s.offset() for s in synsets]),
        'y': torch.tensor([lexname_index[s.lexname()] for s in synsets]),
        'synset_names': [s.name() for s in synsets],
        'lexnames': list(NOUN_LEXNAMES),
    }


def wordnet_noun_graph(
    cache_dir: Optional[str] = None, force_rebuild: bool = False
):
    r"""Returns the whole WordNet 3.0 noun hierarchy as a
    :class:`torch_geometric.data.Data` graph.

    Nodes are the 82,115 noun synsets, sorted by their offset in
    :obj:`data.noun` (which is also :mod:`nltk`'s :obj:`all_synsets("n")`
    order). Edges are the 84,427 hypernym (75,850) and instance-hypernym
    (8,577) relations, in both directions: 168,854 directed edges,
    coalesced. The graph is connected, rooted at :obj:`entity.n.01`.

    The returned object holds :obj:`edge_index`, :obj:`num_nodes`,
    :obj:`synset_names` (:mod:`nltk` names such as :obj:`"dog.n.01"`),
    :obj:`offsets` (:obj:`torch.long`), :obj:`y`: the synset's noun
    lexicographer file (:obj:`0` = :obj:`noun.Tops` ... :obj:`25` =
    :obj:`noun.time`), a 26-class node label, and :obj:`lexnames` (the 26
    file names that :obj:`y` indexes).

    Building it through :mod:`nltk` takes about ten seconds; the result is
    cached in :obj:`<cache_dir>/wordnet30_noun_graph.pt`, which later calls
    load in about a second.

    Args:
        cache_dir (str, optional): Where the built graph is cached. If set
            to :obj:`None`, uses ``$APNET_PYG_CACHE`` or
            ``~/.cache/apnet_pyg``. The corpus itself always comes from
            :func:`~apnet_pyg.graph.wordnet_corpus.load_wordnet`.
            (default: :obj:`None`)
        force_rebuild (bool, optional): If set to :obj:`True`, rebuilds the
            graph and overwrites the cache. (default: :obj:`False`)
    """
    from torch_geometric.data import Data

    cache_dir = default_cache_dir() if cache_dir is None else str(cache_dir)
    path = osp.join(cache_dir, _NOUN_GRAPH_FILE)

    content = None
    if not force_rebuild and osp.isfile(path):
        try:
            content = torch.load(path, weights_only=True)
        except Exception:  # A truncated or foreign file: rebuild it.
            content = None
        if (
            not isinstance(content, dict)
            or content.get('version') != _NOUN_GRAPH_VERSION
        ):
            content = None
    if content is None:
        content = _build_noun_graph()
        os.makedirs(cache_dir, exist_ok=True)
        # Readers never see half a file.
        replace_atomically(path, lambda tmp: torch.save(content, tmp))

    return Data(
        edge_index=content['edge_index'],
        y=content['y'],
        offsets=content['offsets'],
        synset_names=content['synset_names'],
        lexnames=content['lexnames'],
        num_nodes=len(content['synset_names']),
    )
