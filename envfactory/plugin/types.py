"""Registration records returned by envfactory's hooks.

The ``Plugin`` suffix keeps them apart from gymnasium's ``Wrapper`` and ``VectorEnv``.
Each record is a frozen dataclass: a plugin returns a list of them from a hook and the
plugin manager checks, attributes and indexes them (see `envfactory.plugin.manager`).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["EnvFamilyPlugin", "PluginRecord", "VectorizerPlugin", "WrapperPlugin"]

_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")  # whole name: fullmatch, no "gym\n"


def _check_common(kind: str, name: Any, fn: Any, fn_field: str, config: Any) -> None:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"{kind} name {name!r} is not valid: use letters, digits, '_' or '-', starting "
            "with a letter (it becomes a Hydra config name)"
        )
    if not callable(fn):
        raise TypeError(f"{kind} {name!r}: {fn_field} must be callable, got {fn!r}")
    if config is not None and not (isinstance(config, type) and dataclasses.is_dataclass(config)):
        raise TypeError(
            f"{kind} {name!r}: config must be a dataclass class (the schema), got {config!r}"
        )
    if config is not None:
        _check_fields(kind, name, fn, fn_field, config)


def _check_fields(kind: str, name: str, fn: Any, fn_field: str, config: type) -> None:
    """Every field of a schema (but the ``family``/``name`` it is picked by) is a keyword
    ``fn`` takes: a field it does not take would fail only when an env is built."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # (a builtin without a signature: not checkable)
        return
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    takes = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    extra = [
        f.name
        for f in dataclasses.fields(config)
        if f.init and f.name not in ("family", "name") and f.name not in takes
    ]
    if extra:
        raise TypeError(
            f"{kind} {name!r}: config field(s) {', '.join(extra)} are not parameters of "
            f"{fn_field} (it takes {', '.join(takes) or 'none'}); add them to "
            f"{fn_field}'s parameters (or **kwargs) or remove them from the schema"
        )


def _check_autoreset_mode(name: str, build: Any) -> None:
    """``build`` takes ``autoreset_mode`` (a parameter of that name or ``**kwargs``):
    every build is called with it, so one that cannot take it would fail only when an env
    is built (``build() got an unexpected keyword argument 'autoreset_mode'``)."""
    try:
        params = inspect.signature(build).parameters.values()
    except (TypeError, ValueError):  # (a builtin without a signature: not checkable)
        return
    if any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "autoreset_mode" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in params
    ):
        return
    takes = [p.name for p in params if p.kind is not p.VAR_POSITIONAL]
    raise TypeError(
        f"VectorizerPlugin {name!r}: build takes no autoreset_mode parameter (it takes "
        f"{', '.join(takes) or 'none'}), but envfactory calls every build with "
        "autoreset_mode=<gymnasium AutoresetMode>; add an autoreset_mode parameter (e.g. "
        "autoreset_mode=AutoresetMode.NEXT_STEP) or **kwargs to build and pass it on to the "
        "VectorEnv it returns"
    )


@dataclass(frozen=True)
class EnvFamilyPlugin:
    """An environment family: ``env=<name>`` in a config.

    Attributes:
        name: the config name (``env=<name>``) and the value of the env node's ``family``.
        make: ``make(**options) -> gymnasium.Env``; ``options`` are the env node's fields
            (without ``family``).
        config: a dataclass schema for the env node; its defaults are the family's defaults.
            It should have a ``family: str = "<name>"`` field (added if missing).
        summary: one line shown by ``envfactory-plugins``.
        preload: modules a worker process imports to build this family's envs beyond
            ``make``'s own module (e.g. ``("ale_py", "cv2")``): a ``subproc`` fork server
            started early imports them once, and every worker forks with them.
    """

    name: str
    make: Callable[..., Any]
    config: type | None = None
    summary: str = ""
    preload: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_common("EnvFamilyPlugin", self.name, self.make, "make", self.config)


@dataclass(frozen=True)
class VectorizerPlugin:
    """A vectorizer: ``vectorizer=<name>`` in a config.

    Attributes:
        name: the config name and the value of the vectorizer node's ``name``.
        build: ``build(env_fns, **options) -> gymnasium.vector.VectorEnv``; ``options`` are
            the vectorizer node's checked fields (without ``name``) plus the top-level
            ``autoreset_mode`` (gymnasium's ``AutoresetMode``: a ``build`` with no such
            parameter and no ``**kwargs`` is refused here, at registration) and ``seeding``
            (``"offset"`` | ``"spawn"``), when ``build`` takes a ``seeding`` parameter or
            ``**kwargs``; one that does not is called without it under ``seeding=offset``
            and refused at compose time under ``seeding=spawn`` (see
            `envfactory.config.Plan.build_options`).
        config: a dataclass schema for the vectorizer node; a cross-field rule (an option
            bounded by ``num_envs``) goes in its ``check_config(self, top)`` (see
            `envfactory.config.checks`).
        summary: one line shown by ``envfactory-plugins``.
        prestart: optional ``prestart(options, modules)``, called when a config's overrides
            pick this vectorizer, before Hydra composes the config: ``options`` are the
            overrides of the vectorizer's own keys (``{"context": "fork"}`` for
            ``vectorizer.context=fork``), ``modules`` what the picked env family's workers
            import (its ``make``'s module and `EnvFamilyPlugin.preload`). For work that can
            start early, off the critical path (``subproc`` starts its fork server). It must
            return at once; what it raises is ignored (the build reports the real error).
    """

    name: str
    build: Callable[..., Any]
    config: type | None = None
    summary: str = ""
    prestart: Callable[[Mapping[str, str], Sequence[str]], None] | None = None

    def __post_init__(self) -> None:
        _check_common("VectorizerPlugin", self.name, self.build, "build", self.config)
        _check_autoreset_mode(self.name, self.build)


@dataclass(frozen=True)
class WrapperPlugin:
    """A named wrapper usable in ``wrappers`` (per env) or ``vector_wrappers`` (``vector=True``).

    Attributes:
        name: the value of ``name`` in a ``wrappers`` list entry.
        wrap: ``wrap(env, **options) -> env`` (a ``gymnasium.Env`` or, with ``vector=True``,
            a ``gymnasium.vector.VectorEnv``).
        config: a dataclass schema for the options; ``None`` accepts the keyword arguments
            of ``wrap`` (checked against its signature), unless ``wrap`` has a method
            ``envfactory_config()`` returning the schema: envfactory calls it only when a
            config names the wrapper (how gymnasium's torch/jax wrappers stay unimported,
            see `envfactory.wrappers.LazyWrapper`).
        vector: whether this wraps a VectorEnv.
        summary: one line shown by ``envfactory-plugins``.
    """

    name: str
    wrap: Callable[..., Any]
    config: type | None = None
    vector: bool = False
    summary: str = ""

    def __post_init__(self) -> None:
        _check_common("WrapperPlugin", self.name, self.wrap, "wrap", self.config)


PluginRecord = EnvFamilyPlugin | VectorizerPlugin | WrapperPlugin
