"""The value ranges gymnasium's wrappers check in their constructors, as a schema check.

A wrapper's schema is generated from its ``__init__`` signature (`envfactory.wrappers`),
which gives types, not ranges: ``time_limit`` with ``max_episode_steps: 0`` would pass the
config check and fail when the first env is built (in a worker, as a traceback). The ranges
below are the ones gymnasium 1.x raises for, on values alone (checks that need the env's
spaces stay gymnasium's); the generated schema's ``__post_init__`` checks them, so a bad
value is one [`OptionError`][envfactory.OptionError] at compose time, as for a family's schema.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any

from ..errors import OptionError

__all__ = ["BOUNDS", "Bound", "check_bounds"]


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``< high`` when ``open_high``)."""

    low: float
    high: float = math.inf
    open_high: bool = False
    integer: bool = False

    def expected(self) -> str:
        if self.integer and self.high == math.inf:
            return f"an integer >= {self.low:g}"
        close = ")" if self.open_high else "]"
        return f"a number in [{self.low:g}, {self.high:g}{close}"

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(float(value)):
            return False
        v = float(value)
        return self.low <= v and (v < self.high if self.open_high else v <= self.high)


BOUNDS: dict[str, dict[str, Bound]] = {  # gymnasium class name -> option -> range
    "TimeLimit": {"max_episode_steps": Bound(1, integer=True)},
    "RepeatAction": {"num_repeats": Bound(1, integer=True)},
    "StickyAction": {"repeat_action_probability": Bound(0, 1, open_high=True)},
    "DelayObservation": {"delay": Bound(0, integer=True)},
    "FrameStackObservation": {"stack_size": Bound(1, integer=True)},
    "MaxAndSkipObservation": {"skip": Bound(2, integer=True)},
    "AtariPreprocessing": {
        "frame_skip": Bound(1, integer=True),
        "noop_max": Bound(0, integer=True),
    },
    "ObstructView": {
        "obstructed_pixels_ratio": Bound(0, 1, open_high=True),
        "obstruction_width": Bound(1, integer=True),
    },
}


def check_bounds(obj: Any, bounds: dict[str, Bound]) -> None:
    """Raise [`OptionError`][envfactory.errors.OptionError] for the first field of ``obj`` out of
    its range."""
    for name, bound in bounds.items():
        value = getattr(obj, name, None)
        if value is None or value == "???":  # null, or still to be given (OmegaConf's MISSING)
            continue
        if not bound.holds(value):
            raise OptionError(name, value, bound.expected())
