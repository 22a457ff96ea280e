"""Named wrappers: every gymnasium wrapper that can be built from config values,
registered by its snake_case class name through the ``envfactory_wrappers`` hook.

A wrapper whose constructor needs a value a config cannot hold (a function, a space) is
left out. The schema of each is generated from its ``__init__`` signature: plain
``int``/``float``/``bool``/``str`` (optional or not) parameters are typed, others are
``Any``, required ones are ``MISSING``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from typing import Any, Optional

from omegaconf import MISSING

from ..plugin.spec import hookimpl
from ..plugin.types import WrapperPlugin

__all__ = ["envfactory_wrappers", "gymnasium_wrappers", "snake_case"]

_SIMPLE = (int, float, bool, str)
LIBRARY_DEFAULT = "<library default>"
"""Schema default of a wrapper option whose library default a config cannot hold (a
callable): the option is then not passed, so the wrapped class keeps its own default."""

# Constructor parameters that configs cannot hold (callables, spaces, envs).
_UNBUILDABLE = ("Callable", "Space", "Env", "function", "Wrapper", "type[")


def snake_case(name: str) -> str:
    """``RecordEpisodeStatistics`` -> ``record_episode_statistics``; ``RescaleAction`` ->
    ``rescale_action``; ``AtariPreprocessing`` -> ``atari_preprocessing``."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def _field_type(annotation: Any) -> Any:
    if annotation in _SIMPLE:
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(args) == 1 and args[0] in _SIMPLE and type(None) in typing.get_args(annotation):
        return Optional[args[0]]  # noqa: UP045
    return Any


def _const(value: Any) -> Any:
    return lambda: value


def _schema(cls: type) -> type | None:
    """A dataclass schema from ``cls.__init__``, or None when it needs unbuildable values."""
    init = cls.__dict__.get("__init__") or cls.__init__  # type: ignore[misc]
    sig = inspect.signature(init)
    try:
        hints = typing.get_type_hints(init)
    except Exception:
        hints = {}
    fields: list[tuple[str, Any, Any]] = []
    for p in list(sig.parameters.values())[2:]:  # self, env
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        text = str(p.annotation)
        if p.default is p.empty and any(u in text for u in _UNBUILDABLE):
            return None
        ftype = _field_type(hints.get(p.name, Any))
        default = p.default
        if default is p.empty:
            fields.append((p.name, ftype, dataclasses.field(default=MISSING)))
        elif callable(default) or isinstance(default, (list, dict, tuple, set)):
            value = list(default) if isinstance(default, (list, tuple, set)) else default
            if callable(value):
                # a config cannot hold the callable: the field says "keep gymnasium's
                # default", and _construct then leaves the argument out (an explicit null
                # still reaches gymnasium as None)
                fields.append((p.name, Any, dataclasses.field(default=LIBRARY_DEFAULT)))
            else:
                fields.append((p.name, Any, dataclasses.field(default_factory=_const(value))))
        elif default is None or isinstance(default, _SIMPLE):
            if default is None and ftype is not Any and ftype in _SIMPLE:
                ftype = Optional[ftype]  # noqa: UP045
            fields.append((p.name, ftype, dataclasses.field(default=default)))
        else:
            return None
    return dataclasses.make_dataclass(f"{cls.__name__}Config", fields)


@functools.cache
def _tuple_params(cls: type) -> frozenset[str]:
    init = cls.__dict__.get("__init__") or cls.__init__  # type: ignore[misc]
    params = inspect.signature(init).parameters.values()
    return frozenset(
        p.name for p in params if isinstance(p.default, tuple) or p.name in ("shape",)
    )


def _construct(cls: type, env: Any, **options: Any) -> Any:
    """Build ``cls(env, **options)`` passing only what the library can take as set: options
    still at :data:`LIBRARY_DEFAULT` are left out, lists go back to tuples where the
    library's default is a tuple (YAML has no tuples)."""
    tuples = _tuple_params(cls)
    kwargs = {}
    for k, v in options.items():
        if isinstance(v, str) and v == LIBRARY_DEFAULT:
            continue
        if isinstance(v, list) and k in tuples:
            v = tuple(v)
        kwargs[k] = v
    return cls(env, **kwargs)


def _records(module: Any, base: type, vector: bool) -> list[WrapperPlugin]:
    out = []
    for name in sorted(getattr(module, "__all__", [])):
        try:
            cls = getattr(module, name, None)
        except ImportError:  # needs an optional dependency (jax, torch, array-api-compat)
            continue
        if not (isinstance(cls, type) and issubclass(cls, base)) or cls is base:
            continue
        if name.startswith(("Vector", "Observation", "Action", "Reward")) and name.endswith(
            "Wrapper"
        ):
            continue
        try:
            schema = _schema(cls)
        except (TypeError, ValueError):
            schema = None
        if schema is None:
            continue
        doc = (inspect.getdoc(cls) or "").strip().splitlines()
        out.append(
            WrapperPlugin(
                snake_case(name),
                functools.partial(_construct, cls),
                schema,
                vector=vector,
                summary=(doc[0] if doc else f"gymnasium {name}")[:100],
            )
        )
    return out


@functools.lru_cache(maxsize=1)
def gymnasium_wrappers() -> tuple[WrapperPlugin, ...]:
    """Every config-buildable gymnasium wrapper, per-env then vector."""
    import gymnasium
    import gymnasium.wrappers
    import gymnasium.wrappers.vector

    per_env = _records(gymnasium.wrappers, gymnasium.Wrapper, vector=False)
    vector = _records(gymnasium.wrappers.vector, gymnasium.vector.VectorWrapper, vector=True)
    return (*per_env, *vector)


@hookimpl
def envfactory_wrappers() -> list[WrapperPlugin]:
    return list(gymnasium_wrappers())
