import torch

from apnet_pyg.graph import wordnet_graph
from apnet_pyg.zsl import wordnet_class_prior


def test_wordnet_class_prior():
    prior = wordnet_class_prior('TOY', ['zebra', 'horse', 'dog'])
    assert prior.size() == (3, 3)
    assert torch.equal(prior, prior.t())
    assert bool((prior.diagonal() == 0).all())
    # zebra and horse (equines) are closer than zebra and dog:
    assert prior[0, 1] > prior[0, 2] > 0


def test_wordnet_class_prior_uses_the_packaged_mapping():
    # By name alone 'seal' resolves to sealing wax; AWA2's packaged mapping
    # makes it the pinniped (seal.n.09), close to the walrus. TOY has no
    # mapping.
    classes = ['seal', 'walrus']
    awa2 = wordnet_class_prior('AWA2', classes)
    by_name = wordnet_class_prior('TOY', classes)
    assert awa2[0, 1] > by_name[0, 1] > 0
    edge_index, edge_weight = wordnet_graph(
        classes, mapping={'seal': 'seal.n.09'}
    )
    assert edge_index.tolist() == [[0, 1], [1, 0]]
    assert awa2[0, 1] == awa2[1, 0] == edge_weight[0]
