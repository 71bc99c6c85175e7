r"""Writes experiments/zero-shot-nodes.md: runs :obj:`apnet-zsl nodes` on
the real zero-shot node classification data (DGPN's Cora) and records its
command, its output and where it ran. The numbers on the page are the command's
output, written here, never by hand.

    python experiments/zero_shot_nodes_results.py
        [--block {split,folds,refine}] [--out PAGE]

Each block is one command's run (the default protocol; its choices made
by class folds; with the prototype refinement); a run rewrites its own
block and keeps the others while their commands are current.
"""

import argparse
import contextlib
import io
import os
import platform
import sys
import time
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = '../shared/data/zero_shot_nodes'
DEFAULT_PAGE = REPO / 'experiments' / 'zero-shot-nodes.md'
ARGUMENTS = [
    'nodes',
    '--dataset',
    'cora',
    '--root',
    DEFAULT_ROOT,
    '--split',
    'I',
    'II',
    '--csd',
    'text',
    'label',
    '--seeds',
    '20',
    '--workers',
    '2',
    '--gzsl',
]
#: The command of each selection (its arguments) and its block's markers.
#: The class folds take one run per fold and setting (6 folds on Cora):
#: three times the work of the split's two runs.
BLOCKS = {
    'split': (
        ARGUMENTS,
        '<!-- nodes-output:start -->',
        '<!-- nodes-output:end -->',
    ),
    'folds': (
        ARGUMENTS + ['--selection', 'folds', '--selection-seeds', '1'],
        '<!-- nodes-folds-output:start -->',
        '<!-- nodes-folds-output:end -->',
    ),
    'refine': (
        ARGUMENTS + ['--refine'],
        '<!-- nodes-refine-output:start -->',
        '<!-- nodes-refine-output:end -->',
    ),
}
BEGIN, END = BLOCKS['split'][1:]

INTRO = """# Zero-shot node classification on real data (DGPN's Cora)

APNet on the zero-shot node classification benchmark of Wang et al.,
"Zero-shot Node Classification with Decomposed Graph Prototype Network"
(DGPN, KDD 2021), with real features: the papers of the Cora citation
graph are the samples (bag-of-words features), each class is described by
a 128-d text embedding (TEXT-CSDs: a text about the class; LABEL-CSDs: its
name), the first classes by id are seen, the rest unseen. Split I: 3 seen,
4 unseen; Split II: 2 seen, 2 validation, 3 unseen classes. The data and
its provenance: `../shared/data/zero_shot_nodes/README.md`; the reader:
`apnet_pyg.data.read_zero_shot_nodes` (any dataset in DGPN's layout:
`--root` and `--dataset` name its folder); the protocol:
`apnet_pyg.zsl.nodes.protocol`.

How to read the table: *acc* is the accuracy on the unseen classes' nodes,
classified among the unseen classes (DGPN's figure); *balanced* is the
mean per-class recall, where a model that predicts one class for every
node scores 100 / (number of unseen classes). The constant predictor
always answers the largest unseen class. Every choice (APNet's training
setting, the reading of its scores, its epoch count; ESZSL's gamma and
lambda; SAE's lambda and space; the calibration constants of generalized
zero-shot) is made on Split II's validation classes, then used unchanged
on both splits; no unseen-class label is read before the final
evaluation. "published" rows are DGPN's Tables 3 and 4, not runs of this
package; DGPN's public code (like DBiGCN's and GraphGCR's) picks its
epochs and hyper-parameters on the test classes, so its figures are
optimistic next to ours.

APNet's base setting was fixed in advance (`apnet_pyg.zsl.nodes.inputs.
NodeSetting()`): node features row-scaled and propagated by the mean over
the citation graph, the node scored at hops 0, 1 and 2 (the per-hop
logits averaged: DGPN's locality), each candidate class's logits centred
over every node of the graph (transductive but label-free, as DGPN's
setting). The selection (`apnet_pyg.zsl.nodes.selection`) crosses two
grids, both fixed in advance:

- *training settings* (`selection_grid`): the base, then one choice
  changed at a time: more hops, the paper's learned class graph (cosine
  at least cos 40 degrees), the k-NN class graph of DBiGCN (Yue et al.,
  KDD 2022: every class joined to its 2 nearest classes by their
  descriptions, no self-loop, over every class of the dataset, so that an
  unseen class is composed from the classes it resembles), that graph
  over the encoded class vectors and with its temperature learned, and
  the linear score. `--full-grid` also tries one propagated feature
  vector, unit-norm descriptions, the k-NN graph with self-loops and the
  multiplicative head: on Cora they scored at least 3.5 points below the
  best on validation with both description kinds, and are left out of the
  default for time;
- *readings* of a trained model's scores (`reading_grid`): the score
  matrix of every node as it is, or smoothed over the citation graph
  (`apnet_pyg.zsl.nodes.scores`: 16 or 64 steps of the mean over a node
  and its neighbours, or of that mean weighted by `APNetConv`'s attention
  over the node features), each for a single model and for a seed
  ensemble of 4 (the mean of four models' calibrated scores).

Each training setting is trained once per selection seed (8), and every
reading of it is scored from the same runs after every epoch; the chosen
(setting, reading, epoch count) is the one of highest mean balanced
accuracy on the validation classes' nodes among the validation classes.
The table shows it, the best setting with the other choice of the k-NN
class graph, and the best with the other choice of smoothing, each
trained once per seed (20) on each split; an ensemble row's mean and
standard deviation are over its 5 ensembles of consecutive seeds. A line
says whether the k-NN class graph was chosen.

Below the table, for diagnosis only, the oracle: the setting, reading and
epoch of best accuracy on Split II's unseen classes, from the selection's
own runs (trained on Split II's seen classes), as DGPN's public code
selects. It says whether the model family or the selection falls short;
it is never used for a choice or a claim (Split I has no such runs).

Generalized zero-shot (`--gzsl`, `apnet_pyg.zsl.nodes.gzsl`): a fixed 20%
of every class's nodes (seed 0) is never trained on; each split's models
(APNet's chosen setting, reading and epochs; ESZSL and SAE with their
chosen hyper-parameters) classify those of the seen classes and every
node of the unseen classes among all the split's classes. S and U are
per-class accuracies, H their harmonic mean, raw and with calibrated
stacking, its constant chosen on Split II's validation task (trained on
its seen classes less a further 20%, scored on those and the validation
classes' nodes). The published graph methods report no such figure.

Left out of this version's run, for time: the row of APNet trained as
DGPN's public code trains (measured apart, with a reimplementation of
DGPN's model, in
[zero-shot-nodes-dgpn-ablation.md](zero-shot-nodes-dgpn-ablation.md),
`experiments/dgpn_training_ablation.py`), and the class-fold selection
(`--selection folds`, `python experiments/zero_shot_nodes_results.py
--block folds` adds its block to this page). The prototype
refinement (`--refine`, `--block refine`) has its block below this
run's.
"""


FOLDS_INTRO = """
## The same, chosen by class-level cross-validation

Split II's two validation classes are one fold of its four known
classes. With `--selection folds`, every choice is made on all six ways
to train on two of Split II's seen and validation classes and validate
on the other two, by the mean balanced accuracy over the folds (one run
per fold and setting, so no seed ensemble); no unseen-class label is read
either. The rows and the baselines' inputs are as above.
"""


REFINE_INTRO = """
## The same, with the scores refined into class prototypes (`--refine`)

`--refine` also tries every reading with the scores *refined into class
prototypes* (`apnet_pyg.zsl.nodes.scores.PrototypeRefiner`: structured
prediction for zero-shot learning, Zhang and Saligrama, ECCV 2016). The
nodes a task classifies (the validation classes' nodes when choosing,
the unseen classes' nodes when testing) form clusters in feature space,
and the zero-shot scores only have to name them: each candidate class's
prototype starts as the mean propagated features of the nodes it scores
highest (a ranking within the class, which a calibration offset cannot
move), then k-means with the cosine over those nodes, and every node is
scored by its cosine to each prototype. Transductive: it reads which
nodes are to be classified, as a transductive zero-shot method reads its
unlabelled test set, never a label. The row "ESZSL (APNet's inputs),
prototypes refined" applies the same refinement to ESZSL's scores: what
it gives without APNet. Generalized zero-shot reads APNet's scores
without it (its prototypes are clusters of the unseen classes' nodes; a
generalized task mixes seen classes' nodes in). It is not in the default
grid: the refinement amplifies the scores' ranking, right or wrong, and
Split II's two validation classes cannot tell how it does with four.

A second refinement, *named clusters* (`PrototypeRefiner.name_clusters`,
a reading of its own in the same grid), finds the clusters without the
scores: k-means with the cosine over the same nodes, as many clusters as
candidate classes (k-means++ starts of a fixed seed, the best of 10),
then every cluster is given one class, a different class each, by the
assignment (Hungarian) of highest total affinity, a cluster's affinity
to a class being its nodes' mean rank in the class's score column. With
descriptions as nearly parallel as Cora's, two classes' columns can rank
the same nodes first: their seeded prototypes then start in one cluster,
and k-means can leave a class without nodes or give it another's
cluster; named clusters give every class one.
"""


def command_line(selection: str = 'split') -> str:
    return 'apnet-zsl ' + ' '.join(BLOCKS[selection][0])


def block_of(page: str, selection: str) -> str:
    r"""The block of :obj:`selection` on :obj:`page`, markers included
    (:obj:`''` if it has none)."""
    _, begin, end = BLOCKS[selection]
    if begin not in page or end not in page:
        return ''
    return page[page.index(begin) : page.index(end) + len(end)]


def check(page: Path = DEFAULT_PAGE) -> List[str]:
    r"""What is stale on :obj:`page`: its prose is not this script's, or a
    block's command is not the one the script runs today (the block is
    the command's own output, so its command is its record)."""
    name = Path(page).name
    text = Path(page).read_text()
    rerun = 'python experiments/zero_shot_nodes_results.py'
    problems = []
    if not text.startswith(INTRO + '\n' + BLOCKS['split'][1]):
        problems.append(f"{name}: the prose is not the script's: {rerun}")
    for selection in BLOCKS:
        block = block_of(text, selection)
        if not block:
            if selection == 'split':
                problems.append(f'{name}: no block of its run: {rerun}')
            continue
        if f'`{command_line(selection)}`' not in block:
            flag = '' if selection == 'split' else f' --block {selection}'
            problems.append(
                f'{name}: the {selection} block is not the output of '
                f'`{command_line(selection)}`: {rerun}{flag}'
            )
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--block',
        choices=sorted(BLOCKS),
        default='split',
        help='which block to run and rewrite (default: split)',
    )
    parser.add_argument('--out', default=str(DEFAULT_PAGE))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from apnet_pyg.zsl.cli import main as apnet_zsl

    arguments, begin, end = BLOCKS[args.block]
    workers = arguments[arguments.index('--workers') + 1]
    buffer = io.StringIO()
    # The machine may be shared: its load says what the wall clock means.
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with contextlib.redirect_stdout(buffer):
        status = apnet_zsl(arguments)
    seconds = time.perf_counter() - start
    output = buffer.getvalue()
    if status != 0:
        sys.stdout.write(output)
        print(
            f'the command failed (exit {status}); the page is unchanged',
            file=sys.stderr,
        )
        return status
    selection, _, table = output.partition('\n\n')
    processor = platform.processor() or platform.machine()
    blocks = {}
    if Path(args.out).is_file():
        old = Path(args.out).read_text()
        # Another selection's block stays while its command is current (a
        # block of an earlier version's command is stale: dropped).
        blocks = {
            name: block
            for name in BLOCKS
            if f'`{command_line(name)}`' in (block := block_of(old, name))
        }
    blocks[args.block] = (
        begin + '\n' + f'`{command_line(args.block)}` (run from the '
        f'repository root, {workers} worker processes of 1 torch thread '
        f'each, on {processor}, '
        f'{seconds / 60:.1f} min wall clock; load average {load:.1f} '
        f'on {os.cpu_count()} cores when it started) printed:\n\n'
        + table.strip()
        + '\n\nThe selection it made (mean over the selection seeds'
        + (' and folds' if args.block == 'folds' else '')
        + '):\n\n```text\n'
        + selection.strip()
        + '\n```\n'
        + end
    )
    page = INTRO + '\n' + blocks.get('split', '') + '\n'
    if blocks.get('folds'):
        page += FOLDS_INTRO + '\n' + blocks['folds'] + '\n'
    if blocks.get('refine'):
        page += REFINE_INTRO + '\n' + blocks['refine'] + '\n'
    Path(args.out).write_text(page)
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
