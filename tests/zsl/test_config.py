import dataclasses

import pytest

from apnet_pyg.zsl import FAST, PAPER, VARIANTS, TrainConfig
from apnet_pyg.zsl.config import option_parser


def test_paper_recipe():
    assert (PAPER.lr, PAPER.weight_decay, PAPER.epochs) == (2e-5, 1e-4, 360)
    assert (PAPER.lr_decay_epoch, PAPER.lr_decay) == (240, 0.1)
    assert (PAPER.n_way, PAPER.k_shot) == (30, 1)
    assert PAPER.iterations_per_epoch is None  # |X_train| / (N K)
    assert PAPER.epoch_length == 'paper'
    assert (PAPER.propagation_temperature, PAPER.logit_scale) == (10.0, 30.0)
    assert PAPER.num_centroids == 3
    assert FAST.epochs < PAPER.epochs


def test_the_default_is_the_papers_reading():
    # The bounded score, gamma_2 = 30 and the authors' attribute scale.
    assert (PAPER.score, PAPER.logit_scale, PAPER.attributes) == (
        'sigmoid',
        30.0,
        'percent',
    )
    assert PAPER.replace(**VARIANTS['paper']) == PAPER
    authors = PAPER.replace(**VARIANTS['authors'])
    assert (authors.score, authors.logit_scale) == ('linear', 0.01)
    assert authors.epoch_length == 'authors'
    legacy = PAPER.replace(**VARIANTS['v0.1'])
    assert (legacy.score, legacy.attributes) == ('linear', 'att')


def test_every_option_documents_itself():
    for option in dataclasses.fields(TrainConfig):
        assert len(option.metadata['help']) > 20, option.name


def test_round_trip_and_replace():
    config = PAPER.replace(graph='wordnet', epochs=3)
    assert config.graph == 'wordnet' and PAPER.graph == 'learned'
    assert TrainConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize(
    'changes,message',
    [
        (dict(graph='knn'), "'graph' must be one of"),
        (dict(score='tanh'), "'score' must be one of"),
        (dict(attributes='raw'), "'attributes' must be one of"),
        (dict(epochs=0), "'epochs' must be positive"),
        (dict(n_way=1), "'n_way' must be at least 2"),
        (dict(iterations_per_epoch=0), "'iterations_per_epoch' must be"),
        (dict(seen_val_fraction=1.0), "'seen_val_fraction' must lie in"),
        (dict(logit_scale=0.0), "'logit_scale' must be positive"),
    ],
)
def test_bad_config(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes)


def test_unknown_keys():
    with pytest.raises(ValueError, match="Unknown configuration keys: 'foo'"):
        TrainConfig.from_dict({'foo': 1})


def test_option_parser_reads_each_type_from_text():
    assert option_parser('lr')('2e-5') == 2e-5
    assert option_parser('epochs')('20') == 20
    assert option_parser('lr_decay_epoch')('None') is None
    assert option_parser('lr_decay_epoch')('3') == 3
    assert option_parser('graph')('wordnet') == 'wordnet'
    with pytest.raises(ValueError):
        option_parser('epochs')('1.5')
    with pytest.raises(TypeError, match="'report_test_selected' is a switch"):
        option_parser('report_test_selected')
