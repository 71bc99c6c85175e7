r"""Samplers of training images for APNet.

APNet is trained episodically (Liu et al., AAAI 2020, Sec. "Training"): each
episode draws :obj:`n_way` seen classes and :obj:`k_shot` images of each,
and the images are classified among the episode's classes only.
:class:`EpisodeSampler` draws such episodes; :class:`MinibatchSampler` is
the ablation alternative, ordinary mini-batches classified among all
training classes.

Both are vectorised (per-class image indices are precomputed once, an
episode is a few tensor operations) and deterministic given their
:class:`torch.Generator`, whose state :meth:`state_dict` saves and
:meth:`load_state_dict` restores, so that a resumed run draws the same
episodes.
"""
from typing import Any, Dict, Iterator, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from apnet_pyg.utils import as_index_tensor, check_bool, check_int


class Episode(NamedTuple):
    r"""One training episode.

    Attributes:
        image_index (Tensor): Image indices, class-major (the :obj:`k_shot`
            images of :obj:`episode_classes[0]` first). Shape
            :obj:`[n_way * k_shot]`.
        episode_classes (Tensor): The episode's classes. Shape
            :obj:`[n_way]`.
        target (Tensor): Position of each image's class in
            :obj:`episode_classes`. Shape :obj:`[n_way * k_shot]`.
    """
    image_index: Tensor
    episode_classes: Tensor
    target: Tensor


class Minibatch(NamedTuple):
    r"""One mini-batch: image indices and the position of their class in
    the sampler's :obj:`classes`. Both of shape :obj:`[batch_size]`."""
    image_index: Tensor
    target: Tensor


def _default_generator() -> torch.Generator:
    # Seeded from torch's global RNG, so torch.manual_seed still applies.
    seed = int(torch.randint(2**62, (1, )))
    return torch.Generator().manual_seed(seed)


def _group_by_class(labels: Tensor, classes: Tensor, pool: Optional[Tensor],
                    sort: bool = True) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Returns the pool's images of :obj:`classes` (sorted by class position
    if :obj:`sort`, else in pool order), their class positions, and the image
    count of each class."""
    labels = as_index_tensor(labels, 'labels')
    classes = as_index_tensor(classes, 'classes')
    if classes.numel() == 0:
        raise ValueError("'classes' is empty")
    if classes.unique().numel() != classes.numel():
        raise ValueError("'classes' contains duplicates")
    if labels.numel() > 0 and int(labels.min()) < 0:
        raise ValueError("'labels' contains negative class indices")
    if pool is None:
        pool = torch.arange(labels.numel())
    pool = as_index_tensor(pool, 'pool')
    if pool.numel() and (int(pool.min()) < 0 or
                         int(pool.max()) >= labels.numel()):
        raise ValueError(f"'pool' must hold image indices in "
                         f"[0, {labels.numel()})")
    if pool.unique().numel() != pool.numel():
        # A repeated image would be drawn twice in one episode or pass.
        raise ValueError("'pool' contains duplicate image indices")
    size = max(int(classes.max()), int(labels.max()) if labels.numel()
               else 0) + 1
    if int(classes.min()) < 0:
        raise ValueError("'classes' contains negative class indices")
    position = torch.full((size, ), -1, dtype=torch.long)
    position[classes] = torch.arange(classes.numel())
    slot = position[labels[pool]]
    keep = slot >= 0
    images, slot = pool[keep], slot[keep]
    counts = torch.bincount(slot, minlength=classes.numel())
    if bool((counts == 0).any()):
        missing = classes[counts == 0]
        raise ValueError(f"{missing.numel()} of 'classes' are unknown (no "
                         f"image with that label in the pool), e.g. "
                         f"{missing[:5].tolist()}")
    if not sort:
        return images, slot, counts
    order = torch.argsort(slot, stable=True)
    return images[order], slot[order], counts


class _RandomSampler:
    r"""The random state of a sampler: its generator, saved and restored
    so that a resumed run draws the same sequence."""
    def __init__(self, generator: Optional[torch.Generator]):
        if generator is not None and \
                not isinstance(generator, torch.Generator):
            raise ValueError(f"'generator' must be a torch.Generator or "
                             f"None (got {type(generator).__name__}; for a "
                             f"seed: torch.Generator().manual_seed(seed))")
        self.generator = generator if generator is not None else \
            _default_generator()

    def state_dict(self) -> Dict[str, Any]:
        r"""Returns the generator state (to resume the sequence)."""
        return {'generator': self.generator.get_state()}

    def _check_state(self, state: Any) -> None:
        if not isinstance(state, dict) or \
                not isinstance(state.get('generator'), Tensor):
            raise ValueError(f"'state' must be a {type(self).__name__}'s "
                             f"state_dict() (a dict with its 'generator' "
                             f"state; got {type(state).__name__})")

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._check_state(state)
        try:
            self.generator.set_state(state['generator'])
        except RuntimeError as error:
            raise ValueError(f"'state' holds no generator state of "
                             f"torch.Generator ({error})") from None


class EpisodeSampler(_RandomSampler):
    r"""Draws episodes of :obj:`n_way` classes and :obj:`k_shot` images per
    class (APNet's episodic training).

    Each episode draws :obj:`n_way` distinct classes from :obj:`classes`
    uniformly (all of them, in random order, if there are fewer) and
    :obj:`k_shot` distinct images of each from the pool.

    A class with fewer than :obj:`k_shot` images in the pool raises a
    :class:`ValueError` unless :obj:`allow_replacement=True`; then only the
    images of such classes are drawn with replacement (so an episode may
    repeat an image of a small class, which weighs that image more in the
    loss: hence opt-in).

    Args:
        labels (Tensor): Class of every image. Shape :obj:`[N]`.
        classes (Tensor): The classes to draw from (e.g. the seen classes).
        n_way (int, optional): Classes per episode, at least 2.
            (default: :obj:`30`)
        k_shot (int, optional): Images per class. (default: :obj:`1`)
        generator (torch.Generator, optional): Source of randomness;
            :obj:`None` makes one seeded from torch's global RNG.
        pool (Tensor, optional): Image indices to draw from (e.g.
            :obj:`trainval_loc`); :obj:`None` means all images.
        allow_replacement (bool, optional): See above.
            (default: :obj:`False`)
        num_episodes (int, optional): Length of an iteration;
            :obj:`None` iterates forever. (default: :obj:`None`)

    Example:
        >>> gen = torch.Generator().manual_seed(0)
        >>> sampler = EpisodeSampler(data.labels, data.seen_classes,
        ...                          n_way=30, generator=gen,
        ...                          pool=data.trainval_loc)
        >>> image_index, episode_classes, target = sampler.sample()
    """
    def __init__(self, labels: Tensor, classes: Tensor, n_way: int = 30,
                 k_shot: int = 1, generator: Optional[torch.Generator] = None,
                 *, pool: Optional[Tensor] = None,
                 allow_replacement: bool = False,
                 num_episodes: Optional[int] = None):
        check_int(n_way, 'n_way', minimum=2)
        check_int(k_shot, 'k_shot', minimum=1)
        check_bool(allow_replacement, 'allow_replacement')
        check_int(num_episodes, 'num_episodes', minimum=1, optional=True)
        self.classes = as_index_tensor(classes, 'classes')
        if self.classes.numel() < 2:
            raise ValueError(f"'classes' must hold at least 2 classes for "
                             f"an episode (got {self.classes.numel()})")
        self._images, _, self._counts = _group_by_class(labels, self.classes,
                                                        pool)
        short = self._counts < k_shot
        if bool(short.any()) and not allow_replacement:
            raise ValueError(
                f"{int(short.sum())} classes have fewer than k_shot={k_shot} "
                f"images in the pool (e.g. class "
                f"{int(self.classes[short][0])} with "
                f"{int(self._counts[short][0])}); pass "
                f"allow_replacement=True to draw their images with "
                f"replacement")
        self._offsets = torch.cumsum(self._counts, 0) - self._counts
        self.n_way = min(n_way, self.classes.numel())
        self.k_shot = k_shot
        self.num_episodes = num_episodes
        super().__init__(generator)

    def sample(self) -> Episode:
        r"""Draws one episode."""
        gen, k = self.generator, self.k_shot
        chosen = torch.randperm(self.classes.numel(), generator=gen)
        chosen = chosen[:self.n_way]
        counts = self._counts[chosen].unsqueeze(1)  # [n_way, 1]
        if k == 1:
            pick = (torch.rand(counts.shape, generator=gen,
                               dtype=torch.float64) * counts).long()
        else:
            # k distinct positions per class: the k smallest of random keys,
            # with the slots beyond each class's count pushed out of reach.
            width = max(int(counts.max()), k)
            keys = torch.rand(self.n_way, width, generator=gen)
            keys.masked_fill_(torch.arange(width) >= counts, 2.0)
            pick = keys.topk(k, dim=1, largest=False).indices
            short = counts < k
            if bool(short.any()):
                repeat = (torch.rand(self.n_way, k, generator=gen,
                                     dtype=torch.float64) * counts).long()
                pick = torch.where(short, repeat, pick)
        pick = torch.minimum(pick, counts - 1)  # guard float rounding
        image_index = self._images[self._offsets[chosen].unsqueeze(1) + pick]
        target = torch.arange(self.n_way).repeat_interleave(k)
        return Episode(image_index.view(-1), self.classes[chosen], target)

    def __iter__(self) -> Iterator[Episode]:
        episode = 0
        while self.num_episodes is None or episode < self.num_episodes:
            yield self.sample()
            episode += 1

    def __len__(self) -> int:
        if self.num_episodes is None:
            raise TypeError('EpisodeSampler(num_episodes=None) is endless: '
                            'it has no len()')
        return self.num_episodes

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(classes={self.classes.numel()}, '
                f'images={self._images.numel()}, n_way={self.n_way}, '
                f'k_shot={self.k_shot})')


class MinibatchSampler(_RandomSampler):
    r"""Mini-batches over all images of :obj:`classes` in the pool, each image
    once per epoch (the ablation alternative to episodes: every image is
    classified among all :obj:`classes`).

    Args:
        labels (Tensor): Class of every image. Shape :obj:`[N]`.
        classes (Tensor): The classes; :obj:`target` is the position of an
            image's class in it.
        batch_size (int): Images per batch.
        generator (torch.Generator, optional): Source of randomness;
            :obj:`None` makes one seeded from torch's global RNG.
        pool (Tensor, optional): Image indices to draw from; :obj:`None`
            means all images.
        shuffle (bool, optional): Shuffle each epoch. (default: :obj:`True`)
        drop_last (bool, optional): Drop the last incomplete batch.
            (default: :obj:`False`)

    Iterating yields one pass of :class:`Minibatch` (in pool order when not
    shuffled); :meth:`sample` draws batches from an endless sequence of
    passes, resumable mid-pass from :meth:`state_dict`.
    """
    def __init__(self, labels: Tensor, classes: Tensor, batch_size: int,
                 generator: Optional[torch.Generator] = None, *,
                 pool: Optional[Tensor] = None, shuffle: bool = True,
                 drop_last: bool = False):
        check_int(batch_size, 'batch_size', minimum=1)
        check_bool(shuffle, 'shuffle')
        check_bool(drop_last, 'drop_last')
        self.classes = as_index_tensor(classes, 'classes')
        self._images, self._targets, _ = _group_by_class(
            labels, self.classes, pool, sort=False)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self._pass_order: Optional[Tensor] = None  # of sample()'s pass
        self._next_batch = 0
        super().__init__(generator)

    def __len__(self) -> int:
        n = self._images.numel()
        return n // self.batch_size if self.drop_last else \
            -(-n // self.batch_size)

    def _order(self) -> Tensor:
        n = self._images.numel()
        return torch.randperm(n, generator=self.generator) if self.shuffle \
            else torch.arange(n)

    def _batch(self, order: Tensor, batch: int) -> Minibatch:
        index = order[batch * self.batch_size:(batch + 1) * self.batch_size]
        return Minibatch(self._images[index], self._targets[index])

    def __iter__(self) -> Iterator[Minibatch]:
        order = self._order()
        for batch in range(len(self)):
            yield self._batch(order, batch)

    def sample(self) -> Minibatch:
        r"""The next mini-batch of an endless sequence of passes over the
        images (a new order each pass). Its position is part of
        :meth:`state_dict`, so a resumed run continues mid-pass exactly."""
        if len(self) == 0:
            raise ValueError(f"No complete batch to sample: "
                             f"{self._images.numel()} images, batch_size "
                             f"{self.batch_size} and drop_last=True")
        if self._pass_order is None or self._next_batch >= len(self):
            self._pass_order, self._next_batch = self._order(), 0
        batch = self._batch(self._pass_order, self._next_batch)
        self._next_batch += 1
        return batch

    def state_dict(self) -> Dict[str, Any]:
        state = super().state_dict()
        state.update(pass_order=self._pass_order,
                     next_batch=self._next_batch)
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        # Everything checked before anything is set: a refused state leaves
        # the sampler as it was.
        self._check_state(state)
        pass_order = state.get('pass_order')
        if pass_order is not None and (
                not isinstance(pass_order, Tensor) or
                pass_order.shape != self._images.shape):
            raise ValueError(f"'state' is the state of a MinibatchSampler "
                             f"over another number of images (its pass "
                             f"order: {getattr(pass_order, 'shape', None)}, "
                             f"this sampler: {self._images.numel()})")
        if pass_order is not None and not torch.equal(
                pass_order.sort().values, torch.arange(pass_order.numel())):
            raise ValueError("'state' holds a pass order that is not a "
                             "permutation of the images")
        next_batch = state.get('next_batch', 0)
        if isinstance(next_batch, bool) or not isinstance(next_batch, int) \
                or not 0 <= next_batch <= len(self):
            raise ValueError(f"'state' holds a batch position outside "
                             f"0..{len(self)} (got {next_batch!r})")
        super().load_state_dict(state)
        self._pass_order = pass_order
        self._next_batch = next_batch

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(classes={self.classes.numel()}, '
                f'images={self._images.numel()}, '
                f'batch_size={self.batch_size})')
