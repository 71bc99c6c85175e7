import pytest

from apnet_pyg.zsl.baselines.eszsl import eszsl_scores, fit_eszsl
from apnet_pyg.zsl.nodes.closed_form import (
    DGPN_INPUTS,
    eszsl_nodes,
    eszsl_refined_nodes,
    sae_nodes,
)
from apnet_pyg.zsl.nodes.inputs import NodeTask
from apnet_pyg.zsl.nodes.report import node_metrics
from apnet_pyg.zsl.nodes.scores import PrototypeRefiner
from apnet_pyg.zsl.nodes.selection import selection_folds
from tests.helpers.zero_shot_nodes import TINY_NODES, relabel_unseen


@pytest.mark.parametrize('selection', ['split', 'folds'])
def test_choices_never_read_unseen_labels(tiny, selection):
    _, nodes = tiny
    changed = relabel_unseen(nodes)
    split = nodes.split('II')
    folds = selection_folds(split) if selection == 'folds' else None
    first = eszsl_nodes(nodes, 'text', DGPN_INPUTS, [split], folds=folds)
    second = eszsl_nodes(changed, 'text', DGPN_INPUTS, [split], folds=folds)
    assert (first['gamma'], first['lam'], first['val_balanced']) == (
        second['gamma'],
        second['lam'],
        second['val_balanced'],
    )
    first = sae_nodes(nodes, 'text', DGPN_INPUTS, [split], folds)
    second = sae_nodes(changed, 'text', DGPN_INPUTS, [split], folds)
    assert (first['lam'], first['space'], first['val_balanced']) == (
        second['lam'],
        second['space'],
        second['val_balanced'],
    )


def test_closed_form_choice_on_split_ii_is_the_validated_fit(tiny):
    # One fold (Split II): the choice of fit_eszsl_validated and
    # fit_sae_validated, which score the same grid on the same classes.
    from apnet_pyg.zsl.baselines.eszsl import fit_eszsl_validated
    from apnet_pyg.zsl.baselines.sae import fit_sae_validated
    from apnet_pyg.zsl.nodes.closed_form import ESZSL_GRID

    _, nodes = tiny
    split = nodes.split('II')
    task = NodeTask(nodes, split, 'text', DGPN_INPUTS)
    arguments = dict(
        features=task.features.double(),
        labels=nodes.data.y,
        attributes=task.descriptions.double(),
        train_classes=split.seen,
        train_images=task.seen_nodes,
        val_classes=split.val,
        val_images=task.val_nodes,
        refit_classes=split.seen,
        refit_images=task.seen_nodes,
    )
    _, gamma, lam, accuracy = fit_eszsl_validated(**arguments, grid=ESZSL_GRID)
    eszsl = eszsl_nodes(nodes, 'text', DGPN_INPUTS, [split])
    assert (eszsl['gamma'], eszsl['lam']) == (gamma, lam)
    assert eszsl['val_balanced'] == pytest.approx(accuracy, abs=1e-9)
    _, lam, space, accuracy = fit_sae_validated(**arguments)
    sae = sae_nodes(nodes, 'text', DGPN_INPUTS, [split])
    assert (sae['lam'], sae['space']) == (lam, space)
    assert sae['val_balanced'] == pytest.approx(accuracy, abs=1e-9)


def test_eszsl_refined_is_eszsl_read_through_the_refiner(tiny):
    # The same fit as ESZSL's row, its unseen scores refined over the
    # unseen classes' nodes' propagated features.
    _, nodes = tiny
    splits = [nodes.split('I'), nodes.split('II')]
    setting = TINY_NODES.replace(scoring='single')
    out = eszsl_refined_nodes(nodes, 'text', setting, splits, (1.0, 10.0))
    assert (out['gamma'], out['lam']) == (1.0, 10.0)
    y = nodes.data.y
    for split in splits:
        task = NodeTask(nodes, split, 'text', setting)
        x, s = task.features.double(), task.descriptions.double()
        v = fit_eszsl(
            x[task.seen_nodes], y[task.seen_nodes], s, split.seen, 1.0, 10.0
        )
        index = task.unseen_nodes
        scores = PrototypeRefiner(task.features[index])(
            eszsl_scores(v, x[index], s, split.unseen)
        )
        expected = node_metrics(
            split.unseen[scores.argmax(1)], y[index], split.unseen
        )
        assert out['splits'][split.name]['acc'] == pytest.approx(
            expected['acc']
        )
        assert out['splits'][split.name]['seeds'] == 1
