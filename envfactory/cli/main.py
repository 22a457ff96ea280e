"""The ``envfactory`` command: a Hydra app that builds the configured vectorized env, runs
a rollout and reports throughput and episode statistics.

``envfactory`` with no arguments runs the embedded default (``conf/config.yaml``:
CartPole, 4 envs, 2000 steps). Any override works as in any Hydra app::

    envfactory env=mountaincar num_envs=8 run.total_steps=10000 run.policy=noop
    envfactory -m env=gym,mountaincar num_envs=1,4          # a sweep, ends with one table
    envfactory --config-dir my_exps +experiment=fast          # a config-only experiment

Each job prints a summary and saves it as ``summary.json`` in its Hydra output dir; a
sweep ends with ``sweep_summary.md`` / ``.json`` in the sweep dir
(:mod:`envfactory.cli.sweep`).

Decisions:
    * ``run.total_steps`` counts env steps summed over envs; the rollout runs
      ``ceil(total_steps / num_envs)`` vector steps, and the summary reports the steps
      actually taken (a multiple of ``num_envs``). Timing covers the step loop only (not
      env construction nor the first reset).
    * ``random`` samples the batched action space seeded with ``seed``; ``noop`` is the
      zero action (clipped into a Box's bounds, a Discrete's ``start``).
    * Episodes are counted from envfactory's statistics, ``infos[episode_stats_key]`` with
      its mask (gymnasium's ``infos["episode"]`` when ``episode_stats_key`` is null), and from
      ``infos["final_info"]`` under ``same_step`` autoreset; under ``disabled`` the finished
      envs are reset with ``options={"reset_mask": done}``.
    * The progress bar goes to stderr; it is off with ``run.progress=false`` and when
      stderr is not a terminal.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

__all__ = [
    "SUMMARY_FILE",
    "RolloutStats",
    "episode_returns",
    "main",
    "noop_action",
    "rollout",
    "run",
]

SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class RolloutStats:
    """What a rollout measured.

    Attributes:
        steps: env steps taken, summed over envs.
        seconds: wall time of the step loop.
        episodes: episodes that finished during the rollout.
        mean_return: mean return of those episodes (None when none finished).
    """

    steps: int
    seconds: float
    episodes: int
    mean_return: float | None

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("inf")


def noop_action(space: Any) -> Any:
    """The "do nothing" action of a (batched) gymnasium space: zeros, clipped into a Box's
    bounds; a Discrete/MultiDiscrete's ``start``."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape, dtype=space.dtype), space.low, space.high)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return np.array(space.start, dtype=space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return np.zeros(space.shape, dtype=space.dtype)
    if isinstance(space, spaces.Tuple):
        return tuple(noop_action(s) for s in space.spaces)
    if isinstance(space, spaces.Dict):
        return {k: noop_action(s) for k, s in space.spaces.items()}
    raise TypeError(f"run.policy=noop has no zero action for {space}; use run.policy=random")


def episode_returns(infos: Mapping[str, Any], key: str = "episode_stats") -> list[float]:
    """Returns of the episodes that ended in one step, from ``infos[key]["r"]`` and its
    ``_<key>`` mask (``infos["final_info"]`` too, for ``same_step`` autoreset)."""
    out: list[float] = []
    for source in (infos, infos.get("final_info")):
        if not isinstance(source, Mapping) or key not in source:
            continue
        r = np.asarray(source[key]["r"], dtype=np.float64).reshape(-1)
        mask = np.asarray(source.get(f"_{key}", np.ones(r.shape, dtype=bool)), dtype=bool)
        out.extend(float(x) for x in r[mask.reshape(-1)])
    return out


def rollout(
    envs: Any,
    total_steps: int,
    *,
    policy: str = "random",
    seed: int | None = None,
    progress: bool = False,
    stats_key: str = "episode_stats",
) -> RolloutStats:
    """Reset ``envs`` with ``seed`` and step it for ``total_steps`` env steps (summed over
    envs) with the ``random`` or ``noop`` policy."""
    from gymnasium.vector import AutoresetMode
    from tqdm import tqdm

    if policy not in ("random", "noop"):
        raise ValueError(f"run.policy must be 'random' or 'noop', got {policy!r}")
    n = int(envs.num_envs)
    iterations = max(1, math.ceil(int(total_steps) / n))
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    noop = noop_action(envs.action_space) if policy == "noop" else None
    disabled = str(getattr(envs, "metadata", {}).get("autoreset_mode")) in (
        str(AutoresetMode.DISABLED),
        "disabled",
    )
    returns: list[float] = []
    bar = tqdm(
        total=iterations * n,
        unit="step",
        desc="envfactory",
        disable=None if progress else True,  # None: off when stderr is not a TTY
        file=sys.stderr,
        dynamic_ncols=True,
    )
    start = time.perf_counter()
    try:
        for _ in range(iterations):
            actions = envs.action_space.sample() if noop is None else noop
            _, _, terminations, truncations, infos = envs.step(actions)
            returns.extend(episode_returns(infos, stats_key))
            if disabled:
                done = np.logical_or(terminations, truncations)
                if done.any():
                    envs.reset(options={"reset_mask": done})
            bar.update(n)
    finally:
        seconds = time.perf_counter() - start
        bar.close()
    mean = float(np.mean(returns)) if returns else None
    return RolloutStats(iterations * n, seconds, len(returns), mean)


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)


def summarize(cfg: DictConfig, stats: RolloutStats) -> dict[str, Any]:
    family = str(cfg.env.family)
    return {
        "env": str(cfg.env.get("id", family)),
        "family": family,
        "vectorizer": str(cfg.vectorizer.name),
        "num_envs": int(cfg.num_envs),
        "autoreset_mode": str(_plain(cfg.autoreset_mode)),
        "policy": str(_plain(cfg.run.policy)),
        "seed": cfg.seed,
        "steps": stats.steps,
        "seconds": round(stats.seconds, 6),
        "steps_per_second": round(stats.steps_per_second, 1),
        "episodes": stats.episodes,
        "mean_return": None if stats.mean_return is None else round(stats.mean_return, 4),
    }


def format_summary(summary: Mapping[str, Any]) -> str:
    mean = summary["mean_return"]
    rows = [
        ("env", f"{summary['env']} (family {summary['family']})"),
        ("vectorizer", summary["vectorizer"]),
        ("num_envs", summary["num_envs"]),
        ("steps", summary["steps"]),
        ("seconds", f"{summary['seconds']:.3f}"),
        ("steps/s", f"{summary['steps_per_second']:,.0f}"),
        ("episodes", summary["episodes"]),
        ("mean return", "n/a (no episode finished)" if mean is None else f"{mean:.2f}"),
    ]
    if summary.get("output_dir"):
        rows.append(("saved to", str(Path(summary["output_dir"]) / SUMMARY_FILE)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(["envfactory summary", *(f"  {k:<{width}}  {v}" for k, v in rows)])


def run(cfg: DictConfig) -> dict[str, Any]:
    """The Hydra task: build, roll out, summarize. Returns the summary (sweeps use it)."""
    from hydra.core.hydra_config import HydraConfig

    import envfactory
    from envfactory.config import validate
    from envfactory.errors import ConfigError

    try:  # a config mistake gets one line, not a traceback through envfactory
        validate(cfg)
    except ConfigError as exc:
        print(f"envfactory: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    envs = envfactory.make_vec(cfg)
    try:
        stats = rollout(
            envs,
            int(cfg.run.total_steps),
            policy=str(_plain(cfg.run.policy)),
            seed=cfg.seed,
            progress=bool(cfg.run.progress),
            stats_key=cfg.get("episode_stats_key") or "episode",  # null: gymnasium's own
        )
    finally:
        envs.close()
    summary = summarize(cfg, stats)
    if HydraConfig.initialized():
        hc = HydraConfig.get()
        out = Path(hc.runtime.output_dir)
        summary["overrides"] = list(hc.overrides.task)
        summary["job_num"] = 0 if OmegaConf.is_missing(hc.job, "num") else int(hc.job.num)
        summary["output_dir"] = str(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    print(format_summary(summary), flush=True)
    return summary


def _load_registry() -> str:
    """Load plugins and store the config schemas before Hydra composes; plugin load
    warnings are printed as one line each. Returns the conf dir."""
    from envfactory.config import conf_dir
    from envfactory.config.store import use_in_this_app
    from envfactory.errors import PluginLoadWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginLoadWarning)
        use_in_this_app()
    for w in caught:
        if issubclass(w.category, PluginLoadWarning):
            print(f"envfactory: warning: {w.message}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return str(conf_dir())


def main() -> None:
    """Console entry point of ``envfactory`` (arguments are read from ``sys.argv``)."""
    import hydra

    from envfactory.errors import EnvfactoryError

    try:
        config_path = _load_registry()
    except (EnvfactoryError, FileNotFoundError) as exc:
        print(f"envfactory: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    app = hydra.main(version_base="1.3", config_path=config_path, config_name="config")(run)
    try:
        app()
    except BrokenPipeError:  # `envfactory --help | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
