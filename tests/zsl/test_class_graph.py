import torch

from apnet_pyg.zsl import ClassPrior


def test_class_prior_subgraph():
    edge_index = torch.tensor([[0, 1, 1, 2, 3], [1, 0, 2, 1, 0]])
    edge_weight = torch.tensor([1.0, 1.0, 0.5, 0.5, 0.25])
    prior = ClassPrior(edge_index, edge_weight, 4)
    assert prior.num_classes == 4
    sub_index, sub_weight = prior.subgraph(torch.tensor([2, 1, 3]))
    # Classes relabelled 2 -> 0, 1 -> 1, 3 -> 2; edges among them only:
    edges = {(s, t): w for (s, t), w in zip(sub_index.t().tolist(),
                                            sub_weight.tolist())}
    assert edges == {(1, 0): 0.5, (0, 1): 0.5}


def test_class_prior_wordnet():
    prior = ClassPrior.wordnet('TOY', ['zebra', 'horse', 'dog'])
    assert prior.num_classes == 3
    weight = prior.weight
    assert torch.equal(weight, weight.t())
    assert bool((weight.diagonal() == 0).all())
    # zebra and horse (equines) are closer than zebra and dog:
    assert weight[0, 1] > weight[0, 2] > 0
    awa2 = ClassPrior.wordnet('AWA2', ['giant+panda', 'killer+whale'])
    assert awa2.weight[0, 1] > 0


def test_class_prior_for_graph():
    names = ['zebra', 'horse', 'dog']
    prior = ClassPrior.for_graph('wordnet', 'TOY', names)
    assert torch.equal(prior.weight,
                       ClassPrior.wordnet('TOY', names).weight)
    # The learned graph and no graph need no prior (and no WordNet lookup:
    # an unknown name is not an error here).
    assert ClassPrior.for_graph('learned', 'TOY', ['unicorn']) is None
    assert ClassPrior.for_graph('none', 'TOY', ['unicorn']) is None
