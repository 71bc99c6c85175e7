r"""APNet for zero-shot node classification (DGPN's benchmark, Wang et al.,
KDD 2021): the nodes of a citation graph are the samples, each class is
described by a vector (:mod:`apnet_pyg.data.zero_shot_nodes`), the model is
trained on the seen classes' nodes and scores the unseen classes' nodes
among the unseen classes.

The model is this package's :class:`~apnet_pyg.nn.APNet` unchanged (class
descriptions encoded by the :class:`~apnet_pyg.nn.CentroidEncoder`, the
class graph none, learned, or the k nearest classes of every class over
every class (DBiGCN's), :class:`~apnet_pyg.nn.APNetConv` over it, the
:class:`~apnet_pyg.nn.RelationHead` scoring a node against every candidate
class), trained by :func:`~apnet_pyg.zsl.train.train_model` (episodic, N =
the number of seen classes when below 30). The node side enters
parameter-free (:mod:`apnet_pyg.zsl.nodes.inputs`): the features
propagated by the mean over the citation graph, a node scored at every
hop, each class's scores centred over every node of the graph. A trained
model's score matrix may then be smoothed over the node graph and
averaged over the models of a seed ensemble
(:mod:`apnet_pyg.zsl.nodes.scores`): transductive, label-free, as DGPN's
setting.

The protocol (:func:`run_nodes`), top to bottom:

1. **Choice** (:mod:`apnet_pyg.zsl.nodes.selection`) of the training
   setting, the reading of its scores and the epoch count, on Split II's
   validation classes (or its class folds), by balanced accuracy; no
   unseen-class label is read. The same runs give the oracle row, for
   diagnosis only.
2. **Evaluation** of the chosen setting, and of the best with the other
   choice of each of :data:`OTHER_ROWS`, once per seed on every split
   (:func:`evaluate_rows`): accuracy on the unseen classes' nodes among
   the unseen classes (DGPN's :obj:`get_acc`), balanced accuracy, the
   constant-predictor floor; mean and standard deviation over seeds (over
   ensembles for an ensemble).
3. **Baselines**: ESZSL and SAE (:mod:`apnet_pyg.zsl.nodes.closed_form`)
   on DGPN's inputs, ESZSL on APNet's (with :obj:`refine`, also refined
   into prototypes), their hyper-parameters chosen as APNet's.
4. With :obj:`gzsl`, **generalized zero-shot** for APNet, ESZSL and SAE
   (:mod:`apnet_pyg.zsl.nodes.gzsl`), raw and with calibrated stacking.

The metrics and tables are in :mod:`apnet_pyg.zsl.nodes.report`.
"""

import time
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from apnet_pyg.data.zero_shot_nodes import (
    DESCRIPTION_KINDS,
    ClassSplit,
    ZeroShotNodes,
)
from apnet_pyg.zsl.baselines.eszsl import eszsl_scores, fit_eszsl
from apnet_pyg.zsl.baselines.sae import fit_sae, sae_scores
from apnet_pyg.zsl.metrics import first_best_index
from apnet_pyg.zsl.nodes.closed_form import (
    DGPN_INPUTS,
    eszsl_nodes,
    eszsl_refined_nodes,
    sae_nodes,
)
from apnet_pyg.zsl.nodes.gzsl import apnet_gzsl, closed_form_gzsl
from apnet_pyg.zsl.nodes.inputs import (
    REFINEMENTS,
    SELECTIONS,
    NodeSetting,
    NodeTask,
)
from apnet_pyg.zsl.nodes.report import PUBLISHED, node_metrics, summarise
from apnet_pyg.zsl.nodes.scores import (
    PrototypeRefiner,
    ScoreSmoother,
    evaluated_scores,
    setting_scores,
)
from apnet_pyg.zsl.nodes.selection import (
    reading_grid,
    select_setting,
    selection_folds,
    selection_grid,
    smoother_of,
)
from apnet_pyg.zsl.nodes.training import record_runs

#: The rows of APNet besides the chosen one: for each choice, the best
#: setting of the selection (by validation balanced accuracy) that makes
#: the other choice: (label if the chosen setting has it, label if not,
#: the choice as a predicate of a setting).
OTHER_ROWS: Tuple[Tuple[str, str, Callable[[NodeSetting], bool]], ...] = (
    (
        'APNet (best without the k-NN class graph)',
        'APNet (best with the k-NN class graph)',
        lambda s: s.config.graph == 'knn',
    ),
    (
        'APNet (best without score smoothing)',
        'APNet (best with score smoothing)',
        lambda s: s.smoothing != 'none',
    ),
    (
        'APNet (best without prototype refinement)',
        'APNet (best with prototype refinement)',
        lambda s: s.refinement != 'none',
    ),
    (
        'APNet (best without named clusters)',
        'APNet (best with named clusters)',
        lambda s: s.refinement == 'clusters',
    ),
)


#: APNet's runs per row (seeds 0..N-1) and per setting in the selection
#: (:func:`run_nodes`, :obj:`apnet-zsl nodes`): 8 selection seeds make the
#: choosable seed ensembles four models each, and 20 seeds five of them
#: per row.
SEEDS = 20
SELECTION_SEEDS = 8


def ensemble_sizes_of(selection_seeds: int, seeds: int) -> Tuple[int, ...]:
    r"""The seed-ensemble sizes of the reading grid: single models, and
    ensembles of half the selection's seeds where that makes at least two
    models (so that the selection scores at least two ensembles, as it
    scores at least two single models) and the evaluation's seeds make at
    least one."""
    size = selection_seeds // 2
    return (1, size) if 2 <= size <= seeds else (1,)


def quick_grid(base: NodeSetting) -> List[NodeSetting]:
    r"""The grid of :obj:`apnet-zsl nodes --quick` (a smoke test): the
    base and DBiGCN's k-NN class graph."""
    return [base, base.replace(graph='knn')]


def evaluate_rows(
    nodes: ZeroShotNodes,
    csd: str,
    candidates: Sequence[Tuple[str, Dict[str, Any]]],
    splits: Sequence[ClassSplit],
    seeds: Sequence[int],
    smoother: ScoreSmoother,
    log=print,
    workers: int = 1,
) -> List[Dict[str, Any]]:
    r"""Every candidate row (:obj:`(label, {'setting', 'epochs',
    'val_balanced'})`) evaluated on the unseen classes of every split:
    each training setting trained once per seed of :obj:`seeds` and split
    (:func:`~apnet_pyg.zsl.nodes.training.record_runs` in :obj:`workers`
    processes, up to the most epochs a row of it needs), each row read
    from those runs at its epoch count (its smoothing; for an ensemble of
    :math:`S`, the :math:`\lfloor |seeds| / S \rfloor` ensembles of
    consecutive seeds; its refinement over the split's unseen classes'
    nodes)."""
    by_training: Dict[Tuple, List[int]] = {}
    for i, (_, candidate) in enumerate(candidates):
        by_training.setdefault(candidate['setting'].training_key(), []).append(
            i
        )
    per_row: List[Dict[str, Any]] = [{} for _ in candidates]
    for members in by_training.values():
        start = time.perf_counter()
        setting = candidates[members[0]][1]['setting']
        at = sorted({candidates[i][1]['epochs'] for i in members})
        for split in splits:
            task = NodeTask(nodes, split, csd, setting)
            recorded = torch.stack(
                [
                    run['unseen']
                    for run in record_runs(
                        task, seeds, {'unseen': split.unseen}, at, workers
                    )
                ]
            )
            target = nodes.data.y[task.unseen_nodes]
            refiner = PrototypeRefiner(
                task.propagated_features[task.unseen_nodes]
            )
            for i in members:
                row = candidates[i][1]
                scores = setting_scores(
                    recorded[:, at.index(row['epochs'])],
                    row['setting'],
                    smoother,
                )
                per_row[i][split.name] = summarise(
                    [
                        node_metrics(
                            split.unseen[
                                evaluated_scores(
                                    group,
                                    task.unseen_nodes,
                                    row['setting'].refinement,
                                    refiner,
                                ).argmax(dim=1)
                            ],
                            target,
                            split.unseen,
                        )
                        for group in scores
                    ]
                )
        log(
            f'  {", ".join(candidates[i][0] for i in members)}: '
            f'{len(seeds)} seeds x {len(splits)} splits in '
            f'{time.perf_counter() - start:.0f} s'
        )
    return [
        {
            'method': label,
            'setting': candidate['setting'].describe(),
            'epochs': candidate['epochs'],
            'val_balanced': candidate['val_balanced'],
            'splits': per_row[i],
        }
        for i, (label, candidate) in enumerate(candidates)
    ]


def _other_rows(selected: Dict[str, Any]) -> List[Tuple[str, Dict]]:
    # The best setting of the selection with the other choice of each of
    # OTHER_ROWS (the first best in grid order, as the selection).
    chosen = selected['chosen']['setting']
    out = []
    for if_chosen_has_it, if_not, choice in OTHER_ROWS:
        other = [
            row
            for row in selected['rows']
            if choice(row['setting']) != choice(chosen)
        ]
        if other:
            best = first_best_index([row['val_balanced'] for row in other])
            label = if_chosen_has_it if choice(chosen) else if_not
            out.append((label, other[best]))
    return out


def run_nodes(
    nodes: ZeroShotNodes,
    splits: Sequence[ClassSplit],
    csds: Sequence[str] = DESCRIPTION_KINDS,
    seeds: Sequence[int] = tuple(range(SEEDS)),
    selection_seeds: Sequence[int] = tuple(range(SELECTION_SEEDS)),
    base: Optional[NodeSetting] = None,
    grid: Optional[Sequence[NodeSetting]] = None,
    select: bool = True,
    selection: str = 'split',
    gzsl: bool = False,
    refine: bool = False,
    log=print,
    workers: int = 1,
) -> Dict[str, Any]:
    r"""The whole protocol (see the module docstring) on :obj:`nodes` for
    every class split of :obj:`splits` and CSD kind of :obj:`csds`:

    1. APNet's training setting (among :obj:`grid`; default:
       :func:`~apnet_pyg.zsl.nodes.selection.selection_grid` around
       :obj:`base`), the reading of its scores (no smoothing or a
       smoothing, a single model or the seed ensemble of the
       :obj:`selection_seeds`) and its epoch count chosen on Split II's
       validation classes or its class folds (:obj:`selection`, one of
       :data:`SELECTIONS`), over :obj:`selection_seeds`; or, with
       :obj:`select=False` or where the dataset has no Split II,
       :obj:`base` (default: :class:`NodeSetting()`) for its
       :obj:`config.epochs` epochs, fixed in advance;
    2. the chosen setting, and the best with the other choice of each of
       :data:`OTHER_ROWS`, trained once per seed of :obj:`seeds` on each
       split and evaluated on its unseen classes; the oracle row from the
       selection's runs;
    3. ESZSL and SAE on DGPN's inputs
       (:data:`~apnet_pyg.zsl.nodes.closed_form.DGPN_INPUTS`), and ESZSL
       on APNet's chosen inputs, hyper-parameters chosen as APNet's (fixed
       ones without a selection);
    4. with :obj:`gzsl`, generalized zero-shot for the chosen APNet, ESZSL
       and SAE.

    With :obj:`refine`, every reading is also tried with the scores
    refined into class prototypes
    (:class:`~apnet_pyg.zsl.nodes.scores.PrototypeRefiner`), and ESZSL on
    APNet's inputs is also shown refined.

    APNet's runs of a setting are trained in :obj:`workers` processes
    (:func:`~apnet_pyg.zsl.nodes.training.record_runs`): the same results
    for any number, sooner.

    Returns a dictionary by CSD kind (:func:`format_nodes` prints it).
    """
    if selection not in SELECTIONS:
        raise ValueError(
            f"'selection' must be one of "
            f'{", ".join(SELECTIONS)} (got {selection!r})'
        )
    base = base or NodeSetting()
    if grid is None:
        grid = selection_grid(base)
    try:
        validation_split = nodes.split('II')
    except ValueError:
        validation_split = None
    select = select and validation_split is not None
    ensemble_sizes = ensemble_sizes_of(len(selection_seeds), len(seeds))
    folds = where = None
    if select and selection == 'folds':
        folds = selection_folds(validation_split)
        where = (
            f"by class-level cross-validation over Split II's seen "
            f'and validation classes ({len(folds)} folds, each '
            f'trained on {validation_split.seen.numel()} of them and '
            f'validated on the others; mean over the folds)'
        )
    elif select:
        folds = [validation_split]
        where = (
            f"on Split II's validation classes ({validation_split.describe()})"
        )
    results: Dict[str, Any] = {
        'dataset': nodes.name,
        'splits': {s.name: s.describe() for s in splits},
        'num_unseen': {s.name: s.unseen.numel() for s in splits},
        'seeds': list(seeds),
        'selection_seeds': list(selection_seeds),
        'selection': (
            f'chosen {where} by balanced accuracy, then used '
            'unchanged on every split'
        )
        if select
        else (
            'fixed in advance (no selection: '
            + (
                '--no-select'
                if validation_split is not None
                else 'the dataset has no Split II'
            )
            + ')'
        ),
        'csds': {},
    }
    for csd in csds:
        nodes.description(csd)  # A missing file fails here, named.
        log(f'{nodes.name}, {csd.upper()}-CSDs')

        # 1. The choice, on validation classes only.
        selected = None
        if select:
            selected = select_setting(
                nodes,
                csd,
                grid,
                selection_seeds,
                log,
                folds,
                reading_grid(
                    ensemble_sizes, REFINEMENTS if refine else ('none',)
                ),
                workers=workers,
            )
            candidates = [('APNet (chosen)', selected['chosen'])]
            candidates += _other_rows(selected)
        else:
            candidates = [
                (
                    'APNet (fixed in advance)',
                    {
                        'setting': base,
                        'val_balanced': None,
                        'epochs': base.config.epochs,
                    },
                )
            ]
        chosen = candidates[0][1]

        # 2. APNet's rows, on every split's unseen classes.
        smoother = smoother_of(nodes, chosen['setting'])
        rows = evaluate_rows(
            nodes, csd, candidates, splits, seeds, smoother, log, workers
        )

        # 3. The closed-form baselines, chosen alike (without validation
        # classes: ESZSL's middle of the grid).
        dgpn_choice = None if select else (1.0, 1.0)
        eszsl = eszsl_nodes(
            nodes, csd, DGPN_INPUTS, splits, dgpn_choice, folds
        )
        rows.append(
            {
                'method': "ESZSL (DGPN's inputs)",
                'setting': f'gamma={eszsl["gamma"]:g}, '
                f'lambda={eszsl["lam"]:g}',
                **eszsl,
            }
        )
        sae = None
        if select:
            sae = sae_nodes(nodes, csd, DGPN_INPUTS, splits, folds)
            rows.append(
                {
                    'method': "SAE (DGPN's inputs)",
                    'setting': f'lambda={sae["lam"]:g}, space={sae["space"]}',
                    **sae,
                }
            )
            apnet_inputs = eszsl_nodes(
                nodes, csd, chosen['setting'], splits, folds=folds
            )
            rows.append(
                {
                    'method': "ESZSL (APNet's inputs)",
                    'setting': f'gamma={apnet_inputs["gamma"]:g}, '
                    f'lambda={apnet_inputs["lam"]:g}',
                    **apnet_inputs,
                }
            )
        if select and refine:
            # What the prototype refinement gives without APNet.
            refined = eszsl_refined_nodes(
                nodes,
                csd,
                chosen['setting'],
                splits,
                (apnet_inputs['gamma'], apnet_inputs['lam']),
            )
            rows.append(
                {
                    'method': "ESZSL (APNet's inputs), prototypes refined",
                    'setting': f'gamma={refined["gamma"]:g}, '
                    f'lambda={refined["lam"]:g} (the row above), '
                    'prototypes refined (k-means over the nodes scored)',
                    **refined,
                }
            )

        # 4. Generalized zero-shot: every test node among all classes.
        gzsl_rows = None
        if gzsl:
            gzsl_rows = _gzsl_rows(
                nodes,
                csd,
                candidates[0],
                splits,
                seeds,
                selection_seeds,
                validation_split,
                smoother,
                eszsl,
                sae,
                log,
                workers,
            )

        results['csds'][csd] = {
            'rows': rows,
            'floor': {
                name: rows[0]['splits'][name]['floor']
                for name in rows[0]['splits']
            },
            'knn_chosen': chosen['setting'].config.graph == 'knn',
            'selection': None
            if selected is None
            else [
                {
                    'setting': r['setting'].describe(),
                    'epochs': r['epochs'],
                    'val_balanced': r['val_balanced'],
                    'val_std': r['val_std'],
                }
                for r in selected['rows']
            ],
            'oracle': None
            if selected is None or selected['oracle'] is None
            else {
                **selected['oracle'],
                'setting': selected['oracle']['setting'].describe(),
            },
            'gzsl': gzsl_rows,
            **(
                {'refinement_chosen': chosen['setting'].refinement != 'none'}
                if refine
                else {}
            ),
            'published': PUBLISHED.get(nodes.name.lower(), {}).get(csd, {}),
        }
    return results


def _gzsl_rows(
    nodes: ZeroShotNodes,
    csd: str,
    chosen: Tuple[str, Dict[str, Any]],
    splits: Sequence[ClassSplit],
    seeds: Sequence[int],
    selection_seeds: Sequence[int],
    validation_split: Optional[ClassSplit],
    smoother: ScoreSmoother,
    eszsl: Dict[str, Any],
    sae: Optional[Dict[str, Any]],
    log,
    workers: int,
) -> List[Dict[str, Any]]:
    # APNet (its chosen setting, reading and epochs), ESZSL and SAE (their
    # chosen hyper-parameters) in generalized zero-shot. APNet's scores are
    # read without the prototype refinement: its prototypes are the unseen
    # classes' nodes' clusters, and a generalized task mixes seen nodes in.
    start = time.perf_counter()
    label, candidate = chosen
    setting = candidate['setting'].replace(refinement='none')
    rows = [
        {
            'method': label,
            'setting': f'{candidate["epochs"]} epochs, {setting.describe()}',
            **apnet_gzsl(
                nodes,
                csd,
                setting,
                candidate['epochs'],
                splits,
                seeds,
                # The calibration's models are the selection's.
                selection_seeds,
                validation_split,
                smoother,
                workers,
            ),
        }
    ]
    gamma, lam = eszsl['gamma'], eszsl['lam']
    rows.append(
        {
            'method': "ESZSL (DGPN's inputs)",
            'setting': f'gamma={gamma:g}, lambda={lam:g}',
            **closed_form_gzsl(
                nodes,
                csd,
                DGPN_INPUTS,
                splits,
                partial(fit_eszsl, gamma=gamma, lam=lam),
                eszsl_scores,
                validation_split,
            ),
        }
    )
    if sae is not None:
        lam, space = sae['lam'], sae['space']
        rows.append(
            {
                'method': "SAE (DGPN's inputs)",
                'setting': f'lambda={lam:g}, space={space}',
                **closed_form_gzsl(
                    nodes,
                    csd,
                    DGPN_INPUTS,
                    splits,
                    partial(fit_sae, lam=lam),
                    partial(sae_scores, space=space),
                    validation_split,
                ),
            }
        )
    log(
        f'  generalized zero-shot ({len(seeds)} seeds x {len(splits)} '
        f'splits, and the calibration) in {time.perf_counter() - start:.0f} s'
    )
    return rows
