import pytest

from apnet_pyg.data import load_xlsa17
from apnet_pyg.data.wordnet_mappings import (
    WORDNET_MAPPING_DATASETS,
    dataset_wordnet_mapping,
    read_mapping_rows,
    wordnet_coverage,
)
from apnet_pyg.graph.wordnet import resolve_synsets


def names(synsets):
    return [synset.name() for synset in synsets]


def dataset_class_names(dataset):
    # The class names of the benchmark, from the packaged class side.
    return load_xlsa17(None, dataset, load_features=False).class_names


EXPECTED_COVERAGE = {
    'AWA1': (50, 38, 12, 0),
    'AWA2': (50, 38, 12, 0),
    'CUB': (200, 52, 36, 112),
    'SUN': (717, 362, 252, 103),
    'APY': (32, 24, 8, 0),
}


@pytest.mark.parametrize('dataset', WORDNET_MAPPING_DATASETS)
def test_dataset_wordnet_mapping(dataset):
    mapping = dataset_wordnet_mapping(dataset)
    assert dataset_wordnet_mapping(dataset.lower()) == mapping

    coverage = wordnet_coverage(dataset)
    assert tuple(coverage.values()) == EXPECTED_COVERAGE[dataset]
    assert coverage['classes'] == len(mapping)
    assert sum(coverage[how] for how in ['auto', 'manual', 'hypernym']) == len(
        mapping
    )

    # Every synset is a valid noun synset; `auto` rows are exactly what the
    # automatic rule gives, other rows differ from it.
    synsets = resolve_synsets(list(mapping.values()))
    assert names(synsets) == list(mapping.values())
    for name, synset, how in read_mapping_rows(dataset):
        try:
            automatic = resolve_synsets([name])[0].name()
        except ValueError:
            automatic = None
        assert (automatic == synset) == (how == 'auto'), (name, synset, how)

    assert list(mapping) == dataset_class_names(dataset)


def test_dataset_wordnet_mapping_choices():
    awa = dataset_wordnet_mapping('AWA1')
    assert awa['bat'] == 'bat.n.01'
    assert awa['seal'] == 'seal.n.09'
    assert awa['mouse'] == 'mouse.n.01'
    apy = dataset_wordnet_mapping('APY')
    assert apy['tvmonitor'] == 'television_receiver.n.01'
    assert apy['pottedplant'] == 'pot_plant.n.01'
    assert apy['diningtable'] == 'dining_table.n.01'
    cub = dataset_wordnet_mapping('CUB')
    assert cub['002.Laysan_Albatross'] == 'albatross.n.02'
    sun = dataset_wordnet_mapping('SUN')
    assert sun['temple_south_asia'] == 'temple.n.01'
    assert sun['monastery_outdoor'] == 'monastery.n.01'

    with pytest.raises(ValueError, match='No WordNet mapping'):
        dataset_wordnet_mapping('CIFAR')
    with pytest.raises(ValueError, match='must be a string'):
        wordnet_coverage(None)
