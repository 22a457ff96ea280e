"""Interim home of the ``subproc`` schemas' cross-field checks: delete it once
``SubprocConfig`` defines them itself.

The rule (:mod:`envfactory.config.checks`) is that a schema checks itself against the top
level in a ``check_config(self, top)`` method, so no config code names a vectorizer.
``SubprocConfig`` lives in ``envfactory/vectorizers/subproc_options.py``, which this change
does not touch; until :func:`subproc_check_config` moves there as
``SubprocConfig.check_config`` (the body as it is, ``self`` the schema object), this module
is the one place in config code that names a vectorizer. ``SubprocAtariConfig`` inherits
the method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import OptionError

__all__ = ["interim_check", "subproc_check_config"]


def subproc_check_config(self: Any, top: Any) -> None:
    """``batch_size`` (the async pool) is at most ``num_envs`` and excludes a parent share;
    ``in_parent`` leaves at least one env to the workers."""
    size = self.batch_size
    if size is not None and self.in_parent:
        raise OptionError(
            "in_parent",
            self.in_parent,
            f"0 or null with vectorizer.batch_size={size} (the async pool steps every env "
            "in a worker)",
            hint="Set vectorizer.in_parent=0 (or null), or vectorizer.batch_size=null",
        )
    if size is not None and size > top.num_envs:
        raise OptionError(
            "batch_size",
            size,
            f"an integer in [1, num_envs={top.num_envs}] or null (null: a synchronous VecEnv)",
            hint=f"Lower vectorizer.batch_size or raise num_envs (now {top.num_envs})",
        )
    if self.in_parent is not None and self.in_parent >= top.num_envs:
        raise OptionError(
            "in_parent",
            self.in_parent,
            f"an integer in [0, num_envs - 1 = {top.num_envs - 1}] or null (auto): the "
            "parent steps that many envs itself, and at least one must be in a worker",
            hint=f"Lower vectorizer.in_parent or raise num_envs (now {top.num_envs}); for "
            "every env in this process, use vectorizer=dummy",
        )


def interim_check(obj: Any) -> Callable[[Any], None] | None:
    """The ``check_config`` a schema object would have, for the subproc schemas."""
    from ..vectorizers.subproc_options import SubprocConfig

    if isinstance(obj, SubprocConfig):
        return lambda top: subproc_check_config(obj, top)
    return None
