r"""Bad inputs of apnet_pyg.data (load_xlsa17 on broken files, ZSLDataset,
the samplers, splits, WordNet mappings, the simulator), one row each, and
the error each gets; the row and the runner are in tests/bad_input.py."""

import math
from typing import Any

import numpy as np
import scipy.sparse
import torch

from apnet_pyg.data import EpisodeSampler, MinibatchSampler, load_xlsa17
from apnet_pyg.data.simulator import simulate_dataset, simulate_xlsa17
from apnet_pyg.data.splits import hold_out_per_class, seen_validation_split
from apnet_pyg.data.wordnet_mappings import (
    dataset_wordnet_mapping,
    read_mapping_rows,
    wordnet_coverage,
)
from tests.helpers.bad_input import (
    DIRECTORY,
    LABELS,
    Case,
    Ctx,
    Table,
    check_row,
    check_table,
    toy_load,
    write,
)

# tests/xlsa17_toy.py has the toy dataset's layout.
from tests.helpers.xlsa17_toy import NAMES, index_list, names_cell

CASES = Table()
case = CASES.case

# ---------------------------------------------------------------------------
# load_xlsa17 on broken files
# ---------------------------------------------------------------------------
case(
    'load_xlsa17/root-None-with-features',
    lambda c: load_xlsa17(None, 'AWA2'),
    FileNotFoundError,
    r"'res101.mat' is not shipped. Pass load_features=False",
)
case(
    'load_xlsa17/attributes="raw"',
    lambda c: toy_load(c.toy(), attributes='raw'),
    ValueError,
    r"'attributes' must be one of att, original_att, percent",
)
case(
    'load_xlsa17/dataset=3',
    lambda c: load_xlsa17(c.toy(), 3),
    ValueError,
    r"'dataset' must be a dataset folder name",
)
case(
    'load_xlsa17/load_features="yes"',
    lambda c: toy_load(c.toy(), load_features='yes'),
    ValueError,
    r"'load_features' must be True or False",
)
case(
    'load_xlsa17/no-dataset-folder',
    lambda c: load_xlsa17(c.tmp, 'NOPE'),
    FileNotFoundError,
    r"No dataset folder 'NOPE' in '.*' \(found: "
    r'nothing\)',
)
case(
    'load_xlsa17/root-a-file',
    lambda c: load_xlsa17(write(c.tmp / 'root', 'x'), 'TOY'),
    NotADirectoryError,
    r"The data root '.*root' is a file",
)
case(
    'load_xlsa17/att_splits.mat-missing',
    lambda c: toy_load(c.toy_without('att_splits.mat')),
    FileNotFoundError,
    r"Missing file '.*att_splits.mat'",
)
case(
    'load_xlsa17/att_splits.mat-a-directory',
    lambda c: toy_load(c.toy_with('att_splits.mat', DIRECTORY)),
    IsADirectoryError,
    r"'.*att_splits.mat' is a directory where a file is "
    r'expected',
)
case(
    'load_xlsa17/res101.mat-a-directory',
    lambda c: toy_load(c.toy_with('res101.mat', DIRECTORY)),
    IsADirectoryError,
    r"'.*res101.mat' is a directory where a file is "
    r'expected',
)
case(
    'load_xlsa17/res101.mat-missing',
    lambda c: toy_load(c.toy_without('res101.mat')),
    FileNotFoundError,
    r"Missing file '.*res101.mat'",
)
case(
    'load_xlsa17/att_splits.mat-text',
    lambda c: toy_load(c.toy_with('att_splits.mat', 'hello')),
    ValueError,
    r"'.*att_splits.mat' is not a MATLAB .mat file",
)
case(
    'load_xlsa17/res101.mat-random-bytes',
    lambda c: toy_load(c.toy_with('res101.mat', bytes(range(256)) * 4)),
    ValueError,
    r'res101.mat',
)
case(
    'load_xlsa17/att_splits.mat-empty',
    lambda c: toy_load(c.toy_with('att_splits.mat', b'')),
    ValueError,
    r"'.*att_splits.mat' is not a MATLAB .mat file",
)
case(
    'load_xlsa17/no-att',
    lambda c: toy_load(c.toy(drop=['att'])),
    ValueError,
    r"'.*att_splits.mat' has no variable 'att'",
)
case(
    'load_xlsa17/no-allclasses_names',
    lambda c: toy_load(c.toy(drop=['allclasses_names'])),
    ValueError,
    r"'.*att_splits.mat' has no variable 'allclasses_names'",
)
case(
    'load_xlsa17/no-trainval_loc',
    lambda c: toy_load(c.toy(drop=['trainval_loc'])),
    ValueError,
    r"'.*att_splits.mat' has no variable 'trainval_loc'",
)
case(
    'load_xlsa17/att-transposed',
    lambda c: toy_load(c.toy(splits={'att': np.ones((5, 7))})),
    ValueError,
    r"'att' in '.*att_splits.mat' must be A x C.*looks transposed",
)
case(
    'load_xlsa17/att-nan',
    lambda c: toy_load(c.toy(splits={'att': np.full((7, 5), np.nan)})),
    ValueError,
    r"'att' in '.*att_splits.mat' contains NaN",
)
case(
    'load_xlsa17/att-strings',
    lambda c: toy_load(c.toy(splits={'att': names_cell(NAMES)})),
    ValueError,
    r"'att' in '.*att_splits.mat' must be a numeric array",
)
case(
    'load_xlsa17/duplicate-class-names',
    lambda c: toy_load(
        c.toy(splits={'allclasses_names': names_cell(NAMES[:4] + NAMES[:1])})
    ),
    ValueError,
    r"'allclasses_names' in '.*att_splits.mat' contains duplicate names",
)
case(
    'load_xlsa17/allclasses_names-numbers',
    lambda c: toy_load(c.toy(splits={'allclasses_names': np.ones((5, 1))})),
    ValueError,
    r"'allclasses_names' in '.*' must be a C x 1 cell array",
)
case(
    'load_xlsa17/trainval_loc-matrix',
    lambda c: toy_load(c.toy(splits={'trainval_loc': np.ones((3, 2))})),
    ValueError,
    r"'trainval_loc' in '.*' must be an N x 1 index list",
)
case(
    'load_xlsa17/trainval_loc-zero',
    lambda c: toy_load(c.toy(splits={'trainval_loc': index_list([0, 1])})),
    ValueError,
    r"'trainval_loc' in '.*' has 1 indices outside 1..12 "
    r'\(1-based',
)
case(
    'load_xlsa17/trainval_loc-beyond-images',
    lambda c: toy_load(c.toy(splits={'trainval_loc': index_list([1, 13])})),
    ValueError,
    r"'trainval_loc' in '.*' has 1 indices outside 1..12",
)
case(
    'load_xlsa17/trainval_loc-fractions',
    lambda c: toy_load(
        c.toy(splits={'trainval_loc': np.array([[1.5], [2.0]])})
    ),
    ValueError,
    r"'trainval_loc' in '.*' must hold integers",
)
case(
    'load_xlsa17/trainval_loc-duplicates',
    lambda c: toy_load(c.toy(splits={'trainval_loc': index_list([1, 1])})),
    ValueError,
    r"'trainval_loc' in '.*' contains duplicate indices",
)
case(
    'load_xlsa17/splits-overlap',
    lambda c: toy_load(c.toy(splits={'test_seen_loc': index_list([7, 8, 1])})),
    ValueError,
    r"'trainval_loc' and 'test_seen_loc' in '.*' share 1 images",
)
case(
    'load_xlsa17/no-features',
    lambda c: toy_load(c.toy(drop=['features'])),
    ValueError,
    r"'.*res101.mat' has no variable 'features'",
)
case(
    'load_xlsa17/no-labels',
    lambda c: toy_load(c.toy(drop=['labels'])),
    ValueError,
    r"'.*res101.mat' has no variable 'labels'",
)
case(
    'load_xlsa17/features-transposed',
    lambda c: toy_load(c.toy(features={'features': np.ones((12, 2048))})),
    ValueError,
    r"'features' in '.*res101.mat' must be 2048 x N.*looks "
    r'transposed',
)
case(
    'load_xlsa17/features-nan',
    lambda c: toy_load(
        c.toy(features={'features': np.full((2048, 12), np.nan)})
    ),
    ValueError,
    r"'features' in '.*res101.mat' contain NaN",
)
case(
    'load_xlsa17/features-all-zero',
    lambda c: toy_load(c.toy(features={'features': np.zeros((2048, 12))})),
    ValueError,
    r"'features' in '.*res101.mat' are all zero",
)
case(
    'load_xlsa17/features-sparse',
    lambda c: toy_load(
        c.toy(
            features={'features': scipy.sparse.csc_matrix(np.ones((2048, 12)))}
        )
    ),
    ValueError,
    r"'features' in '.*res101.mat' must be a dense numeric "
    r'array',
)
case(
    'load_xlsa17/labels-out-of-range',
    lambda c: toy_load(c.toy(features={'labels': np.full((12, 1), 6.0)})),
    ValueError,
    r"'labels' in '.*res101.mat' has 12 values outside 1..5",
)
case(
    'load_xlsa17/labels-two-columns',
    lambda c: toy_load(c.toy(features={'labels': np.ones((12, 2))})),
    ValueError,
    r"'labels' in '.*res101.mat' must be N x 1",
)
case(
    'load_xlsa17/labels-fractions',
    lambda c: toy_load(c.toy(features={'labels': np.full((12, 1), 1.5)})),
    ValueError,
    r"'labels' in '.*res101.mat' must hold integers",
)
case(
    'load_xlsa17/class-list-unknown-name',
    lambda c: toy_load(
        c.toy(lists={'testclasses.txt': ['beaver', 'unicorn']})
    ),
    ValueError,
    r"'.*testclasses.txt' lists 1 class names that are not in "
    r"'allclasses_names'",
)
case(
    'load_xlsa17/class-list-duplicate',
    lambda c: toy_load(
        c.toy(lists={'testclasses.txt': ['beaver', 'beaver', 'dalmatian']})
    ),
    ValueError,
    r"'.*testclasses.txt' lists a class more than once",
)
case(
    'load_xlsa17/class-list-a-directory',
    lambda c: toy_load(c.toy_with('trainvalclasses.txt', DIRECTORY)),
    IsADirectoryError,
    r"'.*trainvalclasses.txt' is a directory",
)
case(
    'load_xlsa17/class-list-binary',
    lambda c: toy_load(c.toy_with('valclasses1.txt', b'\xff\xfe\x00bad')),
    ValueError,
    r"'.*valclasses1.txt' is not a text file of class names",
)
case(
    'load_xlsa17/seen-unseen-overlap',
    lambda c: toy_load(c.toy(lists={'testclasses.txt': NAMES[2:]})),
    ValueError,
    r"Seen and unseen classes overlap in '.*TOY'",
)
case(
    'load_xlsa17/val-class-not-seen',
    lambda c: toy_load(c.toy(lists={'valclasses1.txt': ['beaver']})),
    ValueError,
    r"'.*valclasses1.txt' lists classes that are not seen",
)
case(
    'load_xlsa17/train-val-overlap',
    lambda c: toy_load(c.toy(lists={'valclasses1.txt': NAMES[1:3]})),
    ValueError,
    r"'trainclasses1.txt' and 'valclasses1.txt' in '.*' "
    r'overlap',
)
case(
    'load_xlsa17/class-list-empty',
    lambda c: toy_load(c.toy(lists={'testclasses.txt': []})),
    ValueError,
    r"'.*testclasses.txt' lists no classes",
)
case(
    'load_xlsa17/class-in-no-list',
    lambda c: toy_load(
        c.toy(
            lists={
                'trainvalclasses.txt': NAMES[:2],
                'trainclasses1.txt': NAMES[:1],
                'valclasses1.txt': NAMES[1:2],
            }
        )
    ),
    ValueError,
    r"1 classes of 'allclasses_names' are neither seen nor "
    r"unseen in '.*TOY'.*killer\+whale",
)
case(
    'load_xlsa17/seen-class-in-no-validation-list',
    lambda c: toy_load(
        c.toy(
            lists={
                'trainclasses1.txt': NAMES[:1],
                'valclasses1.txt': NAMES[1:2],
            }
        )
    ),
    ValueError,
    r"1 seen classes are in neither 'trainclasses1.txt' nor "
    r"'valclasses1.txt'.*killer\+whale",
)
case(
    'load_xlsa17/train_loc-holds-test_unseen-images',
    lambda c: toy_load(c.toy(splits={'train_loc': index_list([1, 2, 10])})),
    ValueError,
    r"'train_loc' and 'test_unseen_loc' in '.*' share 1 images "
    r'\(e.g. 1-based \[10\]\)',
)
case(
    'load_xlsa17/train_loc-val_loc-overlap',
    lambda c: toy_load(c.toy(splits={'val_loc': index_list([5, 6, 1])})),
    ValueError,
    r"'train_loc' and 'val_loc' in '.*' share 1 images",
)
case(
    'load_xlsa17/val_loc-empty',
    lambda c: toy_load(c.toy(splits={'val_loc': index_list([])})),
    ValueError,
    r"'val_loc' in '.*att_splits.mat' is empty",
)
case(
    'load_xlsa17/labels-of-the-other-side',
    lambda c: toy_load(
        c.toy(
            features={
                'labels': np.array(
                    [1, 1, 2, 2, 3, 3, 1, 2, 3, 4, 4, 1.0]
                ).reshape(-1, 1)
            }
        )
    ),
    ValueError,
    r"1 images of 'test_unseen_loc' .* are labelled .* with "
    r'seen',
)
case(
    'load_xlsa17/no-class-lists-no-labels',
    lambda c: toy_load(
        c.toy(lists={'trainvalclasses.txt': None}), load_features=False
    ),
    FileNotFoundError,
    r'trainvalclasses.txt missing and no labels loaded '
    r'\(load_features=False\)',
)
case(
    'load_xlsa17/SIMULATED.json-invalid',
    lambda c: toy_load(c.toy_with('SIMULATED.json', '{not json')),
    ValueError,
    r"'.*SIMULATED.json' is not valid JSON.*simulate the "
    r'dataset again',
)
case(
    'load_xlsa17/SIMULATED.json-a-directory',
    lambda c: toy_load(c.toy_with('SIMULATED.json', DIRECTORY)),
    IsADirectoryError,
    r"'.*SIMULATED.json' is a directory",
)
case(
    'load_xlsa17/SIMULATED.json-a-list',
    lambda c: toy_load(c.toy_with('SIMULATED.json', '[1, 2]')),
    ValueError,
    r"'.*SIMULATED.json' must hold a JSON object \(got list\)",
)

# ZSLDataset, samplers, splits, mappings
case(
    'ZSLDataset.loc/unknown-split',
    lambda c: c.data.loc('validation'),
    ValueError,
    r"Unknown split 'validation' for 'split'",
)
case(
    'ZSLDataset.loc/absent-split',
    lambda c: toy_load(c.toy(drop=['train_loc'])).loc('train'),
    ValueError,
    r"Dataset 'TOY' has no 'train_loc'",
)
case(
    'ZSLDataset.images_of/no-labels',
    lambda c: c.class_side.images_of([0]),
    ValueError,
    r"Dataset 'TINY' was loaded without features/labels "
    r'\(load_features=False\)',
)
case(
    'ZSLDataset.images_of/classes-strings',
    lambda c: c.data.images_of(['zebra']),
    ValueError,
    r"'classes' must be a tensor or sequence of integer indices",
)
case(
    'ZSLDataset.images_of/classes-float',
    lambda c: c.data.images_of(torch.tensor([1.5])),
    ValueError,
    r"'classes' must hold integer indices \(got dtype torch.float32\)",
)
case(
    'EpisodeSampler/n_way=1',
    lambda c: EpisodeSampler(LABELS, torch.arange(4), n_way=1),
    ValueError,
    r"'n_way' must be at least 2 \(got 1\)",
)
case(
    'EpisodeSampler/n_way=2.5',
    lambda c: EpisodeSampler(LABELS, torch.arange(4), n_way=2.5),
    ValueError,
    r"'n_way' must be an integer \(got float 2.5\)",
)
case(
    'EpisodeSampler/n_way="30"',
    lambda c: EpisodeSampler(LABELS, torch.arange(4), n_way='30'),
    ValueError,
    r"'n_way' must be an integer \(got str '30'\)",
)
case(
    'EpisodeSampler/k_shot=0',
    lambda c: EpisodeSampler(LABELS, torch.arange(4), k_shot=0),
    ValueError,
    r"'k_shot' must be a positive integer \(got 0\)",
)
case(
    'EpisodeSampler/one-class',
    lambda c: EpisodeSampler(LABELS, torch.tensor([1])),
    ValueError,
    r"'classes' must hold at least 2 classes for an episode \(got 1\)",
)
case(
    'EpisodeSampler/classes-empty',
    lambda c: EpisodeSampler(LABELS, torch.tensor([], dtype=int)),
    ValueError,
    r"'classes' must hold at least 2 classes for an episode",
)
case(
    'EpisodeSampler/classes-duplicates',
    lambda c: EpisodeSampler(LABELS, torch.tensor([1, 1, 2])),
    ValueError,
    r"'classes' contains duplicates",
)
case(
    'EpisodeSampler/classes-negative',
    lambda c: EpisodeSampler(LABELS, torch.tensor([-1, 2])),
    ValueError,
    r"'classes' contains negative class indices",
)
case(
    'EpisodeSampler/classes-unknown',
    lambda c: EpisodeSampler(LABELS, torch.tensor([1, 9])),
    ValueError,
    r"1 of 'classes' are unknown \(no image with that label in the pool\)",
)
case(
    'EpisodeSampler/classes-float',
    lambda c: EpisodeSampler(LABELS, torch.tensor([1.0, 2.0])),
    ValueError,
    r"'classes' must hold integer indices",
)
case(
    'EpisodeSampler/labels-float',
    lambda c: EpisodeSampler(LABELS + 0.5, torch.tensor([1, 2])),
    ValueError,
    r"'labels' must hold integer indices",
)
case(
    'EpisodeSampler/labels-negative',
    lambda c: EpisodeSampler(LABELS - 1, torch.tensor([1, 2])),
    ValueError,
    r"'labels' contains negative class indices",
)
case(
    'EpisodeSampler/k_shot-above-images',
    lambda c: EpisodeSampler(LABELS, torch.arange(4), k_shot=3),
    ValueError,
    r'4 classes have fewer than k_shot=3 images.*allow_replacement=True',
)
case(
    'EpisodeSampler/pool-out-of-range',
    lambda c: EpisodeSampler(
        LABELS, torch.tensor([1, 2]), pool=torch.tensor([99])
    ),
    ValueError,
    r"'pool' must hold image indices in \[0, 8\)",
)
case(
    'EpisodeSampler/num_episodes=0',
    lambda c: EpisodeSampler(LABELS, torch.arange(4), num_episodes=0),
    ValueError,
    r"'num_episodes' must be a positive integer or None",
)
case(
    'EpisodeSampler/generator-a-seed',
    lambda c: EpisodeSampler(LABELS, torch.arange(4), generator=0),
    ValueError,
    r"'generator' must be a torch.Generator or None \(got int; "
    r'for a seed',
)
case(
    'EpisodeSampler/allow_replacement="yes"',
    lambda c: EpisodeSampler(LABELS, torch.arange(4), allow_replacement='yes'),
    ValueError,
    r"'allow_replacement' must be True or False",
)
case(
    'EpisodeSampler/len-without-num_episodes',
    lambda c: len(EpisodeSampler(LABELS, torch.arange(4))),
    TypeError,
    r'EpisodeSampler\(num_episodes=None\) is endless: it has no len\(\)',
)
case(
    'EpisodeSampler/load_state_dict-empty',
    lambda c: EpisodeSampler(LABELS, torch.arange(4)).load_state_dict({}),
    ValueError,
    r"'state' must be a EpisodeSampler's state_dict\(\)",
)
case(
    'EpisodeSampler/load_state_dict-bad-generator-state',
    lambda c: EpisodeSampler(LABELS, torch.arange(4)).load_state_dict(
        {'generator': torch.zeros(3, dtype=torch.uint8)}
    ),
    ValueError,
    r"'state' holds no generator state",
)
case(
    'MinibatchSampler/batch_size=0',
    lambda c: MinibatchSampler(LABELS, torch.arange(4), 0),
    ValueError,
    r"'batch_size' must be a positive integer \(got 0\)",
)
case(
    'MinibatchSampler/batch_size=2.5',
    lambda c: MinibatchSampler(LABELS, torch.arange(4), 2.5),
    ValueError,
    r"'batch_size' must be a positive integer \(got float 2.5\)",
)
case(
    'MinibatchSampler/classes-unknown',
    lambda c: MinibatchSampler(LABELS, torch.tensor([7]), 2),
    ValueError,
    r"1 of 'classes' are unknown",
)
case(
    'MinibatchSampler/pool-negative',
    lambda c: MinibatchSampler(
        LABELS, torch.arange(4), 2, pool=torch.tensor([-1])
    ),
    ValueError,
    r"'pool' must hold image indices in \[0, 8\)",
)
case(
    'MinibatchSampler/shuffle="yes"',
    lambda c: MinibatchSampler(LABELS, torch.arange(4), 2, shuffle='yes'),
    ValueError,
    r"'shuffle' must be True or False",
)
case(
    'MinibatchSampler/load_state_dict-other-sampler',
    lambda c: MinibatchSampler(LABELS, torch.arange(4), 2).load_state_dict(
        MinibatchSampler(LABELS, torch.arange(2), 2).state_dict()
        | {'pass_order': torch.arange(4)}
    ),
    ValueError,
    r"'state' is the state of a MinibatchSampler over another number of "
    r'images',
)


def hold_out(images=None, fraction=0.5, generator=None):
    images = torch.arange(8) if images is None else images
    generator = torch.Generator() if generator is None else generator
    return hold_out_per_class(images, LABELS, fraction, generator)


case(
    'hold_out_per_class/fraction=0',
    lambda c: hold_out(fraction=0.0),
    ValueError,
    r"'fraction' must lie in \(0, 1\) \(got 0\)",
)
case(
    'hold_out_per_class/fraction=1.5',
    lambda c: hold_out(fraction=1.5),
    ValueError,
    r"'fraction' must lie in \(0, 1\)",
)
case(
    'hold_out_per_class/fraction="0.2"',
    lambda c: hold_out(fraction='0.2'),
    ValueError,
    r"'fraction' must be a real number \(got str '0.2'\)",
)
case(
    'hold_out_per_class/images-float',
    lambda c: hold_out(torch.arange(8.0)),
    ValueError,
    r"'images' must hold integer indices",
)
case(
    'hold_out_per_class/images-out-of-range',
    lambda c: hold_out(torch.arange(9)),
    ValueError,
    r"'images' must hold indices into 'labels', in \[0, 8\)",
)
case(
    'hold_out_per_class/generator-a-seed',
    lambda c: hold_out(generator=0),
    ValueError,
    r"'generator' must be a torch.Generator",
)
case(
    'seen_validation_split/no-labels',
    lambda c: seen_validation_split(c.class_side),
    ValueError,
    r"Dataset 'TINY' was loaded without features/labels",
)
case(
    'seen_validation_split/no-validation-classes',
    lambda c: seen_validation_split(
        toy_load(c.toy(lists={'valclasses1.txt': None}))
    ),
    ValueError,
    r"Validation needs the benchmark's validation classes "
    r'\(trainclasses1.txt, valclasses1.txt\)',
)
case(
    'seen_validation_split/fraction=1',
    lambda c: seen_validation_split(c.data, 1.0),
    ValueError,
    r"'fraction' must lie in \(0, 1\)",
)
case(
    'seen_validation_split/seed="a"',
    lambda c: seen_validation_split(c.data, 0.2, 'a'),
    ValueError,
    r"'seed' must be an integer \(got str 'a'\)",
)
case(
    'seen_validation_split/data-a-path',
    lambda c: seen_validation_split(str(c.tiny_root)),
    ValueError,
    r"'data' must be a ZSLDataset \(got str\)",
)
case(
    'dataset_wordnet_mapping/unknown',
    lambda c: dataset_wordnet_mapping('XYZ'),
    ValueError,
    r"No WordNet mapping for dataset 'XYZ'; available: AWA1",
)
case(
    'dataset_wordnet_mapping/not-a-string',
    lambda c: dataset_wordnet_mapping(3),
    ValueError,
    r"'dataset' must be a string out of",
)
case(
    'wordnet_coverage/unknown',
    lambda c: wordnet_coverage('nope'),
    ValueError,
    r"No WordNet mapping for dataset 'nope'",
)
case(
    'read_mapping_rows/None',
    lambda c: read_mapping_rows(None),
    ValueError,
    r"'dataset' must be a string",
)


# ---------------------------------------------------------------------------
# The simulator
# ---------------------------------------------------------------------------
def simulate_toy(c: Ctx, **arguments) -> Any:
    r"""Simulates the toy dataset (its class side) in memory."""
    return simulate_dataset('TOY', c.toy(), **arguments)


for option, value, message in [
    (
        'isotropic_noise',
        -1.0,
        r"'isotropic_noise' must be finite and "
        r'>= 0 \(got -1.0\)',
    ),
    ('isotropic_noise', math.nan, r"'isotropic_noise' must be finite"),
    (
        'isotropic_noise',
        '2',
        r"'isotropic_noise' must be a real number "
        r"\(got str '2'\)",
    ),
    (
        'isotropic_noise',
        True,
        r"'isotropic_noise' must be a real number "
        r'\(got bool True\)',
    ),
    ('noise_rank', 0, r"'noise_rank' must be a positive integer"),
    (
        'hidden_dim',
        2.5,
        r"'hidden_dim' must be a positive integer "
        r'\(got 2.5\)',
    ),
    (
        'shared_temperature',
        0.0,
        r"'shared_temperature' must be > 0 "
        r'\(got 0.0\)',
    ),
    ('scale', 0.0, r"'scale' must be > 0 \(got 0.0\)"),
    (
        'shared_neighbours',
        99,
        r"'shared_neighbours' must be at most 4.*"
        r'\(got 99\)',
    ),
]:
    case(
        f'simulate_dataset/{option}={value!r}',
        lambda c, option=option, value=value: simulate_toy(
            c, **{option: value}
        ),
        ValueError,
        message,
    )
for name in ['', '..', '../TOY', '/TOY']:
    case(
        f'simulate_dataset/dataset={name!r}',
        lambda c, name=name: simulate_dataset(name, c.toy()),
        ValueError,
        r"'dataset' must be a dataset folder name such as 'AWA2'",
    )
case(
    'simulate_dataset/unknown-option',
    lambda c: simulate_toy(c, noise=1.0),
    TypeError,
    r"Unknown simulator options: \['noise'\]",
)
for seed, message in [
    (-1, r"'seed' must be at least 0 \(got -1\)"),
    (1.5, r"'seed' must be an integer \(got float 1.5\)"),
    ('0', r"'seed' must be an integer \(got str '0'\)"),
]:
    case(
        f'simulate_dataset/seed={seed!r}',
        lambda c, seed=seed: simulate_toy(c, seed=seed),
        ValueError,
        message,
    )
case(
    'simulate_dataset/attributes=nope',
    lambda c: simulate_toy(c, attributes='nope'),
    ValueError,
    r"'attributes' must be one of att, original_att, percent",
)
case(
    'simulate_xlsa17/out-under-a-file',
    lambda c: simulate_xlsa17(
        'TOY', write(c.tmp / 'f', 'x'), data_root=c.toy()
    ),
    NotADirectoryError,
    r"cannot create the output folder '.*TOY' \(Not a directory\)",
)
case(
    'simulate_xlsa17/over-real-features',
    lambda c: simulate_xlsa17('TOY', c.toy(), data_root=c.toy()),
    FileExistsError,
    r"'.*res101.mat' exists and is not simulated",
)


def test_the_table():
    check_table(CASES)


@CASES.parametrize()
def test_bad_input(row: Case, bad_input_ctx: Ctx, capsys):
    check_row(row, bad_input_ctx, capsys)
