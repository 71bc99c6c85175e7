import torch

from apnet_pyg.zsl import wordnet_class_prior


def test_wordnet_class_prior():
    prior = wordnet_class_prior('TOY', ['zebra', 'horse', 'dog'])
    assert prior.size() == (3, 3)
    assert torch.equal(prior, prior.t())
    assert bool((prior.diagonal() == 0).all())
    # zebra and horse (equines) are closer than zebra and dog:
    assert prior[0, 1] > prior[0, 2] > 0


def test_wordnet_class_prior_uses_the_packaged_mapping():
    # 'killer+whale' resolves only through AWA2's packaged mapping.
    awa2 = wordnet_class_prior('AWA2', ['giant+panda', 'killer+whale'])
    assert awa2[0, 1] > 0
