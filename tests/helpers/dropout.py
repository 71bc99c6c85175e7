r"""What attention dropout drew, for the tests that compare a layer with
dropout to the float64 reference."""

from typing import List, Tuple

import torch.nn.functional as F
from torch import Tensor


def record_dropout(monkeypatch) -> List[Tuple[Tensor, Tensor]]:
    r"""Every :func:`torch.nn.functional.dropout` call from now on (for the
    rest of the test), as (input, output)."""
    drawn, dropout = [], F.dropout

    def recording(input, p=0.5, training=True, inplace=False):
        out = dropout(input, p, training, inplace)
        drawn.append((input.detach(), out.detach()))
        return out

    monkeypatch.setattr(F, 'dropout', recording)
    return drawn


def dropout_scale(before: Tensor, after: Tensor) -> Tensor:
    r"""What one draw multiplied each entry by: :math:`0` or :math:`1 /
    (1 - p)` (:math:`0` where the input is :math:`0`)."""
    return (after / before.where(before > 0, 1.0)).where(before > 0, 0.0)
