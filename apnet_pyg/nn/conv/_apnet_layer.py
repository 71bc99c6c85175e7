r"""What :class:`~apnet_pyg.nn.APNetConv` and
:class:`~apnet_pyg.nn.DenseAPNetConv` share: the projection :math:`f` and
:class:`APNetLayerMixin` (their common arguments, parameters and checks)."""

from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn.dense.linear import Linear

from apnet_pyg.checks import check_bool, check_int, check_number


def check_temperature(value: Any, name: str = 'temperature') -> float:
    r"""The temperature as a float in [0, the largest float32] (the layers
    keep it in float32): the one check of it, for the layers, APNet and
    the ZSL application's configuration."""
    value = check_number(
        value, name, maximum=float(torch.finfo(torch.float32).max)
    )
    if value < 0:
        raise ValueError(
            f"'{name}' must be at least 0 (got {value:g}): a "
            f'negative temperature makes the softmax prefer '
            f'the least similar neighbours'
        )
    return value


#: Initialisations of the projection :math:`f`.
PROJ_INITS = ('glorot', 'identity')


class Projection(Linear):
    r"""The bias-free projection :math:`f` of
    :class:`~apnet_pyg.nn.APNetConv`: a
    :class:`~torch_geometric.nn.dense.Linear` (lazy with
    :obj:`in_channels=-1`) initialised with Glorot or as the identity
    (:func:`torch.nn.init.eye_`: :math:`W_{k,k} = 1`, zero elsewhere)."""

    def __init__(
        self, in_channels: int, out_channels: int, init: str = 'glorot'
    ):
        self.init = init
        super().__init__(
            in_channels, out_channels, bias=False, weight_initializer='glorot'
        )

    def reset_parameters(self):
        # Linear's own reset does Glorot, and nothing while lazy.
        if self.init == 'identity' and self.in_channels > 0:
            with torch.no_grad():
                torch.nn.init.eye_(self.weight)
        else:
            super().reset_parameters()


def _check_in_channels(in_channels: Any, name: str = 'in_channels') -> None:
    # PyG's convention: -1 derives the size from the first input (lazy);
    # 0 or another negative value would silently mean the same.
    if (
        isinstance(in_channels, bool)
        or not isinstance(in_channels, int)
        or (in_channels < 1 and in_channels != -1)
    ):
        raise ValueError(
            f"'{name}' must be a positive integer, or -1 to "
            f'derive it from the first input (got '
            f'{type(in_channels).__name__} {in_channels!r})'
        )


class APNetLayerMixin:
    r"""What :class:`~apnet_pyg.nn.APNetConv` and
    :class:`~apnet_pyg.nn.DenseAPNetConv` share, mixed into both (same
    attribute names, so that their :obj:`state_dict` is interchangeable):
    the checks of their common constructor arguments, the bias-free
    projection :math:`f` (:obj:`lin`, or :obj:`lin_src` and :obj:`lin_dst`
    for a pair of input sizes; the identity for :obj:`proj_channels=None`),
    the temperature :math:`\gamma` (a parameter if learned, else a buffer),
    their reset, the input dtype check and the :obj:`repr`."""

    def _init_apnet_layer(
        self,
        in_channels: Union[int, Tuple[int, int]],
        proj_channels: Optional[int],
        temperature: float,
        learn_temperature: bool,
        num_steps: int,
        proj_init: str,
    ) -> None:
        if isinstance(in_channels, tuple) and len(in_channels) == 2:
            _check_in_channels(in_channels[0], 'in_channels[0]')
            _check_in_channels(in_channels[1], 'in_channels[1]')
        else:
            _check_in_channels(in_channels)
        check_int(proj_channels, 'proj_channels', minimum=1, optional=True)
        temperature = check_temperature(temperature)
        check_bool(learn_temperature, 'learn_temperature')
        check_int(num_steps, 'num_steps', minimum=1)
        if proj_init not in PROJ_INITS:
            raise ValueError(
                f"'proj_init' must be one of {PROJ_INITS} (got {proj_init!r})"
            )
        self.in_channels = in_channels
        self.proj_channels = proj_channels
        self.initial_temperature = temperature
        self.learn_temperature = learn_temperature
        self.num_steps = num_steps
        self.proj_init = proj_init

        def projection(channels: int) -> torch.nn.Module:
            if proj_channels is None:
                return torch.nn.Identity()
            return Projection(channels, proj_channels, proj_init)

        if isinstance(in_channels, int):
            self.lin = projection(in_channels)
            self.lin_src = self.lin_dst = None
        else:
            self.lin = None
            self.lin_src = projection(in_channels[0])
            self.lin_dst = projection(in_channels[1])
        if learn_temperature:
            self.temperature = Parameter(torch.empty(()))
        else:
            self.register_buffer('temperature', torch.empty(()))

    def _reset_apnet_layer(self) -> None:
        for lin in (self.lin, self.lin_src, self.lin_dst):
            if hasattr(lin, 'reset_parameters'):
                lin.reset_parameters()
        with torch.no_grad():
            self.temperature.fill_(self.initial_temperature)

    @staticmethod
    def _input_channels(lin: Optional[torch.nn.Module], declared: int) -> int:
        r"""The number of input features :obj:`lin` reads: the declared
        one, or for a lazy projection (:obj:`-1`) the size of its first
        input once it has seen one (until then :obj:`-1`: any)."""
        return lin.in_channels if isinstance(lin, Linear) else declared

    def _check_dtype(
        self, x: Tensor, name: str, lin: Optional[torch.nn.Module]
    ) -> None:
        r"""Checks that :obj:`x` has the dtype of the projection that reads
        it (metadata only; not under autocast, which casts itself)."""
        weight = getattr(lin, 'weight', None)
        if (
            weight is None
            or x.dtype == weight.dtype
            or torch.is_autocast_enabled(x.device.type)
        ):
            return
        raise ValueError(
            f"'{name}' has dtype {x.dtype} but the layer's "
            f'parameters {weight.dtype}: convert one to the '
            f'other (layer.to({x.dtype}) or '
            f'{name}.to({weight.dtype}))'
        )

    def __repr__(self) -> str:
        return (
            f'{self.__class__.__name__}({self.in_channels}, '
            f'proj_channels={self.proj_channels}, '
            f'temperature={self.initial_temperature}, '
            f'num_steps={self.num_steps})'
        )
