import dataclasses

import pytest
import torch

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
    knn = PAPER.replace(
        graph='knn',
        knn_k=3,
        knn_loop=True,
        knn_space='encoded',
        knn_classes='all',
        learn_propagation_temperature=True,
    )
    assert TrainConfig.from_dict(knn.to_dict()) == knn


def test_knn_options_reach_the_model():
    # The k-NN graph's options, and every class's attributes, from the
    # configuration to the model build_model makes.
    from apnet_pyg.data.xlsa17 import ZSLDataset
    from apnet_pyg.zsl import build_model

    attributes = torch.rand(6, 4, generator=torch.Generator().manual_seed(0))
    data = ZSLDataset(
        name='toy',
        class_names=[f'c{i}' for i in range(6)],
        attributes=attributes,
        features=torch.rand(12, 5),
        labels=torch.arange(6).repeat(2),
        trainval_loc=torch.arange(8),
        test_seen_loc=torch.zeros(0, dtype=torch.long),
        test_unseen_loc=torch.arange(8, 12),
        train_loc=None,
        val_loc=None,
        seen_classes=torch.arange(4),
        unseen_classes=torch.arange(4, 6),
        train_classes=None,
        val_classes=None,
    )
    config = PAPER.replace(
        graph='knn',
        knn_k=3,
        knn_loop=True,
        knn_space='encoded',
        knn_classes='all',
        learn_propagation_temperature=True,
        class_channels=8,
        hidden_channels=8,
        proj_channels=4,
        num_centroids=2,
    )
    model = build_model(config, data, data.seen_classes)
    assert (model.graph, model.knn_k, model.knn_loop) == ('knn', 3, True)
    assert (model.knn_space, model.knn_classes) == ('encoded', 'all')
    assert model.conv.add_self_loops
    assert isinstance(model.conv.temperature, torch.nn.Parameter)
    assert torch.equal(model.class_attributes, attributes)
    # The paper's graph holds no class table.
    learned = build_model(
        config.replace(graph='learned'), data, data.seen_classes
    )
    assert learned.class_attributes is None and learned.conv.add_self_loops


@pytest.mark.parametrize(
    'changes,message',
    [
        (dict(graph='gcn'), "'graph' must be one of"),
        (dict(knn_k=0), "'knn_k' must be positive"),
        (dict(knn_space='projected'), "'knn_space' must be one of"),
        (dict(knn_classes='seen'), "'knn_classes' must be one of"),
        (dict(knn_loop='no'), "'knn_loop' must be True or False"),
        (
            dict(learn_propagation_temperature=1),
            "'learn_propagation_temperature' must be True or False",
        ),
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
