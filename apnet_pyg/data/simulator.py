r"""Simulated image side (:obj:`res101.mat`) of the xlsa17 benchmark, built
from the REAL class side (attributes, class split, image index lists), so
that the whole APNet pipeline runs offline. The files written are in the
exact layout of the real benchmark; a :obj:`SIMULATED.json` sidecar (seed,
options, simulator version) marks them, and
:func:`apnet_pyg.data.load_xlsa17` then sets :obj:`simulated=True`.

Accuracies measured on simulated features say whether code works and how
methods compare on a known generative model; they are NOT results on the
benchmark.

**Labels.** Every image index :obj:`1..N` of the real lists gets a class:
:obj:`test_unseen_loc` images an unseen class, :obj:`trainval_loc` and
:obj:`test_seen_loc` images a seen class. The real :obj:`train_loc` /
:obj:`val_loc` hold exactly the seen images of :obj:`trainclasses1.txt` /
:obj:`valclasses1.txt` (SUN: 580 x 20 and 65 x 20 images), so when both
lists and both class files exist and are consistent, images of
:obj:`train_loc` get a train class and those of :obj:`val_loc` a validation
class. Each group of images ("cell") is split among its classes in
proportion to per-class weights :math:`w_c = \exp(\sigma_n \xi_c)`,
:math:`\xi_c \sim \mathcal{N}(0, 1)` (largest remainder, at least one image
per class when the cell is large enough), so a class keeps the same
trainval : test_seen ratio (about 80 : 20, as in the benchmark). In the five
shipped datasets the three lists partition :obj:`1..N` exactly; indices
listed nowhere (a gap, only possible with other class-side files) get seen
classes, a :class:`UserWarning` and a count in the sidecar.

**Class prototypes.** For class :math:`c` with attributes :math:`\mathbf{a}_c`
(the L2-normalised :obj:`att` by default):

.. math::
    \mathbf{p}_c = \mathrm{ReLU}\big(\mathbf{b} + s_g\, \hat{g}(\mathbf{a}_c)
    + s_m\, \mathbf{m}_c + s_r\, \mathbf{r}_c\big) \in \mathbb{R}^{2048}

- :math:`g(\mathbf{a}) = \mathbf{W}_2\, \mathrm{ReLU}(\mathbf{W}_1
  \mathbf{a} + \mathbf{b}_1)`: a fixed random 2-layer ReLU network
  (:obj:`hidden_dim` units, Gaussian weights), the attribute-to-appearance
  map a ZSL model must learn. Its pre-activations are standardised over the
  classes and shifted by :math:`\mathbf{b}_1 \sim \mathcal{N}(\beta,
  0.5^2)` (:math:`\beta` = :obj:`hidden_bias`; at :math:`0` each unit is
  active for about half of the classes, so :math:`g` is far from linear,
  larger values make it more linear). :math:`\hat{g}` is :math:`g` centred
  over the classes and scaled to unit mean across-class standard deviation,
  so :math:`s_g` (:obj:`attribute_strength`) is its spread per dimension.
- :math:`\mathbf{b}_d \sim \mathcal{N}(\mu_b, \sigma_b^2)`
  (:obj:`offset`, :obj:`offset_spread`): the mean activation level of each
  feature dimension, common to all classes.
- :math:`\mathbf{m}_c = \sum_{j \in \mathcal{N}(c)} w_{cj}\, \mathbf{z}_j /
  \lVert \mathbf{w}_c \rVert_2`, :math:`\mathbf{z}_j \sim
  \mathcal{N}(\mathbf{0}, \mathbf{I})` per class: a random field over
  attribute space, shared by classes that are close in it.
  :math:`\mathcal{N}(c)` are the :obj:`shared_neighbours` classes of highest
  attribute cosine similarity to :math:`c` plus :math:`c` itself, and
  :math:`w_{cj} = \mathrm{softmax}_j(\cos(\mathbf{a}_c, \mathbf{a}_j) /
  \tau)` (:obj:`shared_temperature`). It is not a function of an unseen
  class's attributes, but it correlates with the prototypes of the related
  (seen) classes: the information APNet's attribute propagation can bring
  to an unseen class. Unit variance per dimension; :math:`s_m`
  (:obj:`shared_strength`) scales it, and :obj:`shared_strength=0` is the
  control in which propagation has nothing to find.
- :math:`\mathbf{r}_c \sim \mathcal{N}(\mathbf{0}, \mathbf{I})`: a
  class-specific residual that neither attributes nor related classes
  explain (it sets the accuracy ceiling), scaled by :math:`s_r`
  (:obj:`residual_strength`).

**Images.** Image :math:`i` of class :math:`y_i`:

.. math::
    \mathbf{x}_i = \kappa\, \mathrm{ReLU}\big(\mathbf{p}_{y_i} + s_\ell\,
    \mathbf{B}^{\top} \mathbf{h}_i + s_\epsilon\, \boldsymbol{\epsilon}_i
    \big), \quad \mathbf{h}_i \sim \mathcal{N}(\mathbf{0}, \mathbf{I}_k),\;
    \boldsymbol{\epsilon}_i \sim \mathcal{N}(\mathbf{0}, \mathbf{I}),

with :math:`\mathbf{B} \in \mathbb{R}^{k \times 2048}`,
:math:`B_{ij} \sim \mathcal{N}(0, 1/k)`, a basis of within-class variation
(pose, background, ...) shared by all classes: :math:`s_\ell`
(:obj:`lowrank_noise`) and :math:`s_\epsilon` (:obj:`isotropic_noise`) are the
per-dimension standard deviations of the low-rank (rank :math:`k` =
:obj:`noise_rank`) and isotropic noise. :math:`\kappa` (:obj:`scale`) only
sets the units: with the defaults the features average about 0.55 with
norm about 36 and about 30% exact zeros, the range of ResNet-101's pooled
(non-negative) activations. All strengths are in units before
:math:`\kappa`.

**Defaults** (:obj:`DEFAULT_OPTIONS`):

======================  =======  =============================================
option                  default  role
======================  =======  =============================================
``hidden_dim``          256      width of :math:`g`
``hidden_bias``         0.0      :math:`\beta`, linearity of :math:`g`
``attribute_strength``  2.0      :math:`s_g`
``offset``              10.0     :math:`\mu_b`
``offset_spread``       4.0      :math:`\sigma_b`
``shared_strength``     2.0      :math:`s_m` (0: the control)
``shared_neighbours``   5        :math:`|\mathcal{N}(c)| - 1`
``shared_temperature``  0.1      :math:`\tau`
``residual_strength``   1.0      :math:`s_r`
``noise_rank``          32       :math:`k`
``lowrank_noise``       4.0      :math:`s_\ell`
``isotropic_noise``     18.0     :math:`s_\epsilon` (CUB 8.0, SUN 4.0)
``class_size_spread``   0.3      :math:`\sigma_n`
``scale``               0.04     :math:`\kappa`
======================  =======  =============================================

:obj:`DATASET_OPTIONS` lowers the image noise of CUB and SUN, whose classes
have far fewer training images (about 47 and 16 against about 590 for
AWA2); user options override both. The defaults were calibrated with the
ESZSL baseline (:mod:`apnet_pyg.zsl.eszsl`, :math:`\gamma, \lambda` chosen on
:obj:`valclasses1.txt` after training on :obj:`trainclasses1.txt`, raw
features) so that its accuracy on simulated data lands near its published
accuracy on the real data (Xian et al., 2018: ZSL 58.6 on AWA2, 53.9 on
CUB, 54.5 on SUN), with the usual seen bias in generalised ZSL. Measured
on simulated data (mean over seeds 0-2; ZSL among the unseen classes,
GZSL among all classes, per-class mean accuracy in %):

==========================  =====  ====  ====  ====
simulated, ESZSL            ZSL    S     U     H
==========================  =====  ====  ====  ====
AWA2                        53.9   90.0  40.8  56.2
AWA2, shared_strength=0     55.7   75.3  43.2  54.8
CUB                         57.2   88.5  26.6  40.9
CUB, shared_strength=0      48.5   75.9  31.9  44.9
==========================  =====  ====  ====  ====

A nearest-class-mean classifier whose unseen prototypes are the
similarity-weighted means of the 5 nearest seen classes (a crude
propagation) reaches 66.8 (AWA2) and 86.2 (CUB) with the shared component
and 57.2 and 61.6 without it: the shared component is what propagation can
exploit.

Known limits: the unseen classes of APY have about a quarter of their
attribute variance outside the span of the seen classes' attributes, which
the random :math:`g` maps to appearance no seen class shows, so ESZSL on
simulated APY is near chance (about 12-15%, against 38.3 published); and
since every class-level component is a smooth or independent random
function in 2048 dimensions, a nearest-class-mean classifier whose unseen
prototypes are propagated from the seen classes' means does much better
than ESZSL on simulated CUB and SUN than methods do on the real data.

**Determinism.** Everything is drawn from :class:`numpy.random.Generator`
streams spawned from :obj:`seed`, one per component (labels, :math:`g`,
:math:`\mathbf{z}`, :math:`\mathbf{r}`, :math:`\mathbf{B}`,
:math:`\mathbf{h}`, :math:`\boldsymbol{\epsilon}`): the same seed gives the
same bytes, and changing one strength (e.g. the :obj:`shared_strength=0`
control) leaves the labels and every other random draw unchanged.
"""
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from apnet_pyg.data.xlsa17 import (CLASS_LIST_FILES, FEATURE_DIM,
                                   FEATURES_FILE, SIMULATED_SIDECAR,
                                   SPLITS_FILE, ZSLDataset, dataset_dir,
                                   load_xlsa17, packaged_root)

SIMULATOR_VERSION = 1

DEFAULT_OPTIONS: Dict[str, Any] = dict(
    hidden_dim=256,
    hidden_bias=0.0,
    attribute_strength=2.0,
    offset=10.0,
    offset_spread=4.0,
    shared_strength=2.0,
    shared_neighbours=5,
    shared_temperature=0.1,
    residual_strength=1.0,
    noise_rank=32,
    lowrank_noise=4.0,
    isotropic_noise=18.0,
    class_size_spread=0.3,
    scale=0.04,
)

# Per-dataset overrides of DEFAULT_OPTIONS: fine-grained datasets with few
# images per class (CUB ~47, SUN 16 trainval images per class, against ~590
# for AWA2) need less image noise for ESZSL to land near its published
# accuracy on the real data (see the module docstring).
DATASET_OPTIONS: Dict[str, Dict[str, Any]] = {
    'CUB': dict(isotropic_noise=8.0),
    'SUN': dict(isotropic_noise=4.0),
}

# One independent random stream per component (see "Determinism").
_STREAMS = ('labels', 'g', 'shared', 'residual', 'basis', 'lowrank',
            'isotropic')
_CHUNK = 4096  # images generated at a time (fixed: part of the stream order)


def simulate_xlsa17(dataset: str, out: Union[str, Path],
                    data_root: Optional[Union[str, Path]] = None,
                    seed: int = 0, attributes: str = 'att',
                    compress: bool = False, **options: Any) -> Path:
    r"""Writes a simulated :obj:`<out>/<DATASET>/res101.mat` in the real
    layout (:obj:`features` 2048 x N float32, :obj:`labels` N x 1 1-based
    double, :obj:`image_files` N x 1 cell), copies :obj:`att_splits.mat` and
    the class lists next to it, and writes the :obj:`SIMULATED.json`
    sidecar. The model and its options are described in the module
    docstring.

    Args:
        dataset (str): Dataset name (:obj:`'AWA2'`, :obj:`'CUB'`, ...).
        out (str or Path): Output root; the dataset folder is created in it.
        data_root (str or Path, optional): Root of the real class side;
            :obj:`None` uses the copy shipped with the package.
            (default: :obj:`None`)
        seed (int, optional): Random seed. (default: :obj:`0`)
        attributes (str, optional): The attributes :math:`g` reads,
            :obj:`'att'` or :obj:`'original_att'`. (default: :obj:`'att'`)
        compress (bool, optional): zlib-compress the .mat file (AWA2:
            about 15 s instead of 3-4 s on 2 cores, 214 MB instead of
            310 MB). (default: :obj:`False`)
        **options: Overrides of :obj:`DEFAULT_OPTIONS`.

    Returns:
        Path: The written dataset folder :obj:`<out>/<DATASET>`.
    """
    unknown = set(options) - set(DEFAULT_OPTIONS)
    if unknown:
        raise TypeError(f"Unknown simulator options: {sorted(unknown)} "
                        f"(known: {sorted(DEFAULT_OPTIONS)})")
    source = dataset_dir(data_root if data_root is not None else
                         packaged_root(), dataset)
    opts = {**default_options(source.name), **options}
    _check_options(opts)
    data = load_xlsa17(source.parent, source.name, attributes=attributes,
                       load_features=False)
    target = Path(out) / source.name
    if (target / FEATURES_FILE).exists() and \
            not (target / SIMULATED_SIDECAR).exists():
        raise FileExistsError(f"'{target / FEATURES_FILE}' exists and is not "
                              f"simulated (no {SIMULATED_SIDECAR}); refusing "
                              f"to overwrite real features")

    rngs = dict(zip(_STREAMS, (np.random.default_rng(s) for s in
                               np.random.SeedSequence(seed).spawn(
                                   len(_STREAMS)))))
    labels, unlisted = simulate_labels(data, rngs['labels'],
                                       opts['class_size_spread'])
    prototypes = class_prototypes(data.attributes.double().numpy(), rngs,
                                  opts)
    features = sample_features(prototypes, labels, rngs, opts)
    names = np.array(data.class_names, dtype=object)
    image_files = _image_files(names, labels)

    target.mkdir(parents=True, exist_ok=True)
    if source.resolve() != target.resolve():
        for filename in (SPLITS_FILE, *CLASS_LIST_FILES.values()):
            if (source / filename).is_file():
                shutil.copyfile(source / filename, target / filename)
    _write_features(target / FEATURES_FILE, features, labels, image_files,
                    compress)
    sidecar = dict(
        simulator='apnet_pyg.data.simulator', version=SIMULATOR_VERSION,
        dataset=source.name, seed=seed, attributes=attributes,
        options=opts, num_images=int(labels.size),
        unlisted_images=int(unlisted), source=str(source),
        note='Synthetic features: accuracies on these files are not '
             'benchmark results.')
    (target / SIMULATED_SIDECAR).write_text(json.dumps(sidecar, indent=2))
    return target


def default_options(dataset: str) -> Dict[str, Any]:
    r"""Returns the default simulator options of :obj:`dataset`:
    :obj:`DEFAULT_OPTIONS` updated with its :obj:`DATASET_OPTIONS` entry.
    A command line should default its flags to these (or to :obj:`None`,
    passing only the options the user set), not to :obj:`DEFAULT_OPTIONS`,
    or the per-dataset values are overridden."""
    return {**DEFAULT_OPTIONS, **DATASET_OPTIONS.get(dataset.upper(), {})}


def simulate_labels(data: ZSLDataset, rng: np.random.Generator,
                    class_size_spread: float = 0.3
                    ) -> Tuple[np.ndarray, int]:
    r"""Draws a 0-based class for every image index of the real lists
    (see "Labels" in the module docstring).

    Returns:
        (np.ndarray, int): Labels of shape :obj:`[N]` (:obj:`N` = the largest
        listed index + 1) and the number of indices listed nowhere.
    """
    seen = data.seen_classes.numpy()
    unseen = data.unseen_classes.numpy()
    main = {s: data.loc(s).numpy() for s in
            ('trainval', 'test_seen', 'test_unseen')}
    train_loc = None if data.train_loc is None else data.train_loc.numpy()
    val_loc = None if data.val_loc is None else data.val_loc.numpy()
    num_images = 1 + max(int(idx.max()) for idx in
                         [*main.values(), *(x for x in (train_loc, val_loc)
                                            if x is not None and x.size)]
                         if idx.size)

    refine = (train_loc is not None and val_loc is not None and
              data.train_classes is not None and data.val_classes is not None
              and not np.intersect1d(train_loc, val_loc).size and
              not np.isin(np.concatenate([train_loc, val_loc]),
                          main['test_unseen']).any())
    cells = []  # (image indices, candidate classes)
    for split, classes in (('trainval', seen), ('test_seen', seen),
                           ('test_unseen', unseen)):
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
        warnings.warn(f"{unlisted.size} image indices of {data.name} are in "
                      f"no split list; they get seen classes")
        cells.append((unlisted, seen))

    weights = np.exp(class_size_spread *
                     rng.standard_normal(data.num_classes))
    labels = np.full(num_images, -1, dtype=np.int64)
    for images, classes in cells:
        if not images.size:
            continue
        counts = _allocate(images.size, weights[classes])
        labels[images[rng.permutation(images.size)]] = np.repeat(
            classes, counts)
    assert (labels >= 0).all()
    return labels, int(unlisted.size)


def class_prototypes(attributes: np.ndarray,
                     rngs: Dict[str, np.random.Generator],
                     options: Dict[str, Any]) -> np.ndarray:
    r"""Returns the visual prototypes :math:`\mathbf{p}_c` (see "Class
    prototypes" in the module docstring).

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
        options['hidden_dim'])
    w2 = rng.standard_normal((options['hidden_dim'], FEATURE_DIM))
    offset = options['offset'] + options['offset_spread'] * \
        rng.standard_normal(FEATURE_DIM)
    hidden = attributes @ w1
    hidden = (hidden - hidden.mean(0)) / (hidden.std(0) + 1e-12)
    g = np.maximum(hidden + b1, 0) @ w2
    g -= g.mean(0)
    g /= g.std(0).mean() + 1e-12

    # Shared field: softmax over the nearest classes in attribute space
    # (self included, so neighbours share each other's z_j directly).
    unit = attributes / (np.linalg.norm(attributes, axis=1, keepdims=True)
                         + 1e-12)
    similarity = unit @ unit.T
    k = min(options['shared_neighbours'] + 1, num_classes)
    # Stable sort with the class itself forced first, so ties break by index.
    ranked = np.argsort(-(similarity + 2 * np.eye(num_classes)), axis=1,
                        kind='stable')[:, :k]
    logits = np.take_along_axis(similarity, ranked, 1) / \
        options['shared_temperature']
    weights = np.exp(logits - logits.max(1, keepdims=True))
    weights /= np.linalg.norm(weights, axis=1, keepdims=True)
    mix = np.zeros((num_classes, num_classes))
    np.put_along_axis(mix, ranked, weights, 1)
    shared = mix @ rngs['shared'].standard_normal((num_classes, FEATURE_DIM))

    residual = rngs['residual'].standard_normal((num_classes, FEATURE_DIM))
    return np.maximum(offset + options['attribute_strength'] * g +
                      options['shared_strength'] * shared +
                      options['residual_strength'] * residual, 0)


def sample_features(prototypes: np.ndarray, labels: np.ndarray,
                    rngs: Dict[str, np.random.Generator],
                    options: Dict[str, Any]) -> np.ndarray:
    r"""Draws the image features around the prototypes (see "Images" in the
    module docstring).

    Returns:
        np.ndarray: Shape :obj:`[N, 2048]`, float32, C-contiguous (so its
        transpose is the Fortran-ordered 2048 x N array MATLAB stores).
    """
    rank = options['noise_rank']
    basis = (rngs['basis'].standard_normal((rank, FEATURE_DIM)) /
             np.sqrt(rank)).astype(np.float32)
    # ReLU commutes with a positive scale: apply it to every term.
    scale = options['scale']
    prototypes = (scale * prototypes).astype(np.float32)
    lowrank = np.float32(scale * options['lowrank_noise'])
    isotropic = np.float32(scale * options['isotropic_noise'])
    features = np.empty((labels.size, FEATURE_DIM), dtype=np.float32)
    for start in range(0, labels.size, _CHUNK):
        chunk = features[start:start + _CHUNK]
        rngs['isotropic'].standard_normal(chunk.shape, dtype=np.float32,
                                          out=chunk)
        chunk *= isotropic
        coefficients = rngs['lowrank'].standard_normal(
            (chunk.shape[0], rank), dtype=np.float32)
        chunk += (lowrank * coefficients) @ basis
        chunk += prototypes[labels[start:start + _CHUNK]]
        np.maximum(chunk, 0, out=chunk)
    return features


def _check_options(opts: Dict[str, Any]) -> None:
    for key in ('hidden_dim', 'noise_rank', 'shared_neighbours'):
        if int(opts[key]) != opts[key] or opts[key] < 1:
            raise ValueError(f"'{key}' must be a positive integer "
                             f"(got {opts[key]})")
    for key, value in opts.items():
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"'{key}' must be finite and >= 0 (got {value})")
    if opts['shared_temperature'] <= 0:
        raise ValueError("'shared_temperature' must be > 0")


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


def _write_features(path: Path, features: np.ndarray, labels: np.ndarray,
                    image_files: np.ndarray, compress: bool) -> None:
    from scipy.io import savemat

    # Write next to the target and rename, so an interrupted run never
    # leaves a truncated res101.mat behind.
    partial = path.with_name(path.name + '.partial')
    savemat(str(partial), {
        'features': features.T,  # Fortran-ordered 2048 x N: written as is
        'labels': (labels + 1).astype(np.float64)[:, None],
        'image_files': image_files,
    }, do_compression=compress, format='5')
    os.replace(partial, path)
