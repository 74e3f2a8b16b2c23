"""Learning-rate scaling when the total batch grows from M0 to M (Pollux's SCALE_LR plug-in).

* ``adascale`` (SGD; Johnson et al., ICML'20): the gain ``r = (sigma^2 + mu^2) /
  (sigma^2 / S + mu^2)`` with ``S = M / M0``, ``sigma^2 = tr(Sigma)/M0`` the gradient
  variance at M0 and ``mu^2 = |G|^2``. Dividing by ``mu^2`` gives ``r = S (phi + M0) /
  (phi + M) = S x E(M)``: the scale times Pollux's statistical efficiency, so it is
  computed from `gavel_ng.elastic.efficiency` with the measured noise scale. r is 1 at
  M0 and tends to S when the gradient is all noise.
* ``sqrt`` (Adam and its kin): ``sqrt(M / M0)``.
* ``linear``: ``M / M0``.
* ``none``: 1 (the job keeps M0).
"""

from __future__ import annotations

import math

from gavel_ng.elastic.efficiency import LR_SCALING_RULES, efficiency
from gavel_ng.errors import InputError


def lr_factor(rule: str, batch: float, init_batch: float, phi: float | None = None) -> float:
    """The factor the base learning rate is multiplied by at total batch ``batch``."""
    if rule not in LR_SCALING_RULES:
        raise InputError("lr_scaling", rule, f"must be one of {', '.join(LR_SCALING_RULES)}")
    if not (batch > 0 and init_batch > 0):
        raise InputError("batch", batch, f"batch and init_batch ({init_batch}) must be > 0")
    scale = batch / init_batch
    if rule == "adascale":
        if phi is None:          # no noise estimate yet: AdaScale's gain is unknown, keep the base LR
            return 1.0
        return scale * efficiency(batch, init_batch, phi)
    if rule == "sqrt":
        return math.sqrt(scale)
    if rule == "linear":
        return scale
    return 1.0
