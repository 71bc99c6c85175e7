import pytest

from apnet_pyg.zsl import FAST, PAPER, TrainConfig


def test_paper_recipe():
    assert (PAPER.lr, PAPER.weight_decay, PAPER.epochs) == (2e-5, 1e-4, 360)
    assert (PAPER.lr_decay_epoch, PAPER.lr_decay) == (240, 0.1)
    assert (PAPER.n_way, PAPER.k_shot) == (30, 1)
    assert PAPER.iterations_per_epoch is None  # |X_train| / (N K)
    assert (PAPER.propagation_temperature, PAPER.logit_scale) == (10.0, 30.0)
    assert PAPER.num_centroids == 3
    assert FAST.epochs < PAPER.epochs


def test_round_trip_and_replace():
    config = PAPER.replace(graph='wordnet', epochs=3)
    assert config.graph == 'wordnet' and PAPER.graph == 'learned'
    assert TrainConfig.from_dict(config.to_dict()) == config


def test_bad_config():
    with pytest.raises(ValueError, match="'graph' must be one of"):
        TrainConfig(graph='knn')
    with pytest.raises(ValueError, match="'epochs' must be positive"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="Unknown configuration keys: foo"):
        TrainConfig.from_dict({'foo': 1})
