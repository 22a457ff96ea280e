"""Named wrappers: every gymnasium wrapper that can be built from config values,
registered by its snake_case class name through the ``envfactory_wrappers`` hook (its
implementation is in `builtin`).

A wrapper whose constructor needs a value a config cannot hold (a function, a space) is
left out. The schema of each is generated from its ``__init__`` signature: plain
``int``/``float``/``bool``/``str`` (optional or not) parameters are typed, others are
``Any``, required ones are ``MISSING``; the ranges gymnasium checks on values alone
(``time_limit``'s ``max_episode_steps >= 1``, ...) are checked too (`bounds`).

Nothing heavy is imported to build the registry: the wrappers gymnasium itself loads only
on first access (``numpy_to_torch``, ``jax_to_numpy``, ``array_conversion``, ..., which
import torch, jax or array-api-compat) are registered by name from the module's
``__all__`` without touching them, and wrap a `LazyWrapper`. Their class, and
the schema that checks their options, are loaded when a config first names one (at
compose time, in the parent), so ``make_vec`` of an env that does not use them imports
neither torch nor jax (importing torch costs seconds and hundreds of MiB per process).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import re
import typing
from typing import Any, Optional

from omegaconf import MISSING

from .. import _compat
from ..plugin.types import WrapperPlugin
from .bounds import BOUNDS, ORDERED, check_bounds, check_order

__all__ = ["LIBRARY_DEFAULT", "LazyWrapper", "gymnasium_wrappers", "snake_case"]

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


def _params(cls: type) -> list[inspect.Parameter] | None:
    """The options of ``cls.__init__`` (after ``self, env``), or None when a config cannot
    hold one of them (a required callable, space or env; a default of another kind)."""
    init = cls.__dict__.get("__init__") or cls.__init__  # type: ignore[misc]
    out = []
    for p in list(inspect.signature(init).parameters.values())[2:]:  # self, env
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = p.default
        if default is p.empty:
            if any(u in str(p.annotation) for u in _UNBUILDABLE):
                return None
        elif not (
            callable(default)
            or isinstance(default, (list, dict, tuple, set))
            or default is None
            or isinstance(default, _SIMPLE)
        ):
            return None
        out.append(p)
    return out


def _buildable(cls: type) -> bool:
    try:
        return _params(cls) is not None
    except (TypeError, ValueError):
        return False


def _schema(cls: type) -> type | None:
    """A dataclass schema from ``cls.__init__``, or None when it needs unbuildable values."""
    params = _params(cls)
    if params is None:
        return None
    init = cls.__dict__.get("__init__") or cls.__init__  # type: ignore[misc]
    try:
        hints = typing.get_type_hints(init)
    except Exception:
        hints = {}
    fields: list[tuple[str, Any, Any]] = []
    for p in params:
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
        else:  # None or a simple value
            if default is None and ftype is not Any and ftype in _SIMPLE:
                ftype = Optional[ftype]  # noqa: UP045
            fields.append((p.name, ftype, dataclasses.field(default=default)))
    bounds, pair = BOUNDS.get(cls.__name__, {}), ORDERED.get(cls.__name__)
    namespace = None
    if bounds or pair:  # gymnasium's own range checks, at compose time (see .bounds)

        def __post_init__(self: Any) -> None:
            check_bounds(self, bounds)
            if pair is not None:
                check_order(self, pair)

        namespace = {"__post_init__": __post_init__}
    return dataclasses.make_dataclass(f"{cls.__name__}Config", fields, namespace=namespace)


@functools.cache
def _tuple_params(cls: type) -> frozenset[str]:
    init = cls.__dict__.get("__init__") or cls.__init__  # type: ignore[misc]
    params = inspect.signature(init).parameters.values()
    return frozenset(p.name for p in params if isinstance(p.default, tuple) or p.name in ("shape",))


def _construct(cls: type, env: Any, **options: Any) -> Any:
    """Build ``cls(env, **options)`` passing only what the library can take as set: options
    still at `LIBRARY_DEFAULT` are left out, lists go back to tuples where the
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


def _skipped_name(name: str) -> bool:
    """gymnasium's base classes for writing wrappers (``ObservationWrapper``, ...)."""
    return name.startswith(("Vector", "Observation", "Action", "Reward")) and name.endswith(
        "Wrapper"
    )


def _summary(cls: type, name: str) -> str:
    doc = (inspect.getdoc(cls) or "").strip().splitlines()
    return (doc[0] if doc else f"gymnasium {name}")[:100]


def _records(module: Any, base: type, vector: bool) -> list[WrapperPlugin]:
    """A record per config-buildable wrapper class of ``module``, each with its schema made
    when a config names it (`LazyWrapper`): the ~50 schemas cost ~25 ms at every start,
    and a config names one or two (issue 28, start-up)."""
    out = []
    loaded = vars(module)
    for name in sorted(getattr(module, "__all__", [])):
        if name not in loaded:  # loaded on first access by the module's __getattr__
            if not _skipped_name(name):
                out.append(_lazy_record(module, name, vector))
            continue
        cls = loaded[name]
        if not (isinstance(cls, type) and issubclass(cls, base)) or cls is base:
            continue
        if _skipped_name(name) or not _buildable(cls):
            continue
        out.append(
            WrapperPlugin(
                snake_case(name),
                LazyWrapper(module.__name__, name),
                None,
                vector=vector,
                summary=_summary(cls, name),
            )
        )
    return out


class LazyWrapper:
    """The ``wrap`` of a gymnasium wrapper, whose schema is made on first use.

    Registering it imports nothing and builds no schema: a class gymnasium loads only on
    first access (and with it torch, jax, ...) is imported, and the schema made, when
    `envfactory_config` or the call needs it. envfactory calls
    ``wrap.envfactory_config()`` when a config names the wrapper (at compose time, in the
    parent) to get the schema that checks its options: the protocol for a ``WrapperPlugin``
    whose ``config`` is ``None`` and whose schema is costly to know.

    Args:
        module: the module whose attribute the class is (``gymnasium.wrappers``).
        attr: the class name (``NumpyToTorch``).
    """

    def __init__(self, module: str, attr: str) -> None:
        self.module, self.attr = module, attr

    def load(self) -> type:
        """The wrapper class (imports it and what it needs)."""
        cls: type = getattr(importlib.import_module(self.module), self.attr)
        return cls

    def envfactory_config(self) -> type | None:
        """The options schema (None: the wrapper needs values a config cannot hold).

        Raises:
            ConfigError: the class cannot be imported (torch or jax missing, ...).
        """
        return _lazy_schema(self.module, self.attr)

    def __call__(self, env: Any, **options: Any) -> Any:
        return _construct(self.load(), env, **options)

    def __repr__(self) -> str:
        return f"LazyWrapper({self.module}.{self.attr})"


@functools.cache
def _lazy_schema(module: str, attr: str) -> type | None:
    from ..errors import ConfigError

    try:
        cls = LazyWrapper(module, attr).load()
    except Exception as exc:  # ImportError for torch/jax, or whatever the import raises
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        missing = getattr(exc, "name", None)
        fix = f"pip install {missing}" if isinstance(missing, str) and missing else "install it"
        raise ConfigError(
            f"gymnasium's {attr} ({module}.{attr}) cannot be imported: "
            f"{type(exc).__name__}: {text}. It needs an optional dependency: {fix}, or "
            f"remove the wrapper {snake_case(attr)!r} from the config"
        ) from None
    try:
        return _schema(cls)
    except (TypeError, ValueError):
        return None


def _lazy_record(module: Any, name: str, vector: bool) -> WrapperPlugin:
    submodule = _compat.wrapper_submodule(module, name)
    doc = _static_doc(f"{module.__name__}.{submodule}", name) if submodule else ""
    summary = f"{(doc or f'gymnasium {name}')[:80]} (imported on use)"
    return WrapperPlugin(
        snake_case(name),
        LazyWrapper(module.__name__, name),
        None,
        vector=vector,
        summary=summary[:100],
    )


def _static_doc(modname: str, cls_name: str) -> str:
    """First docstring line of class ``cls_name`` in module ``modname``, read from its
    source without importing it ("" if that fails)."""
    try:
        spec = importlib.util.find_spec(modname)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return ""
        with open(spec.origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (ImportError, OSError, SyntaxError, ValueError):
        return ""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            doc = (ast.get_docstring(node) or "").strip().splitlines()
            return doc[0].strip() if doc else ""
    return ""


@functools.lru_cache(maxsize=1)
def gymnasium_wrappers() -> tuple[WrapperPlugin, ...]:
    """Every config-buildable gymnasium wrapper, per-env then vector. Imports nothing
    beyond ``gymnasium.wrappers`` (which ``import gymnasium`` has already done)."""
    import gymnasium
    import gymnasium.wrappers
    import gymnasium.wrappers.vector

    per_env = _records(gymnasium.wrappers, gymnasium.Wrapper, vector=False)
    vector = _records(gymnasium.wrappers.vector, gymnasium.vector.VectorWrapper, vector=True)
    return (*per_env, *vector)
