r"""What :class:`~apnet_pyg.data.sampler.EpisodeSampler` and
:class:`~apnet_pyg.data.sampler.MinibatchSampler` share: the sampler's
device and generator, its saved random state, and the per-class tables of
the pool's images (built and checked once, on the CPU).
"""

from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from apnet_pyg.checks import as_index_tensor


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
