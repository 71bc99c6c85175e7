import numpy as np
import pytest
import scipy.io

from apnet_pyg.data.simulator import simulate_xlsa17

# A tiny class side in the real xlsa17 layout: 10 animal classes (WordNet
# names, so the WordNet graph resolves automatically), 6 seen (4 train + 2
# validation) and 4 unseen, 16 attributes, 400 images.
CLASSES = ['zebra', 'horse', 'dog', 'cat', 'lion', 'tiger', 'wolf', 'fox',
           'sheep', 'cow']
SEEN, TRAIN, VAL = CLASSES[:6], CLASSES[:4], CLASSES[4:6]
UNSEEN = CLASSES[6:]


def write_tiny_class_side(root, name='TINY'):
    folder = root / name
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    original = rng.random((16, len(CLASSES))) * 100
    att = original / np.linalg.norm(original, axis=0, keepdims=True)
    names = np.empty((len(CLASSES), 1), dtype=object)
    for i, class_name in enumerate(CLASSES):
        names[i, 0] = np.array([class_name])

    def loc(start, stop):  # 1-based, as in the real files
        return np.arange(start, stop + 1, dtype=np.uint16)[:, None]

    scipy.io.savemat(
        folder / 'att_splits.mat', {
            'att': att, 'original_att': original, 'allclasses_names': names,
            'trainval_loc': loc(1, 240), 'test_seen_loc': loc(241, 300),
            'test_unseen_loc': loc(301, 400), 'train_loc': loc(1, 160),
            'val_loc': loc(161, 240)
        })
    for filename, listed in [('trainvalclasses.txt', SEEN),
                             ('testclasses.txt', UNSEEN),
                             ('trainclasses1.txt', TRAIN),
                             ('valclasses1.txt', VAL)]:
        (folder / filename).write_text('\n'.join(listed) + '\n')
    return root


@pytest.fixture(scope='session')
def tiny_root(tmp_path_factory):
    r"""Root folder of a tiny simulated dataset 'TINY' (real layout)."""
    class_side = write_tiny_class_side(tmp_path_factory.mktemp('class_side'))
    out = tmp_path_factory.mktemp('simulated')
    simulate_xlsa17('TINY', out, data_root=class_side, seed=0)
    return out
