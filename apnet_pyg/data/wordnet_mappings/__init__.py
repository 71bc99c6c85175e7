r"""Hand-checked mappings from the class names of the five xlsa17 datasets
to WordNet 3.0 noun synsets (one :obj:`<DATASET>.tsv` per dataset; how each
was made: :obj:`README.md` in this folder). Pass one as the :obj:`mapping`
of :func:`apnet_pyg.graph.resolve_synsets` or
:func:`apnet_pyg.graph.wordnet_graph`."""

from importlib import resources
from typing import Dict, List, Tuple

#: The datasets with a packaged class-to-synset mapping.
WORDNET_MAPPING_DATASETS = ('AWA1', 'AWA2', 'CUB', 'SUN', 'APY')

#: How a class was mapped: the automatic rule of
#: :func:`~apnet_pyg.graph.resolve_synsets`, a sense or lemma chosen by hand,
#: or a more general synset for a class WordNet does not have.
MAPPING_METHODS = ('auto', 'manual', 'hypernym')


def _normalise_dataset(dataset: str) -> str:
    if not isinstance(dataset, str):
        raise ValueError(
            f"'dataset' must be a string out of "
            f'{WORDNET_MAPPING_DATASETS}, got {dataset!r}'
        )
    key = dataset.strip().upper()
    if key not in WORDNET_MAPPING_DATASETS:
        raise ValueError(
            f'No WordNet mapping for dataset {dataset!r}; '
            f'available: {", ".join(WORDNET_MAPPING_DATASETS)}'
        )
    return key


def read_mapping_rows(dataset: str) -> List[Tuple[str, str, str]]:
    r"""The rows :obj:`(class name, synset name, method)` of the packaged
    mapping of :obj:`dataset`, in :obj:`allclasses_names` order."""
    dataset = _normalise_dataset(dataset)
    text = (resources.files(__name__) / f'{dataset}.tsv').read_text(
        encoding='utf-8'
    )
    rows = []
    for line in text.splitlines()[1:]:  # The first line is the header.
        if not line.strip() or line.startswith('#'):
            continue
        name, synset, method = line.split('\t')
        if method not in MAPPING_METHODS:
            raise ValueError(
                f'Bad method {method!r} in the mapping of '
                f'{dataset} (line {line!r})'
            )
        rows.append((name, synset, method))
    return rows


def dataset_wordnet_mapping(dataset: str) -> Dict[str, str]:
    r"""Returns the packaged, hand-checked mapping from the class names of
    an xlsa17 dataset (as in :obj:`allclasses_names` of its
    :obj:`att_splits.mat`) to WordNet 3.0 noun synset names.

    Args:
        dataset (str): :obj:`"AWA1"`, :obj:`"AWA2"`, :obj:`"CUB"`,
            :obj:`"SUN"` or :obj:`"APY"` (case-insensitive).
    """
    return {name: synset for name, synset, _ in read_mapping_rows(dataset)}


def wordnet_coverage(dataset: str) -> Dict[str, int]:
    r"""Returns how the classes of a dataset were mapped to synsets: the
    number of :obj:`"classes"` and, out of those, :obj:`"auto"` (the
    automatic rule of :func:`~apnet_pyg.graph.resolve_synsets` gives the
    synset), :obj:`"manual"` (a different sense or lemma, chosen by hand)
    and :obj:`"hypernym"` (not in WordNet, mapped to a more general
    synset).

    Args:
        dataset (str): :obj:`"AWA1"`, :obj:`"AWA2"`, :obj:`"CUB"`,
            :obj:`"SUN"` or :obj:`"APY"` (case-insensitive).
    """
    rows = read_mapping_rows(dataset)
    coverage = {'classes': len(rows)}
    for method in MAPPING_METHODS:
        coverage[method] = sum(row[2] == method for row in rows)
    return coverage
