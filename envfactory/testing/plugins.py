"""Checks a plugin package runs on itself, as installed: found through its entry point,
and stepping bit for bit like envfactory's ``dummy`` vectorizer."""

from __future__ import annotations

import importlib.metadata as md
import re
from collections.abc import Sequence

from ..factory import make_vec
from ..plugin import get_registry
from .rollouts import DEFAULT_IGNORE, assert_rollouts_equal, rollout

__all__ = ["check_entry_point", "check_same_as_dummy"]

_KINDS = ("families", "wrappers", "vector_wrappers", "vectorizers")


def _normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def check_entry_point(
    distribution: str,
    *,
    entry_point: str | None = None,
    families: Sequence[str] = (),
    wrappers: Sequence[str] = (),
    vector_wrappers: Sequence[str] = (),
    vectorizers: Sequence[str] = (),
) -> None:
    """Check that the installed ``distribution`` registers each named record through an
    entry point of the group ``envfactory`` (real discovery, as users get it): the
    distribution has such an entry point (named ``entry_point``, when given), and the
    registry names the distribution, at its installed version, as the provider of every
    name.

    Example:
        ``check_entry_point("envfactory-example", entry_point="envfactory_example",
        families=["pendulum"], wrappers=["scale_reward"], vectorizers=["gym-sync"])``

    Args:
        distribution: the package's distribution name (``[project] name``).
        entry_point: the entry point's name, checked when given.
        families: the env families it registers.
        wrappers: the wrappers it registers.
        vector_wrappers: the vector wrappers it registers.
        vectorizers: the vectorizers it registers.

    Raises:
        AssertionError: naming what is missing or who registers a name instead.
        TypeError: no name to check.
    """
    tables = dict(zip(_KINDS, (families, wrappers, vector_wrappers, vectorizers)))
    if not any(tables.values()):
        raise TypeError(
            "check_entry_point: name what the plugin registers, e.g. vectorizers=['my-vec']"
        )
    try:
        version = md.version(distribution)
    except md.PackageNotFoundError:
        raise AssertionError(
            f"{distribution} is not installed: pip install it (pip install -e ./my_plugin) "
            "so that its entry point is what the test finds"
        ) from None
    points = [
        ep
        for ep in md.entry_points(group="envfactory")
        if ep.dist is not None and _normalized(ep.dist.name) == _normalized(distribution)
    ]
    names = sorted(ep.name for ep in points)
    assert points and (entry_point is None or entry_point in names), (
        f"{distribution} {version} has no entry point "
        f"{entry_point or ''!s} in the group 'envfactory' (it has {names or 'none'}); "
        "add [project.entry-points.envfactory] my_plugin = 'my_plugin.plugin' to its "
        "pyproject.toml and reinstall it"
    )
    registry = get_registry()
    for kind, wanted in tables.items():
        table = getattr(registry, kind)
        for name in wanted:
            entry = table.get(name)
            assert entry is not None, (
                f"{kind} {name!r} is not registered (registered: {sorted(table)}); "
                f"does {distribution}'s envfactory_{kind} hook return it?"
            )
            provider = entry.provider
            assert (_normalized(provider.distribution), provider.version) == (
                _normalized(distribution),
                version,
            ), f"{kind} {name!r} comes from {provider}, not from {distribution} {version}"


def check_same_as_dummy(
    overrides: Sequence[str],
    vectorizer: str,
    *,
    steps: int = 60,
    seed: int = 7,
    ignore: Sequence[str] = DEFAULT_IGNORE,
) -> None:
    """Check that ``vectorizer`` gives bit-identical rollouts (observations, rewards, flags,
    infos) to envfactory's ``dummy`` for the same config, seed and actions.

    ``dummy`` runs ``overrides`` without their ``vectorizer.*`` options; ``vectorizer``
    runs all of them.

    Example:
        ``check_same_as_dummy(["num_envs=5", "vectorizer.in_series=2"], "threads")``

    Args:
        overrides: config overrides of both runs (``env=...``, ``num_envs=...``,
            ``autoreset_mode=...``, and ``vectorizer.<option>=...`` for ``vectorizer``).
        vectorizer: the vectorizer under test.
        steps: steps of each rollout.
        seed: the seed of the first ``reset`` (actions are sampled with seed 0).
        ignore: info path suffixes that may differ (default: episode wall-clock time).

    Raises:
        AssertionError: naming the first record that differs.
    """
    key = re.compile(r"^[+~]*vectorizer(\.|=|$)")
    plain = [o for o in overrides if not key.match(o)]
    runs = []
    for over in ([*plain, "vectorizer=dummy"], [f"vectorizer={vectorizer}", *overrides]):
        envs = make_vec(overrides=over)
        try:
            runs.append(rollout(envs, steps=steps, seed=seed))
        finally:
            envs.close()
    assert_rollouts_equal(runs[0], runs[1], ignore)
