r"""Simulated image side (:obj:`res101.mat`) of the xlsa17 benchmark, built
from the REAL class side (attributes, class split, image index lists), so
that the whole APNet pipeline runs offline. The files written are in the
exact layout of the real benchmark; a :obj:`SIMULATED.json` sidecar (seed,
options, simulator version) marks them, and
:func:`apnet_pyg.data.load_xlsa17` then sets :obj:`simulated=True`.

Accuracies measured on simulated features say whether code works and how
methods compare on a known generative model; they are NOT results on the
benchmark.

In short: every image index of the real lists gets a class of the right
split; each class has a visual prototype made of an attribute-determined
part :math:`g(\mathbf{a}_c)`, a part shared with its nearest classes in
attribute space (:obj:`shared_*` options; :obj:`shared_strength=0` is the
control without it) and a class-specific residual; images are the
prototype plus low-rank and isotropic noise, through a ReLU. The shared
part is what makes closed-form baselines seen-biased in generalised ZSL,
as they are on the real features. The model, the mechanism, every
option, the per-dataset defaults and the calibration against published
ESZSL and SAE accuracy are documented in :obj:`docs/simulator.md`
(reproduced by :obj:`experiments/calibrate_simulator.py`).

Everything is drawn from :class:`numpy.random.Generator` streams spawned
from :obj:`seed`, one per component: the same seed gives the same bytes,
and changing one strength leaves the labels and every other random draw
unchanged.
"""

import dataclasses
import json
import shutil
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import torch

from apnet_pyg.checks import check_bool, check_int, check_number
from apnet_pyg.data.xlsa17 import (
    ZSLDataset,
    dataset_dir,
    load_xlsa17,
    packaged_root,
)
from apnet_pyg.data.xlsa17_files import (
    CLASS_LIST_FILES,
    FEATURE_DIM,
    FEATURES_FILE,
    SIMULATED_SIDECAR,
    SPLITS_FILE,
)
from apnet_pyg.files import (
    atomic_write_text,
    make_output_folder,
    replace_atomically,
)

SIMULATOR_VERSION = 2

DEFAULT_OPTIONS: Dict[str, Any] = dict(
    hidden_dim=256,
    hidden_bias=2.0,
    attribute_strength=2.8,
    offset=10.0,
    offset_spread=4.0,
    shared_strength=8.6,
    shared_weight=1.2,
    shared_neighbours=1,
    shared_temperature=0.1,
    residual_strength=0.0,
    noise_rank=32,
    lowrank_noise=4.0,
    isotropic_noise=28.0,
    class_size_spread=0.3,
    scale=0.03,
)

# Per-dataset overrides of DEFAULT_OPTIONS, calibrated like the defaults
# (AWA2, and AWA1 with the same class side) against ESZSL and SAE on the real
# features; see docs/simulator.md. CUB is less seen-biased and its seen
# classes far less separable on the real data. SUN's 645 seen classes are
# hard to tell apart on the real data (ESZSL S 27.9 for ZSL 54.5): a
# stronger attribute signal and a weaker shared component. APY's classes are
# more seen-biased and noisier.
DATASET_OPTIONS: Dict[str, Dict[str, Any]] = {
    'CUB': dict(shared_weight=0.8, isotropic_noise=32.0),
    'SUN': dict(
        attribute_strength=3.6, shared_strength=5.0, shared_weight=2.0
    ),
    'APY': dict(
        attribute_strength=2.4, shared_weight=6.0, isotropic_noise=48.0
    ),
}

# One independent random stream per component.
_STREAMS = (
    'labels',
    'g',
    'shared',
    'residual',
    'basis',
    'lowrank',
    'isotropic',
)
_CHUNK = 4096  # images generated at a time (fixed: part of the stream order)


def simulate_xlsa17(
    dataset: str,
    out: Union[str, Path],
    data_root: Optional[Union[str, Path]] = None,
    seed: int = 0,
    attributes: str = 'att',
    compress: bool = False,
    **options: Any,
) -> Path:
    r"""Writes a simulated :obj:`<out>/<DATASET>/res101.mat` in the real
    layout (:obj:`features` 2048 x N float32, :obj:`labels` N x 1 1-based
    double, :obj:`image_files` N x 1 cell), copies :obj:`att_splits.mat` and
    the class lists next to it, and writes the :obj:`SIMULATED.json`
    sidecar. The model and its options are described in
    docs/simulator.md.

    Args:
        dataset (str): Dataset name (:obj:`'AWA2'`, :obj:`'CUB'`, ...).
        out (str or Path): Output root; the dataset folder is created in it.
        data_root (str or Path, optional): Root of the real class side;
            :obj:`None` uses the copy shipped with the package.
            (default: :obj:`None`)
        seed (int, optional): Random seed. (default: :obj:`0`)
        attributes (str, optional): The attributes :math:`g` reads, a kind
            of :data:`~apnet_pyg.data.xlsa17.ATTRIBUTE_KINDS`
            (:obj:`'att'`, :obj:`'original_att'` or :obj:`'percent'`).
            (default: :obj:`'att'`)
        compress (bool, optional): zlib-compress the .mat file (AWA2:
            about 15 s instead of 3-4 s on 2 cores, 214 MB instead of
            310 MB). (default: :obj:`False`)
        **options: Overrides of :obj:`DEFAULT_OPTIONS`.

    Returns:
        Path: The written dataset folder :obj:`<out>/<DATASET>`.
    """
    check_bool(compress, 'compress')
    source = dataset_dir(
        data_root if data_root is not None else packaged_root(), dataset
    )
    target = Path(out) / source.name
    if (target / FEATURES_FILE).exists() and not (
        target / SIMULATED_SIDECAR
    ).exists():
        raise FileExistsError(
            f"'{target / FEATURES_FILE}' exists and is not "
            f'simulated (no {SIMULATED_SIDECAR}); refusing '
            f'to overwrite real features'
        )
    data = simulate_dataset(
        source.name, source.parent, seed, attributes, **options
    )
    labels = data.labels.numpy()
    image_files = _image_files(
        np.array(data.class_names, dtype=object), labels
    )
    make_output_folder(target)
    if source.resolve() != target.resolve():
        for filename in (SPLITS_FILE, *CLASS_LIST_FILES.values()):
            if (source / filename).is_file():
                shutil.copyfile(source / filename, target / filename)
    # The sidecar before the features (features without it would pass for
    # real ones), and no earlier simulated features beside a new sidecar.
    sidecar = json.dumps(data.simulation, indent=2)
    (target / FEATURES_FILE).unlink(missing_ok=True)
    atomic_write_text(sidecar, target / SIMULATED_SIDECAR)
    _write_features(
        target / FEATURES_FILE,
        data.features.numpy(),
        labels,
        image_files,
        compress,
    )
    return target


def simulate_dataset(
    dataset: str,
    data_root: Optional[Union[str, Path]] = None,
    seed: int = 0,
    attributes: str = 'att',
    **options: Any,
) -> ZSLDataset:
    r"""The same simulation as :func:`simulate_xlsa17`, in memory: the
    real class side of :obj:`dataset` with simulated :obj:`features` and
    :obj:`labels`, :obj:`simulated=True` and the sidecar's content in
    :obj:`simulation`. Arguments as in :func:`simulate_xlsa17`."""
    unknown = set(options) - set(DEFAULT_OPTIONS)
    if unknown:
        raise TypeError(
            f'Unknown simulator options: {sorted(unknown)} '
            f'(known: {sorted(DEFAULT_OPTIONS)})'
        )
    seed = check_int(seed, 'seed', minimum=0)
    source = dataset_dir(
        data_root if data_root is not None else packaged_root(), dataset
    )
    opts = {**default_options(source.name), **options}
    check_options(opts)
    data = load_xlsa17(
        source.parent, source.name, attributes=attributes, load_features=False
    )
    if opts['shared_neighbours'] > data.num_classes - 1:
        raise ValueError(
            f"'shared_neighbours' must be at most "
            f'{data.num_classes - 1}, the number of other '
            f'classes of {data.name} (got '
            f'{opts["shared_neighbours"]})'
        )
    rngs = dict(
        zip(
            _STREAMS,
            (
                np.random.default_rng(s)
                for s in np.random.SeedSequence(seed).spawn(len(_STREAMS))
            ),
        )
    )
    # Extreme options overflow: the checks below say so in one line,
    # instead of NumPy's warnings before it.
    with np.errstate(over='ignore', invalid='ignore', divide='ignore'):
        labels, unlisted = simulate_labels(
            data, rngs['labels'], opts['class_size_spread']
        )
        prototypes = class_prototypes(
            data.attributes.double().numpy(), rngs, opts
        )
        features = sample_features(prototypes, labels, rngs, opts)
    finite = bool(np.isfinite(features).all())
    if not finite or not features.any():
        raise ValueError(
            f'the simulated features are '
            f'{"all zero" if finite else "not finite"} with '
            f'these options (offset={opts["offset"]:g}, '
            f'scale={opts["scale"]:g}, shared_temperature='
            f'{opts["shared_temperature"]:g}, ...): move the '
            f'extreme ones towards the defaults'
        )
    sidecar = dict(
        simulator='apnet_pyg.data.simulator',
        version=SIMULATOR_VERSION,
        dataset=source.name,
        seed=seed,
        attributes=attributes,
        options=opts,
        num_images=int(labels.size),
        unlisted_images=int(unlisted),
        source=str(source),
        note='Synthetic features: accuracies on these files are not '
        'benchmark results.',
    )
    return dataclasses.replace(
        data,
        features=torch.from_numpy(features),
        labels=torch.from_numpy(labels),
        simulated=True,
        simulation=sidecar,
    )


def default_options(dataset: str) -> Dict[str, Any]:
    r"""Returns the default simulator options of :obj:`dataset`:
    :obj:`DEFAULT_OPTIONS` updated with its :obj:`DATASET_OPTIONS` entry.
    A command line should default its flags to these (or to :obj:`None`,
    passing only the options the user set), not to :obj:`DEFAULT_OPTIONS`,
    or the per-dataset values are overridden."""
    if not isinstance(dataset, str):
        raise ValueError(
            f"'dataset' must be a dataset name such as 'AWA2' "
            f'(got {type(dataset).__name__})'
        )
    return {**DEFAULT_OPTIONS, **DATASET_OPTIONS.get(dataset.upper(), {})}


def simulate_labels(
    data: ZSLDataset, rng: np.random.Generator, class_size_spread: float = 0.3
) -> Tuple[np.ndarray, int]:
    r"""Draws a 0-based class for every image index of the real lists
    (see "Labels" in docs/simulator.md).

    Returns:
        (np.ndarray, int): Labels of shape :obj:`[N]` (:obj:`N` = the largest
        listed index + 1) and the number of indices listed nowhere.
    """
    seen = data.seen_classes.numpy()
    unseen = data.unseen_classes.numpy()
    main = {
        s: data.loc(s).numpy()
        for s in ('trainval', 'test_seen', 'test_unseen')
    }
    train_loc = None if data.train_loc is None else data.train_loc.numpy()
    val_loc = None if data.val_loc is None else data.val_loc.numpy()
    num_images = 1 + max(
        int(idx.max())
        for idx in [
            *main.values(),
            *(x for x in (train_loc, val_loc) if x is not None and x.size),
        ]
        if idx.size
    )

    refine = (
        train_loc is not None
        and val_loc is not None
        and data.train_classes is not None
        and data.val_classes is not None
        and not np.intersect1d(train_loc, val_loc).size
        and not np.isin(
            np.concatenate([train_loc, val_loc]), main['test_unseen']
        ).any()
    )
    cells = []  # (image indices, candidate classes)
    for split, classes in (
        ('trainval', seen),
        ('test_seen', seen),
        ('test_unseen', unseen),
    ):
        images = main[split]
        if refine and split != 'test_unseen':
            in_train = np.isin(images, train_loc)
            in_val = np.isin(images, val_loc)
            cells.append((images[in_train], data.train_classes.numpy()))
            cells.append((images[in_val], data.val_classes.numpy()))
            images = images[~in_train & ~in_val]
        cells.append((images, classes))
    listed = np.zeros(num_images, dtype=bool)
    for images in main.values():
        listed[images] = True
    unlisted = np.flatnonzero(~listed)
    if unlisted.size:
        warnings.warn(
            f'{unlisted.size} image indices of {data.name} are in '
            f'no split list; they get seen classes',
            stacklevel=2,
        )
        cells.append((unlisted, seen))

    weights = np.exp(class_size_spread * rng.standard_normal(data.num_classes))
    if not np.isfinite(weights).all() or not weights.all():
        raise ValueError(
            f"'class_size_spread' is too large (got "
            f'{class_size_spread:g}): class sizes overflow; '
            f'real benchmarks need less than 1'
        )
    labels = np.full(num_images, -1, dtype=np.int64)
    for images, classes in cells:
        if not images.size:
            continue
        counts = _allocate(images.size, weights[classes])
        labels[images[rng.permutation(images.size)]] = np.repeat(
            classes, counts
        )
    assert (labels >= 0).all()
    return labels, int(unlisted.size)


def class_prototypes(
    attributes: np.ndarray,
    rngs: Dict[str, np.random.Generator],
    options: Dict[str, Any],
) -> np.ndarray:
    r"""Returns the visual prototypes :math:`\mathbf{p}_c` (see "Class
    prototypes" in docs/simulator.md).

    Args:
        attributes (np.ndarray): Class attributes. Shape :obj:`[C, A]`.
        rngs (dict): The :obj:`'g'`, :obj:`'shared'` and :obj:`'residual'`
            random streams.
        options (dict): Simulator options.

    Returns:
        np.ndarray: Shape :obj:`[C, 2048]`, float64.
    """
    num_classes, attribute_dim = attributes.shape
    rng = rngs['g']
    w1 = rng.standard_normal((attribute_dim, options['hidden_dim']))
    b1 = options['hidden_bias'] + 0.5 * rng.standard_normal(
        options['hidden_dim']
    )
    w2 = rng.standard_normal((options['hidden_dim'], FEATURE_DIM))
    offset = options['offset'] + options[
        'offset_spread'
    ] * rng.standard_normal(FEATURE_DIM)
    hidden = attributes @ w1
    hidden = (hidden - hidden.mean(0)) / (hidden.std(0) + 1e-12)
    g = np.maximum(hidden + b1, 0) @ w2
    g -= g.mean(0)
    g /= g.std(0).mean() + 1e-12

    # Shared field: each class's own innovation z_c plus shared_weight times
    # a softmax(cos / tau) mix of the innovations of its k nearest other
    # classes in attribute space, scaled to unit variance.
    unit = attributes / (
        np.linalg.norm(attributes, axis=1, keepdims=True) + 1e-12
    )
    similarity = unit @ unit.T
    k = min(options['shared_neighbours'], num_classes - 1)
    # Stable sort with the class itself forced last, so ties break by index.
    ranked = np.argsort(
        -(similarity - 4 * np.eye(num_classes)), axis=1, kind='stable'
    )[:, :k]
    logits = (
        np.take_along_axis(similarity, ranked, 1)
        / options['shared_temperature']
    )
    weights = np.exp(logits - logits.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    mix = np.eye(num_classes)
    np.put_along_axis(mix, ranked, options['shared_weight'] * weights, 1)
    mix /= np.linalg.norm(mix, axis=1, keepdims=True)
    shared = mix @ rngs['shared'].standard_normal((num_classes, FEATURE_DIM))

    residual = rngs['residual'].standard_normal((num_classes, FEATURE_DIM))
    return np.maximum(
        offset
        + options['attribute_strength'] * g
        + options['shared_strength'] * shared
        + options['residual_strength'] * residual,
        0,
    )


def sample_features(
    prototypes: np.ndarray,
    labels: np.ndarray,
    rngs: Dict[str, np.random.Generator],
    options: Dict[str, Any],
) -> np.ndarray:
    r"""Draws the image features around the prototypes (see "Images" in
    docs/simulator.md).

    Returns:
        np.ndarray: Shape :obj:`[N, 2048]`, float32, C-contiguous (so its
        transpose is the Fortran-ordered 2048 x N array MATLAB stores).
    """
    rank = options['noise_rank']
    basis = (
        rngs['basis'].standard_normal((rank, FEATURE_DIM)) / np.sqrt(rank)
    ).astype(np.float32)
    # ReLU commutes with a positive scale: apply it to every term.
    scale = options['scale']
    prototypes = (scale * prototypes).astype(np.float32)
    lowrank = np.float32(scale * options['lowrank_noise'])
    isotropic = np.float32(scale * options['isotropic_noise'])
    features = np.empty((labels.size, FEATURE_DIM), dtype=np.float32)
    for start in range(0, labels.size, _CHUNK):
        chunk = features[start : start + _CHUNK]
        rngs['isotropic'].standard_normal(
            chunk.shape, dtype=np.float32, out=chunk
        )
        chunk *= isotropic
        coefficients = rngs['lowrank'].standard_normal(
            (chunk.shape[0], rank), dtype=np.float32
        )
        chunk += (lowrank * coefficients) @ basis
        chunk += prototypes[labels[start : start + _CHUNK]]
        np.maximum(chunk, 0, out=chunk)
    return features


def check_options(opts: Dict[str, Any]) -> None:
    r"""Checks a complete set of simulator options (the rules of each
    option, before any data is read), turning whole-float sizes into ints
    in place; a one-line :class:`ValueError` naming the option otherwise.
    (:obj:`shared_neighbours`' bound depends on the dataset: checked by
    :func:`simulate_dataset`.)"""
    for key, value in opts.items():
        # Not a string nor a bool (NumPy would take True for 1.0).
        check_number(value, key)
        if value < 0:
            raise ValueError(f"'{key}' must be finite and >= 0 (got {value})")
        # Python floats: a NumPy scalar would not go into the JSON sidecar.
        opts[key] = float(value)
    for key in ('hidden_dim', 'noise_rank', 'shared_neighbours'):
        # Whole floats pass (--set KEY=VALUE options arrive as floats) and
        # become ints: they are used as sizes.
        if int(opts[key]) != opts[key] or opts[key] < 1:
            raise ValueError(
                f"'{key}' must be a positive integer (got {opts[key]})"
            )
        opts[key] = int(opts[key])
    for key in ('shared_temperature', 'scale'):
        # scale = 0 would make every feature zero.
        if opts[key] <= 0:
            raise ValueError(f"'{key}' must be > 0 (got {opts[key]})")


def _allocate(total: int, weights: np.ndarray) -> np.ndarray:
    r"""Splits :obj:`total` items among classes in proportion to
    :obj:`weights` (largest remainder), at least one each when
    :obj:`total` allows."""
    counts = np.zeros(weights.size, dtype=np.int64)
    if total < weights.size:  # too few: one each for the heaviest classes
        counts[np.argsort(-weights, kind='stable')[:total]] = 1
        return counts
    share = (total - weights.size) * weights / weights.sum()
    counts = 1 + np.floor(share).astype(np.int64)
    left = total - counts.sum()
    counts[np.argsort(-(share - np.floor(share)), kind='stable')[:left]] += 1
    return counts


def _image_files(names: np.ndarray, labels: np.ndarray) -> np.ndarray:
    # 'SIMULATED/<class>/<class>_<k>.jpg', k counting within the class.
    order = np.argsort(labels, kind='stable')
    rank = np.empty(labels.size, dtype=np.int64)
    starts = np.searchsorted(labels[order], labels[order])
    rank[order] = np.arange(labels.size) - starts + 1
    files = np.empty((labels.size, 1), dtype=object)
    for i, (label, k) in enumerate(zip(labels.tolist(), rank.tolist())):
        files[i, 0] = f'SIMULATED/{names[label]}/{names[label]}_{k:05d}.jpg'
    return files


def _write_features(
    path: Path,
    features: np.ndarray,
    labels: np.ndarray,
    image_files: np.ndarray,
    compress: bool,
) -> None:
    from scipy.io import savemat

    # An interrupted run never leaves a truncated res101.mat behind.
    replace_atomically(
        path,
        lambda tmp: savemat(
            str(tmp),
            {
                # Fortran-ordered 2048 x N: written as is.
                'features': features.T,
                'labels': (labels + 1).astype(np.float64)[:, None],
                'image_files': image_files,
            },
            do_compression=compress,
            format='5',
        ),
    )
