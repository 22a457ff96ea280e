"""The value ranges gymnasium's wrappers check in their constructors, as a schema check.

A wrapper's schema is generated from its ``__init__`` signature (`envfactory.wrappers`),
which gives types, not ranges: ``time_limit`` with ``max_episode_steps: 0`` would pass the
config check and fail when the first env is built (in a worker, as a traceback). The ranges
below are the ones gymnasium 1.x raises for, on values alone (checks that need the env's
spaces stay gymnasium's); the generated schema's ``__post_init__`` checks them, so a bad
value is one [`OptionError`][envfactory.OptionError] at compose time, as for a family's schema.
A pair of options that bound a range (``clip_reward``'s ``min_reward <= max_reward``) is
checked the same way (`ORDERED`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np

from ..errors import OptionError, echo

__all__ = ["BOUNDS", "ORDERED", "Bound", "Ordered", "check_bounds", "check_order"]


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``< high`` when ``open_high``)."""

    low: float
    high: float = math.inf
    open_high: bool = False
    integer: bool = False

    def fix(self) -> str:  # (``{key}``: the option's full path, `OptionError`)
        if self.integer and self.high == math.inf:
            return f"Set {{key}}={self.low:g} or more"
        return f"Set {{key}} to {self.expected()}"

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


@dataclass(frozen=True)
class Ordered:
    """Two options of a wrapper that bound a range, ``low <= high`` (element by element for
    lists), at least one of them given: gymnasium's ``ClipReward`` raises ``InvalidBound``
    for ``max_reward < min_reward`` and for both None (its vector counterpart builds one)."""

    low: str
    high: str
    wrapper: str


ORDERED: dict[str, Ordered] = {  # gymnasium class name -> its pair of bounds
    "ClipReward": Ordered("min_reward", "max_reward", "ClipReward"),
}


def check_order(obj: Any, pair: Ordered) -> None:
    """Raise [`OptionError`][envfactory.errors.OptionError] when ``obj``'s two bounds are both
    null, or the high one is below the low one (values numpy cannot compare are left to the
    wrapper)."""
    low, high = getattr(obj, pair.low, None), getattr(obj, pair.high, None)
    rule = f"gymnasium's {pair.wrapper} needs"
    if low is None and high is None:
        raise OptionError(
            pair.low,
            None,
            f"a number when {pair.high} is null too",
            hint=f"{rule} one bound at least: set {pair.low}, {pair.high} or both",
        )
    if low is None or high is None or "???" in (low, high):
        return
    try:
        below = bool(np.any(np.asarray(high, dtype=float) - np.asarray(low, dtype=float) < 0))
    except (TypeError, ValueError):  # strings, ragged lists: gymnasium says what is wrong
        return
    if below:
        each = "" if np.ndim(low) == np.ndim(high) == 0 else " element by element"
        raise OptionError(
            pair.high,
            high,
            f"a number >= {echo(low, quote=False)} (its {pair.low}){each}",
            hint=f"{rule} {pair.low} <= {pair.high}: swap them, or change one",
        )


def check_bounds(obj: Any, bounds: dict[str, Bound]) -> None:
    """Raise [`OptionError`][envfactory.errors.OptionError] for the first field of ``obj`` out of
    its range."""
    for name, bound in bounds.items():
        value = getattr(obj, name, None)
        if value is None or value == "???":  # null, or still to be given (OmegaConf's MISSING)
            continue
        if not bound.holds(value):
            raise OptionError(name, value, bound.expected(), hint=bound.fix())
