import os.path as osp
import random
import re
import time
import warnings

import pytest
import torch
from torch_geometric.utils import contains_self_loops, is_undirected

from apnet_pyg.data.wordnet_mappings import dataset_wordnet_mapping
from apnet_pyg.graph import wordnet as wordnet_module
from apnet_pyg.graph.wordnet import (
    NOUN_LEXNAMES,
    resolve_synsets,
    wordnet_graph,
    wordnet_noun_graph,
)
from apnet_pyg.graph.wordnet_corpus import load_wordnet


@pytest.fixture(scope='module')
def wordnet():
    return load_wordnet()


def names(synsets):
    return [synset.name() for synset in synsets]


def assert_coalesced(edge_index, num_nodes):
    key = edge_index[0] * num_nodes + edge_index[1]
    assert bool((key[1:] > key[:-1]).all())


def test_resolve_synsets_forms():
    classes = [
        'zebra.n.01',  # Synset name.
        'n02391049',  # Noun offset / ImageNet wnid (zebra).
        'giant+panda',  # AWA style.
        'German_shepherd',  # Case.
        'killer whale',  # Space.
        '017.Cardinal',  # CUB's numeric prefix.
        'zebras',  # Plural, via morphy.
        'four-poster',  # Hyphenated lemma.
        'Jack-in-the-box',  # Hyphens, case.
        'access-road',  # '-' as word separator.
    ]
    assert names(resolve_synsets(classes)) == [
        'zebra.n.01',
        'zebra.n.01',
        'giant_panda.n.01',
        'german_shepherd.n.01',
        'killer_whale.n.01',
        'cardinal.n.01',
        'zebra.n.01',
        'four-poster.n.01',
        'jack-in-the-box.n.01',
        'access_road.n.01',
    ]
    assert resolve_synsets([]) == []
    assert names(resolve_synsets(('bedroom',))) == ['bedroom.n.01']


def test_resolve_synsets_docstring_examples_resolve():
    # The class forms the docstring lists as accepted (its first bullet
    # list): each one resolves (an earlier example, a CUB name, did not).
    doc = resolve_synsets.__doc__
    forms = doc[doc.index('Each class may be') : doc.index('The first noun')]
    examples = re.findall(r':obj:`"([^"]+)"`', forms)
    examples = [
        e for e in examples if not e.endswith('.') and e not in ('+', '-', '_')
    ]
    assert len(examples) >= 7, examples
    assert len(resolve_synsets(examples)) == len(examples)


def test_resolve_synsets_errors():
    bad = [
        'temple_south_asia',
        'run.v.01',
        'dog.n.99',
        'n99999999',
        'v01234567',
        'xyzzy_plugh',
        '',
    ]
    with pytest.raises(ValueError) as info:
        resolve_synsets(['zebra'] + bad)
    message = str(info.value)
    assert f'{len(bad)} of {len(bad) + 1} classes' in message
    for name in bad:
        assert repr(name) in message
    assert "'zebra'" not in message
    assert 'not a noun synset' in message
    assert 'not a noun offset' in message
    assert 'mapping' in message

    with pytest.raises(ValueError, match='single string'):
        resolve_synsets('zebra')
    with pytest.raises(ValueError, match='strings only'):
        resolve_synsets(['zebra', 3])


def test_resolve_synsets_mapping():
    assert names(resolve_synsets(['seal'])) == ['sealing_wax.n.01']
    mapping = {'seal': 'seal.n.09', 'mystery': 'n02391049', 'unused': 'x'}
    assert names(resolve_synsets(['seal', 'mystery', 'dog'], mapping)) == [
        'seal.n.09',
        'zebra.n.01',
        'dog.n.01',
    ]
    # A dataset name is not a mapping (the graph layer knows no datasets):
    with pytest.raises(ValueError, match='dataset_wordnet_mapping'):
        resolve_synsets(['seal'], mapping='AWA2')

    with pytest.raises(ValueError, match=r"'seal' \(mapped to 'seal.v.01'\)"):
        resolve_synsets(['seal'], {'seal': 'seal.v.01'})
    with pytest.raises(ValueError, match="mapping' must be a dict"):
        resolve_synsets(['seal'], [('seal', 'seal.n.09')])
    with pytest.raises(ValueError, match='map strings to strings'):
        resolve_synsets(['seal'], {'seal': 9})


def test_wordnet_graph(wordnet):
    classes = [
        'zebra',
        'horse',
        'dog',
        'cat',
        'airplane.n.01',
        'giant_panda',
        'oak',
    ]
    edge_index, edge_weight = wordnet_graph(classes)
    num_nodes = len(classes)
    assert edge_index.dtype == torch.long
    assert edge_weight.dtype == torch.float
    assert edge_index.size() == (2, num_nodes * (num_nodes - 1))
    assert edge_weight.size() == (edge_index.size(1),)
    assert is_undirected(edge_index, edge_weight, num_nodes)
    assert not contains_self_loops(edge_index)
    assert_coalesced(edge_index, num_nodes)

    synsets = resolve_synsets(classes)
    for (i, j), weight in zip(edge_index.t().tolist(), edge_weight.tolist()):
        distance = synsets[i].shortest_path_distance(synsets[j])
        assert weight == pytest.approx(1.0 / distance)

    # zebra and horse are both equines: closer than zebra and oak.
    weight = {
        tuple(e): w
        for e, w in zip(edge_index.t().tolist(), edge_weight.tolist())
    }
    assert weight[(0, 1)] > weight[(0, 6)]


def test_wordnet_graph_max_hops():
    classes = ['zebra', 'horse', 'dog', 'cat', 'oak', 'airplane']
    full_index, full_weight = wordnet_graph(classes)
    for max_hops in [1, 4, 8, 100]:
        edge_index, edge_weight = wordnet_graph(classes, max_hops=max_hops)
        keep = full_weight >= 1.0 / max_hops - 1e-6
        assert torch.equal(edge_index, full_index[:, keep])
        assert torch.equal(edge_weight, full_weight[keep])
        assert is_undirected(edge_index, num_nodes=len(classes))
    assert wordnet_graph(classes, max_hops=1)[0].numel() == 0

    for bad in [0, -1, 1.5, True, '2']:
        with pytest.raises(ValueError, match='max_hops'):
            wordnet_graph(classes, max_hops=bad)

    edge_index, edge_weight = wordnet_graph(['zebra'])
    assert edge_index.size() == (2, 0) and edge_weight.size() == (0,)


def test_wordnet_graph_collision():
    with pytest.warns(UserWarning, match="'bedchamber', 'bedroom'"):
        edge_index, edge_weight = wordnet_graph(
            ['kitchen', 'bedchamber', 'bedroom']
        )
    weight = {
        tuple(e): w
        for e, w in zip(edge_index.t().tolist(), edge_weight.tolist())
    }
    assert weight[(1, 2)] == weight[(2, 1)] == 1.0
    assert weight[(0, 1)] == weight[(0, 2)] < 1.0

    with pytest.raises(ValueError, match="duplicate names: 'dog'"):
        wordnet_graph(['dog', 'cat', 'dog'])


def test_wordnet_graph_sun_matches_nltk(wordnet):
    # The fixture has loaded WordNet (seconds when cold): the time below
    # is the graph's alone.
    classes = list(dataset_wordnet_mapping('SUN'))
    start = time.perf_counter()
    with pytest.warns(UserWarning, match='more groups'):
        edge_index, edge_weight = wordnet_graph(
            classes, mapping=dataset_wordnet_mapping('SUN')
        )
    assert time.perf_counter() - start < 10  # ~0.2 s; nltk per pair: ~10 s.

    num_nodes = len(classes)
    assert edge_index.size(1) == num_nodes * (num_nodes - 1)
    assert is_undirected(edge_index, edge_weight, num_nodes)
    assert not contains_self_loops(edge_index)
    assert_coalesced(edge_index, num_nodes)

    synsets = resolve_synsets(classes, mapping=dataset_wordnet_mapping('SUN'))
    rng = random.Random(12345)
    for k in rng.sample(range(edge_index.size(1)), 300):
        i, j = edge_index[:, k].tolist()
        distance = synsets[i].shortest_path_distance(synsets[j])
        assert edge_weight[k].item() == pytest.approx(1.0 / max(distance, 1))


@pytest.fixture(scope='module')
def noun_graph(tmp_path_factory):
    # Built once from scratch into a temporary cache (~10 s).
    cache_dir = tmp_path_factory.mktemp('noun_graph_cache')
    data = wordnet_noun_graph(cache_dir=cache_dir)
    return data, cache_dir


def test_wordnet_noun_graph(noun_graph, wordnet):
    data, cache_dir = noun_graph
    assert data.num_nodes == 82_115
    assert data.edge_index.size() == (2, 168_854)
    assert is_undirected(data.edge_index, num_nodes=data.num_nodes)
    assert not contains_self_loops(data.edge_index)
    assert_coalesced(data.edge_index, data.num_nodes)

    assert len(data.synset_names) == data.num_nodes
    assert data.synset_names[0] == 'entity.n.01'
    assert data.offsets.dtype == torch.long
    assert bool((data.offsets[1:] > data.offsets[:-1]).all())
    assert data.lexnames == list(NOUN_LEXNAMES)
    assert len(data.lexnames) == 26
    assert data.y.size() == (data.num_nodes,)
    assert torch.equal(data.y.unique(), torch.arange(26))

    # Node i is the synset at offsets[i]; edges are its (instance)
    # hypernyms and hyponyms.
    node_of = {name: i for i, name in enumerate(data.synset_names)}
    for name in ['dog.n.01', 'paris.n.01', 'entity.n.01', 'zebra.n.01']:
        synset = wordnet.synset(name)
        i = node_of[name]
        assert data.offsets[i] == synset.offset()
        assert data.lexnames[int(data.y[i])] == synset.lexname()
        neighbors = set(data.edge_index[1, data.edge_index[0] == i].tolist())
        related = (
            synset.hypernyms()
            + synset.instance_hypernyms()
            + synset.hyponyms()
            + synset.instance_hyponyms()
        )
        assert neighbors == {node_of[s.name()] for s in related}

    # Warm: loaded from the cache file.
    assert osp.isfile(osp.join(cache_dir, 'wordnet30_noun_graph.pt'))
    start = time.perf_counter()
    again = wordnet_noun_graph(cache_dir=cache_dir)
    assert time.perf_counter() - start < 10
    assert torch.equal(again.edge_index, data.edge_index)
    assert again.synset_names == data.synset_names


def test_wordnet_noun_graph_cache(monkeypatch, tmp_path):
    calls = []

    def fake_build():
        calls.append(1)
        return {
            'version': wordnet_module._NOUN_GRAPH_VERSION,
            'edge_index': torch.tensor([[0, 1], [1, 0]]),
            'offsets': torch.tensor([1740, 1930]),
            'y': torch.tensor([0, 0]),
            'synset_names': ['entity.n.01', 'physical_entity.n.01'],
            'lexnames': list(NOUN_LEXNAMES),
        }

    monkeypatch.setattr(wordnet_module, '_build_noun_graph', fake_build)
    assert wordnet_noun_graph(cache_dir=tmp_path).num_nodes == 2
    assert len(calls) == 1
    wordnet_noun_graph(cache_dir=tmp_path)
    assert len(calls) == 1  # Loaded from the cache.
    wordnet_noun_graph(cache_dir=tmp_path, force_rebuild=True)
    assert len(calls) == 2

    path = tmp_path / 'wordnet30_noun_graph.pt'
    torch.save({'version': -1}, path)  # An outdated cache file.
    wordnet_noun_graph(cache_dir=tmp_path)
    assert len(calls) == 3
    path.write_bytes(b'garbage')  # A broken cache file.
    wordnet_noun_graph(cache_dir=tmp_path)
    assert len(calls) == 4


def test_cub_hypernyms_are_birds(wordnet):
    bird = wordnet.synset('bird.n.01')
    for synset in resolve_synsets(
        list(dataset_wordnet_mapping('CUB')),
        mapping=dataset_wordnet_mapping('CUB'),
    ):
        assert bird in synset.closure(lambda s: s.hypernyms()), synset


def test_no_warning_without_collisions():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        awa1 = dataset_wordnet_mapping('AWA1')
        wordnet_graph(list(awa1), mapping=awa1)
