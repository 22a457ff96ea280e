"""Compose one env or one vectorized env from a config.

Order (as gymnasium's ``make_vec``): resolve the family, make each env, add episode
statistics, apply ``wrappers`` in order, vectorize, apply ``vector_wrappers`` in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

import gymnasium as gym
from gymnasium.vector import VectorEnv

from .episode_stats import DEFAULT_KEY, EpisodeStatistics
from .errors import ConfigError, EnvfactoryError, echo_within

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from .config.plan import Plan

# (the config modules, and Hydra with them, are imported by the functions that compose:
# a worker process unpickles EnvThunk from this module and needs none of them)

__all__ = ["EnvThunk", "env_thunks", "make_env", "make_vec"]


def find_wrapper(env: gym.Env, cls: type) -> Any:
    """The outermost ``cls`` in ``env``'s wrapper chain, or None."""
    while True:
        if isinstance(env, cls):
            return env
        if not isinstance(env, gym.Wrapper):
            return None
        env = env.env


class EpisodeEndProbe(gym.Wrapper):
    """Sits on the family's env (below your wrappers) and remembers whether the family
    itself ended the last step's episode (for Atari, a lost life counts: the family's
    statistics then rightly wait for the real game over)."""

    ended = False

    @property
    def spec(self) -> Any:  # type: ignore[override]  # transparent: not in the recreatable spec
        return self.env.spec

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.ended = bool(terminated or truncated)
        return obs, reward, terminated, truncated, info


class FlushEpisodeStats(gym.Wrapper):
    """Reports the inner [`EpisodeStatistics`][envfactory.EpisodeStatistics] when one of your
    wrappers ends the episode (a ``time_limit`` in ``wrappers``, say), in the same format, so no
    episode's statistics are lost. The returns stay those recorded below your wrappers."""

    def __init__(self, env: gym.Env, stats: EpisodeStatistics, probe: EpisodeEndProbe) -> None:
        super().__init__(env)
        self._stats, self._probe = stats, probe

    @property
    def spec(self) -> Any:  # type: ignore[override]  # transparent: not in the recreatable spec
        return self.env.spec

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        ended_above = (terminated or truncated) and not self._probe.ended
        if ended_above and self._stats.key not in info:
            self._stats.end_episode(info)
        return obs, reward, terminated, truncated, info


@dataclass
class EnvThunk:
    """A picklable zero-argument env constructor (what a vectorizer receives).

    It carries the family's ``make`` and each wrapper's ``wrap`` callables themselves, not
    their names, so a worker process needs no plugin registry; and the gymnasium
    ``EnvSpec`` of ``env.id`` when the parent has one, so ids registered at run time in
    the parent exist in workers under every start method.
    """

    make: Callable[..., gym.Env]
    options: dict[str, Any]
    wrappers: list[tuple[Callable[..., gym.Env], dict[str, Any]]] = field(default_factory=list)
    spec: Any = None
    index: int = 0
    label: str = ""
    stats_key: str | None = DEFAULT_KEY
    wrapper_keys: list[str] = field(default_factory=list)
    """Each wrapper's entry in the config (``wrappers[0] (time_limit)``), which an error of
    its constructor names."""

    def __call__(self) -> gym.Env:
        if self.spec is not None and self.spec.id not in gym.registry:
            _ensure_registered(self.spec)
        env = self.make(**self.options)
        if not isinstance(env, gym.Env):
            raise TypeError(
                f"env family make() for {self.label!r} returned {type(env).__name__}, not a "
                "gymnasium.Env"
            )
        stats = find_wrapper(env, EpisodeStatistics)
        if stats is not None:  # the family placed it (atari: below life loss and clipping)
            stats.key = self.stats_key
        elif self.stats_key is not None:
            env = stats = EpisodeStatistics(env, self.stats_key)
        if stats is None or self.stats_key is None:  # no statistics: the wrappers alone
            return self._wrapped(env)
        if not self.wrappers:
            return env
        env = probe = EpisodeEndProbe(env)
        return FlushEpisodeStats(self._wrapped(env), stats, probe)

    def _wrapped(self, env: gym.Env) -> gym.Env:
        for i, (wrap, kwargs) in enumerate(self.wrappers):
            entry = self.wrapper_keys[i] if i < len(self.wrapper_keys) else f"wrappers[{i}]"
            env = applied(wrap, env, kwargs, entry, f"env {self.label!r}")
        return env


def applied(
    wrap: Callable[..., Any], env: Any, kwargs: Mapping[str, Any], entry: str, what: str
) -> Any:
    """``wrap(env, **kwargs)``; what the wrapper's constructor raises (an image wrapper on
    CartPole: gymnasium's ``ValueError``) is a [`ConfigError`][envfactory.ConfigError] naming
    the config entry, the original exception (its ``__cause__``) and the fix. envfactory's
    own errors pass as they are. A wrapper that would build and then fail on this env
    (`envfactory.wrappers.misfits`: ``atari_preprocessing`` on ``env=atari``) is refused
    the same way, with its own fix; one that needs a render mode says to set
    ``env.render_mode``."""
    from .wrappers.misfits import misfit

    problem = misfit(wrap, env, kwargs)
    if problem is not None:
        raise ConfigError(echo_within(f"{entry} cannot wrap {what}: {problem}"))
    try:
        return wrap(env, **kwargs)
    except EnvfactoryError:
        raise
    except Exception as exc:
        text = " ".join(str(exc).split()).rstrip(".")
        missing = isinstance(exc, (ImportError, gym.error.DependencyNotInstalled))
        fix = (
            "install what it needs, or remove it" if missing else "remove it or change its options"
        )
        if not missing and re.search(r"render[ _]mode", text, re.IGNORECASE):
            fix = "set env.render_mode=rgb_array (every family takes it), or remove it"
        raise ConfigError(
            echo_within(
                f"{entry} cannot wrap {what}: {type(exc).__name__}{': ' + text if text else ''}"
                f"; {fix}"
            )
        ) from exc


def _ensure_registered(spec: Any) -> None:
    """Make ``spec.id`` exist in this process (a worker under spawn/forkserver): import the
    module of a ``module:attr`` entry point first (it may register the id itself, as
    ale_py does), else register the parent's spec."""
    import importlib

    entry = spec.entry_point
    if isinstance(entry, str) and ":" in entry:
        try:
            importlib.import_module(entry.split(":", 1)[0])
        except ImportError:
            pass
    if spec.id not in gym.registry:
        gym.register(**{k: getattr(spec, k) for k in _SPEC_FIELDS})


_SPEC_FIELDS = (
    "id",
    "entry_point",
    "reward_threshold",
    "nondeterministic",
    "max_episode_steps",
    "order_enforce",
    "disable_env_checker",
    "kwargs",
    "additional_wrappers",
    "vector_entry_point",
)


def _parent_spec(env_id: Any) -> Any:
    if not isinstance(env_id, str):
        return None
    try:
        return gym.spec(env_id)
    except Exception:
        return None


def env_thunks(cfg: Plan | DictConfig) -> list[EnvThunk]:
    """One `EnvThunk` per env of a checked plan (a composed config is checked
    first)."""
    from .config.compose import validate
    from .config.plan import Plan

    plan = cfg if isinstance(cfg, Plan) else validate(cfg)
    spec = _parent_spec(plan.env_options.get("id"))
    wraps = [(rec.wrap, dict(opts)) for rec, opts in plan.wrappers]
    keys = [f"wrappers[{i}] ({rec.name})" for i, (rec, _) in enumerate(plan.wrappers)]
    label = str(plan.env_options.get("id", plan.family.name))
    make, options, key = plan.family.make, plan.env_options, plan.stats_key
    return [
        EnvThunk(make, dict(options), list(wraps), spec, i, label, key, list(keys))
        for i in range(plan.num_envs)
    ]


Config = Union["Plan", "DictConfig", Mapping[str, Any], None]


def make_env(
    cfg: Config = None, *, overrides: Sequence[str] | None = None, **options: Any
) -> gym.Env:
    """One fully wrapped ``gymnasium.Env`` (env 0 of the config).

    Args:
        cfg: as [`make_vec`][envfactory.make_vec]'s.
        overrides: Hydra overrides, when ``cfg`` is None (or a dict).
        **options: config keys, as [`make_vec`][envfactory.make_vec]'s (``num_envs`` is
            read and ignored: this is one env). So ``make_env`` is also a gymnasium
            ``entry_point`` and an RLlib env creator for RLlib's default vectorization.

    Example:
        >>> import envfactory
        >>> env = envfactory.make_env(overrides=["env=mountaincar"])
        >>> env.observation_space.shape
        (8,)
    """
    from .config.compose import resolve

    plan = resolve(cfg, overrides, options)
    if plan.vector_wrappers:
        _warn_vector_wrappers_unused(plan)
    return env_thunks(plan)[0]()


def _warn_vector_wrappers_unused(plan: Plan) -> None:
    """``make_env`` builds one env, so a config's ``vector_wrappers`` (which wrap
    ``make_vec``'s VectorEnv) are not applied: a warning, not an error, since one config
    shared by ``make_vec`` (training) and ``make_env`` (evaluation) is common. A vector
    wrapper that has a per-env twin of its name is named as the fix."""
    import warnings

    from .plugin.manager import get_registry

    names = [rec.name for rec, _ in plan.vector_wrappers]
    twins = [n for n in names if n in get_registry().wrappers]
    fix = f"; for one env use the per-env wrappers=[{', '.join(twins)}]" if twins else ""
    warnings.warn(
        f"envfactory: make_env builds one env, so vector_wrappers ({', '.join(names)}) are "
        f"not applied (they wrap make_vec's VectorEnv){fix}",
        UserWarning,
        stacklevel=3,
    )


def make_vec(
    cfg: Config = None, *, overrides: Sequence[str] | None = None, **options: Any
) -> VectorEnv:
    """Build the vectorized env a config describes.

    The config is checked once (`envfactory.config.validate`), into a plan that this
    function then builds: the env constructors, ``vectorizer.build(env_fns, **options)``
    with the node's options and the top-level ``autoreset_mode`` and ``seeding``
    (`build_options`), then ``vector_wrappers``.

    Args:
        cfg: a composed DictConfig (``envfactory.compose(...)``, or the ``envfactory`` node
            of your own Hydra app), a plain dict, a plan from
            ``envfactory.config.validate(cfg)``, or None.
        overrides: Hydra overrides (a list of strings), when ``cfg`` is None (or a dict).
        **options: config keys, read as a plain dict is (they win over it): ``num_envs=4``,
            ``env="atari"`` / ``vectorizer="subproc"`` (a string picks the config group
            option, as the override ``env=atari``), ``vectorizer={"in_series": 2}`` (a dict
            sets a node's options), ``**{"env.id": "Acrobot-v1"}`` (a dotted key sets one
            option), and gymnasium's ``render_mode`` (``env.render_mode``) and
            ``max_episode_steps`` (a ``time_limit`` wrapper). So ``make_vec`` is a
            gymnasium ``vector_entry_point``: ``gym.register("MyEnvs-v0",
            vector_entry_point=envfactory.make_vec)``, then ``gym.make_vec("MyEnvs-v0",
            num_envs=4, vectorization_mode="vector_entry_point", vectorizer="subproc")``
            (`envfactory.config.keywords`; an unknown key is one `ConfigError`).

    Example:
        >>> import envfactory
        >>> with envfactory.make_vec(overrides=["num_envs=2"]) as envs:
        ...     obs, infos = envs.reset(seed=42)
        >>> obs.shape
        (2, 4)
    """
    _refuse_rllib_single_env(cfg, options)
    if cfg is None and isinstance(overrides, (list, tuple)):
        _prestart_builtin([*overrides, *(f"{k}={v}" for k, v in options.items() if type(v) is str)])
    from .config.compose import resolve

    plan = resolve(cfg, overrides, options)
    vec = plan.vectorizer
    envs = vec.build(env_thunks(plan), **plan.build_options())
    try:
        return _finish(envs, plan)
    except BaseException:
        if hasattr(envs, "close"):
            envs.close()  # no worker outlives a failed make_vec
        raise


def _prestart_builtin(overrides: Sequence[str]) -> None:
    """`envfactory.config.prestart.prestart` with envfactory's own vectorizers and families,
    read from their hooks: before Hydra is imported and the plugins are read, so that the
    fork server boots while the config is composed."""
    from .config.prestart import prestart
    from .families.builtin import envfactory_env_families
    from .vectorizers.builtin import envfactory_vectorizers

    vectorizers = {rec.name: rec for rec in envfactory_vectorizers()}
    prestart(overrides, vectorizers, {rec.name: rec for rec in envfactory_env_families()})


def _refuse_rllib_single_env(cfg: Any, options: Mapping[str, Any]) -> None:
    """RLlib (new API stack) calls a registered env creator with its ``EnvContext`` for one
    env (``gym_env_vectorize_mode`` ``sync`` / ``async``: gymnasium then vectorizes) and with a
    plain dict that holds ``num_envs`` for a vectorized one (``vector_entry_point``). Asked
    for one env, say what to set, rather than gymnasium's "must inherit from gymnasium.Env"."""
    kind = type(cfg)
    if kind.__name__ != "EnvContext" or not kind.__module__.startswith("ray.rllib") or options:
        return
    raise ConfigError(
        "RLlib asked envfactory.make_vec for one env (RLlib's gym_env_vectorize_mode "
        "'sync'/'async' vectorizes with gymnasium itself): set "
        "config.env_runners(gym_env_vectorize_mode='vector_entry_point') so that envfactory "
        "vectorizes, or register envfactory.make_env as the env creator "
        "(docs/guides/rllib.md)"
    )


def _finish(envs: Any, plan: Plan) -> VectorEnv:
    if not isinstance(envs, VectorEnv):
        raise TypeError(
            f"vectorizer {plan.vectorizer.name!r} returned {type(envs).__name__}, not a "
            "gymnasium.vector.VectorEnv"
        )
    if not hasattr(envs, "__enter__"):  # gymnasium's VectorEnv is no context manager
        envs = ClosingVectorEnv(envs)
    what = (
        f"the vector env (vectorizer {plan.vectorizer.name!r}, {plan.num_envs} envs of "
        f"{str(plan.env_options.get('id', plan.family.name))!r})"
    )
    for i, (rec, opts) in enumerate(plan.vector_wrappers):
        envs = applied(rec.wrap, envs, opts, f"vector_wrappers[{i}] ({rec.name})", what)
    return envs


class ClosingVectorEnv(gym.vector.VectorWrapper):
    """Adds the context-manager protocol (and attribute forwarding) to a plugin's VectorEnv
    that lacks it, so ``with envfactory.make_vec(...)`` works for every vectorizer."""

    def __enter__(self) -> ClosingVectorEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.env, name)
