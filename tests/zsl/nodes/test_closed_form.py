import pytest

from apnet_pyg.zsl.nodes.closed_form import DGPN_INPUTS, eszsl_nodes, sae_nodes
from apnet_pyg.zsl.nodes.inputs import NodeTask
from apnet_pyg.zsl.nodes.selection import selection_folds
from tests.helpers.zero_shot_nodes import relabel_unseen


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
