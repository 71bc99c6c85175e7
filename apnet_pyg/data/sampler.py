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

**On a device.** Built with :obj:`device` (or a generator on a device), a
sampler keeps its index tables and its generator there: an episode is a
few kernels on that device, with no copy from the host and no host
synchronisation. A CUDA generator draws other numbers than the CPU's from
the same seed, so the episodes of a seed depend on the device.

**For a compiled step.** :func:`torch.compile` cannot trace a
:class:`torch.Generator`. :meth:`EpisodeSampler.draw` draws the random
numbers of many episodes ahead, exactly those that as many
:meth:`~EpisodeSampler.sample` calls would draw, and
:meth:`EpisodeSampler.episode` makes an episode from them with tensor
operations of static shapes only (no generator, no host synchronisation):
:obj:`sample()` is :obj:`episode(draw(1), 0)`. For mini-batches,
:meth:`MinibatchSampler.advance` keeps the books on the host and
:meth:`MinibatchSampler.batch_at` makes the batch.
"""

from typing import Any, Dict, Iterator, NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor

from apnet_pyg.checks import as_index_tensor, check_bool, check_int

#: The target of a padding position of :meth:`MinibatchSampler.batch_at`:
#: the default :obj:`ignore_index` of :func:`torch.nn.functional.
#: cross_entropy`, which leaves it out of the loss and its mean.
IGNORE_TARGET = -100


# What EpisodeSampler and MinibatchSampler share: the device and generator,
# the saved random state, the per-class tables of the pool's images.


def _concrete_device(device: torch.device) -> torch.device:
    # 'cuda' means the current CUDA device: name it, so that devices and
    # generators compare equal.
    if device.type == 'cpu' or device.index is not None:
        return device
    return torch.empty(0, device=device).device


def _sampler_device(
    device: Any, generator: Optional[torch.Generator]
) -> torch.device:
    r"""The device of a sampler: :obj:`device`, else its generator's, else
    the CPU; a given generator must be on it."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(
            f"'generator' must be a torch.Generator or None "
            f'(got {type(generator).__name__}; for a seed: '
            f'torch.Generator().manual_seed(seed))'
        )
    if device is None:
        device = 'cpu' if generator is None else generator.device
    try:
        device = _concrete_device(torch.device(device))
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"'device' must be a torch.device or its name "
            f'(got {device!r}: {error})'
        ) from None
    if generator is not None and _concrete_device(generator.device) != device:
        raise ValueError(
            f"'generator' is on {generator.device} but "
            f"'device' is {device}: make the generator there "
            f"(torch.Generator(device='{device}')"
            f'.manual_seed(seed))'
        )
    return device


def _default_generator(device: torch.device) -> torch.Generator:
    # Seeded from torch's global RNG, so torch.manual_seed still applies.
    seed = int(torch.randint(2**62, (1,)))
    return torch.Generator(device=device).manual_seed(seed)


def _group_by_class(
    labels: Tensor, classes: Tensor, pool: Optional[Tensor], sort: bool = True
) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Returns the pool's images of :obj:`classes` (sorted by class position
    if :obj:`sort`, else in pool order), their class positions, and the image
    count of each class (on the CPU, where they are checked)."""
    labels = as_index_tensor(labels, 'labels').cpu()
    classes = as_index_tensor(classes, 'classes').cpu()
    if classes.numel() == 0:
        raise ValueError("'classes' is empty")
    if classes.unique().numel() != classes.numel():
        raise ValueError("'classes' contains duplicates")
    if labels.numel() > 0 and int(labels.min()) < 0:
        raise ValueError("'labels' contains negative class indices")
    if pool is None:
        pool = torch.arange(labels.numel())
    pool = as_index_tensor(pool, 'pool').cpu()
    if pool.numel() and (
        int(pool.min()) < 0 or int(pool.max()) >= labels.numel()
    ):
        raise ValueError(
            f"'pool' must hold image indices in [0, {labels.numel()})"
        )
    if pool.unique().numel() != pool.numel():
        # A repeated image would be drawn twice in one episode or pass.
        raise ValueError("'pool' contains duplicate image indices")
    size = (
        max(int(classes.max()), int(labels.max()) if labels.numel() else 0) + 1
    )
    if int(classes.min()) < 0:
        raise ValueError("'classes' contains negative class indices")
    position = torch.full((size,), -1, dtype=torch.long)
    position[classes] = torch.arange(classes.numel())
    slot = position[labels[pool]]
    keep = slot >= 0
    images, slot = pool[keep], slot[keep]
    counts = torch.bincount(slot, minlength=classes.numel())
    if bool((counts == 0).any()):
        missing = classes[counts == 0]
        raise ValueError(
            f"{missing.numel()} of 'classes' are unknown (no "
            f'image with that label in the pool), e.g. '
            f'{missing[:5].tolist()}'
        )
    if not sort:
        return images, slot, counts
    order = torch.argsort(slot, stable=True)
    return images[order], slot[order], counts


class _RandomSampler:
    r"""The random state of a sampler: its generator, on the sampler's
    device, saved and restored so that a resumed run draws the same
    sequence."""

    def __init__(
        self, generator: Optional[torch.Generator], device: torch.device
    ):
        self.device = device
        self.generator = (
            generator if generator is not None else _default_generator(device)
        )

    def state_dict(self) -> Dict[str, Any]:
        r"""Returns the generator state (to resume the sequence)."""
        return {'generator': self.generator.get_state()}

    def _check_state(self, state: Any) -> None:
        if not isinstance(state, dict) or not isinstance(
            state.get('generator'), Tensor
        ):
            raise ValueError(
                f"'state' must be a {type(self).__name__}'s "
                f"state_dict() (a dict with its 'generator' "
                f'state; got {type(state).__name__})'
            )

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._check_state(state)
        try:
            # A generator's state is a CPU tensor, wherever it was loaded.
            self.generator.set_state(state['generator'].cpu())
        except RuntimeError as error:
            raise ValueError(
                f"'state' holds no generator state of this "
                f"sampler's torch.Generator (on "
                f'{self.generator.device}; a state saved on '
                f'another device does not fit) '
                f'({error})'
            ) from None

    def _device_suffix(self) -> str:
        return '' if self.device.type == 'cpu' else f', device={self.device}'


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


class EpisodeDraws(NamedTuple):
    r"""The random numbers of a run of episodes
    (:meth:`EpisodeSampler.draw`), row :obj:`i` those of episode :obj:`i`.

    Attributes:
        classes (Tensor): Positions in the sampler's :obj:`classes` of each
            episode's classes, in episode order. Shape
            :obj:`[num_episodes, n_way]`.
        picks (Tensor): Uniform numbers in :math:`[0, 1)` (float64) that
            choose each class's images. Shape
            :obj:`[num_episodes, n_way, k_shot]`.
    """

    classes: Tensor
    picks: Tensor


class Minibatch(NamedTuple):
    r"""One mini-batch: image indices and the position of their class in
    the sampler's :obj:`classes` (:data:`IGNORE_TARGET` for a padding
    position of :meth:`MinibatchSampler.batch_at`). Both of shape
    :obj:`[batch_size]`."""

    image_index: Tensor
    target: Tensor


def _distinct_positions(uniform: Tensor, counts: Tensor) -> Tensor:
    r"""For each row (a class with :obj:`counts` :math:`(n, 1)` images),
    :math:`k` positions in :math:`[0, count)` from the uniform numbers
    :obj:`uniform` :math:`(n, k)`: the :math:`i`-th number chooses among
    the :math:`count - i` positions not chosen yet (an ordered sample
    without replacement, each one equally likely); a row with fewer than
    :math:`k` images draws with replacement. Static shapes: no host
    synchronisation."""
    k = uniform.size(1)
    short = counts < k
    chosen = []
    for i in range(k):
        left = counts if i == 0 else torch.where(short, counts, counts - i)
        position = (uniform[:, i : i + 1] * left).long()
        position = torch.minimum(position, left - 1)  # guard float rounding
        if i > 0:
            # The position-th of the positions not taken: step over each
            # taken one at or below it, in increasing order.
            taken = torch.cat(chosen, dim=1).sort(dim=1).values
            for j in range(i):
                position = position + (
                    (taken[:, j : j + 1] <= position) & ~short
                )
        chosen.append(position)
    return chosen[0] if k == 1 else torch.cat(chosen, dim=1)


class EpisodeSampler(_RandomSampler):
    r"""Draws episodes of :obj:`n_way` classes and :obj:`k_shot` images per
    class (APNet's episodic training).

    Each episode draws :obj:`n_way` distinct classes from :obj:`classes`
    uniformly (all of them, in random order, if there are fewer) and
    :obj:`k_shot` distinct images of each from the pool: the :math:`i`-th
    image of a class uniformly among those not drawn yet. (Before the
    samplers could run on a device, :obj:`k_shot > 1` drew its images
    another way, from the same distribution but with other numbers: such
    runs differ from earlier ones; :obj:`k_shot=1` draws as before.)

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
        generator (torch.Generator, optional): Source of randomness, on
            :obj:`device`; :obj:`None` makes one seeded from torch's
            global RNG.
        pool (Tensor, optional): Image indices to draw from (e.g.
            :obj:`trainval_loc`); :obj:`None` means all images.
        allow_replacement (bool, optional): See above.
            (default: :obj:`False`)
        num_episodes (int, optional): Length of an iteration;
            :obj:`None` iterates forever. (default: :obj:`None`)
        device (torch.device, optional): Where the index tables live and
            episodes are made. (default: the generator's device, else the
            CPU)

    Example:
        >>> gen = torch.Generator().manual_seed(0)
        >>> sampler = EpisodeSampler(data.labels, data.seen_classes,
        ...                          n_way=30, generator=gen,
        ...                          pool=data.trainval_loc)
        >>> image_index, episode_classes, target = sampler.sample()
    """

    def __init__(
        self,
        labels: Tensor,
        classes: Tensor,
        n_way: int = 30,
        k_shot: int = 1,
        generator: Optional[torch.Generator] = None,
        *,
        pool: Optional[Tensor] = None,
        allow_replacement: bool = False,
        num_episodes: Optional[int] = None,
        device: Optional[Union[str, torch.device]] = None,
    ):
        check_int(n_way, 'n_way', minimum=2)
        check_int(k_shot, 'k_shot', minimum=1)
        check_bool(allow_replacement, 'allow_replacement')
        check_int(num_episodes, 'num_episodes', minimum=1, optional=True)
        classes = as_index_tensor(classes, 'classes').cpu()
        if classes.numel() < 2:
            raise ValueError(
                f"'classes' must hold at least 2 classes for "
                f'an episode (got {classes.numel()})'
            )
        images, _, counts = _group_by_class(labels, classes, pool)
        short = counts < k_shot
        if bool(short.any()) and not allow_replacement:
            raise ValueError(
                f'{int(short.sum())} classes have fewer than k_shot={k_shot} '
                f'images in the pool (e.g. class '
                f'{int(classes[short][0])} with '
                f'{int(counts[short][0])}); pass '
                f'allow_replacement=True to draw their images with '
                f'replacement'
            )
        device = _sampler_device(device, generator)
        self.classes = classes.to(device)
        self._images = images.to(device)
        self._counts = counts.to(device)
        self._offsets = torch.cumsum(self._counts, 0) - self._counts
        self.n_way = min(n_way, classes.numel())
        self.k_shot = k_shot
        self.num_episodes = num_episodes
        super().__init__(generator, device)

    def _draw_one(self) -> Tuple[Tensor, Tensor]:
        gen, device = self.generator, self.device
        chosen = torch.randperm(
            self.classes.numel(), generator=gen, device=device
        )[: self.n_way]
        picks = torch.rand(
            self.n_way,
            self.k_shot,
            generator=gen,
            dtype=torch.float64,
            device=device,
        )
        return chosen, picks

    def sample(self) -> Episode:
        r"""Draws one episode."""
        return self._episode(*self._draw_one())

    def draw(
        self, num_episodes: int, out: Optional[EpisodeDraws] = None
    ) -> EpisodeDraws:
        r"""Draws the random numbers of the next :obj:`num_episodes`
        episodes, the numbers that as many :meth:`sample` calls would
        draw, in the same order (the generator ends in the same state);
        :meth:`episode` makes the episodes. Into :obj:`out` (the tensors of
        an earlier call, reused in place) if given."""
        check_int(num_episodes, 'num_episodes', minimum=1)
        shape = (num_episodes, self.n_way, self.k_shot)
        if out is None:
            out = EpisodeDraws(
                torch.empty(shape[:2], dtype=torch.long, device=self.device),
                torch.empty(shape, dtype=torch.float64, device=self.device),
            )
        elif (
            not isinstance(out, EpisodeDraws)
            or out.picks.shape != shape
            or out.classes.shape != shape[:2]
            or out.picks.device != self.device
        ):
            raise ValueError(
                f"'out' must be the EpisodeDraws of "
                f'{num_episodes} episodes of this sampler '
                f'(picks of shape {list(shape)} on '
                f'{self.device})'
            )
        for i in range(num_episodes):
            chosen, picks = self._draw_one()
            out.classes[i].copy_(chosen)
            out.picks[i].copy_(picks)
        return out

    def episode(
        self, draws: EpisodeDraws, index: Union[int, Tensor]
    ) -> Episode:
        r"""The episode of row :obj:`index` of :obj:`draws` (an :obj:`int`,
        or a one-element integer tensor on the sampler's device, read
        there): tensor operations of static shapes only, with no generator
        and no host synchronisation, so that a compiled or captured
        training step can make its episode."""
        if isinstance(index, Tensor):
            index = index.reshape(1)
            return self._episode(
                draws.classes.index_select(0, index).squeeze(0),
                draws.picks.index_select(0, index).squeeze(0),
            )
        return self._episode(draws.classes[index], draws.picks[index])

    def _episode(self, chosen: Tensor, picks: Tensor) -> Episode:
        counts = self._counts[chosen].unsqueeze(1)  # [n_way, 1]
        pick = _distinct_positions(picks, counts)
        image_index = self._images[self._offsets[chosen].unsqueeze(1) + pick]
        # arange(n_way).repeat_interleave(k_shot), without its cumulative
        # sum over the repeats.
        target = torch.arange(self.n_way, device=self.device).unsqueeze(1)
        target = target.expand(self.n_way, self.k_shot).reshape(-1)
        return Episode(image_index.view(-1), self.classes[chosen], target)

    def __iter__(self) -> Iterator[Episode]:
        episode = 0
        while self.num_episodes is None or episode < self.num_episodes:
            yield self.sample()
            episode += 1

    def __len__(self) -> int:
        if self.num_episodes is None:
            raise TypeError(
                'EpisodeSampler(num_episodes=None) is endless: it has no len()'
            )
        return self.num_episodes

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}(classes={self.classes.numel()}, '
            f'images={self._images.numel()}, n_way={self.n_way}, '
            f'k_shot={self.k_shot}{self._device_suffix()})'
        )


class MinibatchSampler(_RandomSampler):
    r"""Mini-batches over all images of :obj:`classes` in the pool, each image
    once per epoch (the ablation alternative to episodes: every image is
    classified among all :obj:`classes`).

    Args:
        labels (Tensor): Class of every image. Shape :obj:`[N]`.
        classes (Tensor): The classes; :obj:`target` is the position of an
            image's class in it.
        batch_size (int): Images per batch.
        generator (torch.Generator, optional): Source of randomness, on
            :obj:`device`; :obj:`None` makes one seeded from torch's
            global RNG.
        pool (Tensor, optional): Image indices to draw from; :obj:`None`
            means all images.
        shuffle (bool, optional): Shuffle each epoch. (default: :obj:`True`)
        drop_last (bool, optional): Drop the last incomplete batch.
            (default: :obj:`False`)
        device (torch.device, optional): Where the index tables live and
            batches are made. (default: the generator's device, else the
            CPU)

    Iterating yields one pass of :class:`Minibatch` (in pool order when not
    shuffled); :meth:`sample` draws batches from an endless sequence of
    passes, resumable mid-pass from :meth:`state_dict`.
    """

    def __init__(
        self,
        labels: Tensor,
        classes: Tensor,
        batch_size: int,
        generator: Optional[torch.Generator] = None,
        *,
        pool: Optional[Tensor] = None,
        shuffle: bool = True,
        drop_last: bool = False,
        device: Optional[Union[str, torch.device]] = None,
    ):
        check_int(batch_size, 'batch_size', minimum=1)
        check_bool(shuffle, 'shuffle')
        check_bool(drop_last, 'drop_last')
        classes = as_index_tensor(classes, 'classes').cpu()
        images, targets, _ = _group_by_class(labels, classes, pool, sort=False)
        device = _sampler_device(device, generator)
        self.classes = classes.to(device)
        self._images = images.to(device)
        self._targets = targets.to(device)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        # The order of sample()'s pass, refilled in place (a compiled step
        # reads it at a fixed address); None until the first pass.
        self._order_buffer = torch.empty_like(self._images)
        self._pass_order: Optional[Tensor] = None
        self._next_batch = 0
        super().__init__(generator, device)

    @property
    def num_images(self) -> int:
        r"""The images of a pass (with those of a dropped last batch)."""
        return self._images.numel()

    def __len__(self) -> int:
        n = self._images.numel()
        return (
            n // self.batch_size
            if self.drop_last
            else -(-n // self.batch_size)
        )

    def _order(self, out: Optional[Tensor] = None) -> Tensor:
        n = self._images.numel()
        if self.shuffle:
            return torch.randperm(
                n, generator=self.generator, device=self.device, out=out
            )
        return torch.arange(n, device=self.device, out=out)

    def _batch(self, order: Tensor, batch: int) -> Minibatch:
        index = order[batch * self.batch_size : (batch + 1) * self.batch_size]
        return Minibatch(self._images[index], self._targets[index])

    def __iter__(self) -> Iterator[Minibatch]:
        order = self._order()
        for batch in range(len(self)):
            yield self._batch(order, batch)

    def advance(self) -> int:
        r"""Moves :meth:`sample`'s sequence on by one batch and returns the
        batch's position in the current pass, drawing the next pass's
        order when one ends: the bookkeeping of :meth:`sample`, on the
        host, for a step that makes the batch with :meth:`batch_at`."""
        if len(self) == 0:
            raise ValueError(
                f'No complete batch to sample: '
                f'{self._images.numel()} images, batch_size '
                f'{self.batch_size} and drop_last=True'
            )
        if self._pass_order is None or self._next_batch >= len(self):
            self._pass_order = self._order(out=self._order_buffer)
            self._next_batch = 0
        batch = self._next_batch
        self._next_batch += 1
        return batch

    def sample(self) -> Minibatch:
        r"""The next mini-batch of an endless sequence of passes over the
        images (a new order each pass). Its position is part of
        :meth:`state_dict`, so a resumed run continues mid-pass exactly."""
        batch = self.advance()
        return self._batch(self._pass_order, batch)

    def batch_at(self, batch: Tensor) -> Minibatch:
        r"""Batch :obj:`batch` of the current pass (a one-element integer
        tensor on the sampler's device, as :meth:`advance` returned it),
        always :obj:`batch_size` long: a last batch that is shorter is
        padded with the pass's last image and the target
        :data:`IGNORE_TARGET`. Tensor operations of static shapes only:
        what a compiled or captured training step calls. Call
        :meth:`advance` first."""
        if self._pass_order is None:
            raise ValueError('No pass yet: call advance() before batch_at()')
        n = self._images.numel()
        slots = batch.reshape(1) * self.batch_size + torch.arange(
            self.batch_size, device=self.device
        )
        order = self._pass_order.index_select(0, slots.clamp(max=n - 1))
        target = torch.where(slots < n, self._targets[order], IGNORE_TARGET)
        return Minibatch(self._images[order], target)

    def state_dict(self) -> Dict[str, Any]:
        state = super().state_dict()
        state.update(
            pass_order=None
            if self._pass_order is None
            else self._pass_order.clone(),
            next_batch=self._next_batch,
        )
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        # Everything checked before anything is set: a refused state leaves
        # the sampler as it was.
        self._check_state(state)
        pass_order = state.get('pass_order')
        if pass_order is not None and (
            not isinstance(pass_order, Tensor)
            or pass_order.shape != self._images.shape
        ):
            raise ValueError(
                f"'state' is the state of a MinibatchSampler "
                f'over another number of images (its pass '
                f'order: {getattr(pass_order, "shape", None)}, '
                f'this sampler: {self._images.numel()})'
            )
        if pass_order is not None and not torch.equal(
            pass_order.cpu().sort().values, torch.arange(pass_order.numel())
        ):
            raise ValueError(
                "'state' holds a pass order that is not a "
                'permutation of the images'
            )
        next_batch = state.get('next_batch', 0)
        if (
            isinstance(next_batch, bool)
            or not isinstance(next_batch, int)
            or not 0 <= next_batch <= len(self)
        ):
            raise ValueError(
                f"'state' holds a batch position outside "
                f'0..{len(self)} (got {next_batch!r})'
            )
        super().load_state_dict(state)
        if pass_order is None:
            self._pass_order = None
        else:
            self._pass_order = self._order_buffer.copy_(pass_order)
        self._next_batch = next_batch

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}(classes={self.classes.numel()}, '
            f'images={self._images.numel()}, '
            f'batch_size={self.batch_size}{self._device_suffix()})'
        )
