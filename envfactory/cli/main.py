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
        interrupted: Ctrl-C stopped the rollout; the numbers cover the steps taken.
    """

    steps: int
    seconds: float
    episodes: int
    mean_return: float | None
    interrupted: bool = False

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
    done_iterations, interrupted = 0, False
    try:
        for _ in range(iterations):
            actions = envs.action_space.sample() if noop is None else noop
            _, _, terminations, truncations, infos = envs.step(actions)
            returns.extend(episode_returns(infos, stats_key))
            done_iterations += 1
            if disabled:
                done = np.logical_or(terminations, truncations)
                if done.any():
                    envs.reset(options={"reset_mask": done})
            bar.update(n)
    except KeyboardInterrupt:  # Ctrl-C: stop here and report what was measured
        interrupted = True
    finally:
        seconds = time.perf_counter() - start
        bar.close()
    mean = float(np.mean(returns)) if returns else None
    return RolloutStats(done_iterations * n, seconds, len(returns), mean, interrupted)


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)


def _settings(cfg: DictConfig) -> dict[str, Any]:
    """What a job was asked to run (best effort: also for a config that failed its checks)."""

    def get(path: str) -> Any:
        try:
            value = OmegaConf.select(cfg, path, default=None)
        except Exception:
            return None
        value = _plain(value)
        return value if value is None or isinstance(value, (int, float, bool)) else str(value)

    family = get("env.family")
    return {
        "env": get("env.id") or family,
        "family": family,
        "vectorizer": get("vectorizer.name"),
        "num_envs": get("num_envs"),
        "autoreset_mode": get("autoreset_mode"),
        "policy": get("run.policy"),
        "seed": get("seed"),
    }


def summarize(cfg: DictConfig, stats: RolloutStats) -> dict[str, Any]:
    """The job's summary; ``status`` is ``ok`` or ``interrupted`` (Ctrl-C: the numbers
    cover the steps taken)."""
    return {
        **_settings(cfg),
        "num_envs": int(cfg.num_envs),
        "status": "interrupted" if stats.interrupted else "ok",
        "steps": stats.steps,
        "seconds": round(stats.seconds, 6),
        "steps_per_second": round(stats.steps_per_second, 1),
        "episodes": stats.episodes,
        "mean_return": None if stats.mean_return is None else round(stats.mean_return, 4),
    }


def format_summary(summary: Mapping[str, Any]) -> str:
    mean = summary["mean_return"]
    rows: list[tuple[str, Any]] = [
        ("env", f"{summary['env']} (family {summary['family']})"),
        ("vectorizer", summary["vectorizer"]),
        ("num_envs", summary["num_envs"]),
        ("steps", summary["steps"]),
        ("seconds", f"{summary['seconds']:.3f}"),
        ("steps/s", f"{summary['steps_per_second']:,.0f}"),
        ("episodes", summary["episodes"]),
        ("mean return", "n/a (no episode finished)" if mean is None else f"{mean:.2f}"),
    ]
    if summary.get("status") == "interrupted":
        rows.append(("status", "interrupted (Ctrl-C): partial numbers"))
    if summary.get("output_dir"):
        rows.append(("saved to", str(Path(summary["output_dir"]) / SUMMARY_FILE)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(["envfactory summary", *(f"  {k:<{width}}  {v}" for k, v in rows)])


def run(cfg: DictConfig) -> dict[str, Any]:
    """The Hydra task: check, build, roll out, summarize. Returns the summary (sweeps use
    it).

    A config mistake prints one line ``envfactory: error: ...`` and exits with status 2;
    an envfactory runtime error (a worker died, ...) prints it and exits with 1. In a ``-m``
    sweep a failing job does not stop the sweep: its ``summary.json`` says ``status:
    failed`` with the one-line ``error`` (and the traceback of an unexpected exception),
    and the sweep table shows it. Ctrl-C stops the rollout, saves the partial summary with
    ``status: interrupted``, prints one line and exits with 130 (a sweep stops too).
    """
    import envfactory
    from envfactory.config import validate

    job = _job_info()
    render = str(_plain(OmegaConf.select(cfg, "run.job", default="rollout"))) == "render"
    try:
        if render:
            from envfactory.cli.render import force_rgb_array

            force_rgb_array(cfg)
        validate(cfg)
        envs = envfactory.make_vec(cfg)
    except KeyboardInterrupt:
        _interrupted(cfg, job, None)
    except Exception as exc:
        return _failed(cfg, job, exc)
    if render:
        return _render(cfg, job, envs)
    try:
        stats = rollout(
            envs,
            int(cfg.run.total_steps),
            policy=str(_plain(cfg.run.policy)),
            seed=cfg.seed,
            progress=bool(cfg.run.progress),
            stats_key=cfg.get("episode_stats_key") or "episode",  # null: gymnasium's own
        )
    except Exception as exc:
        _close(envs)
        return _failed(cfg, job, exc)
    _close(envs)
    summary = summarize(cfg, stats)
    _save(summary, job)
    print(format_summary(summary), flush=True)
    if stats.interrupted:
        _interrupted(cfg, job, summary)
    return summary


def _render(cfg: DictConfig, job: dict[str, Any], envs: Any) -> dict[str, Any]:
    """The render job (:mod:`envfactory.cli.render`): PNG and MP4 into the run dir."""
    from envfactory.cli.render import render_job

    try:
        out = render_job(cfg, envs, Path(job.get("output_dir") or os.getcwd()))
    except KeyboardInterrupt:
        _close(envs)
        _interrupted(cfg, job, None)
    except Exception as exc:
        _close(envs)
        return _failed(cfg, job, exc)
    _close(envs)
    summary: dict[str, Any] = {**_settings(cfg), "job": "render", "status": "ok", **out}
    _save(summary, job)
    w, h = out["image_size"]
    print(
        f"envfactory render: {summary['env']} x{summary['num_envs']}: {out['png']} ({w}x{h}), "
        f"{out['mp4']} ({out['frames']} frames at {out['fps']} fps)",
        flush=True,
    )
    return summary


def _close(envs: Any) -> None:
    try:
        envs.close()
    except KeyboardInterrupt:  # a second Ctrl-C while closing: end the workers now
        envs.close(terminate=True)


def _job_info() -> dict[str, Any]:
    """``overrides``, ``job_num``, ``output_dir`` and whether this job is part of a sweep."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return {}
    hc = HydraConfig.get()
    return {
        # raw strings: an override may hold a ${...} that is not to be resolved here
        "overrides": [str(o) for o in OmegaConf.to_container(hc.overrides.task)],  # type: ignore[union-attr]
        "job_num": 0 if OmegaConf.is_missing(hc.job, "num") else int(hc.job.num),
        "output_dir": str(hc.runtime.output_dir),
        "multirun": hc.mode == RunMode.MULTIRUN,
    }


def _save(summary: dict[str, Any], job: dict[str, Any]) -> None:
    if not job:
        return
    summary.update({k: job[k] for k in ("overrides", "job_num", "output_dir")})
    out = Path(job["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")


def error_line(exc: BaseException) -> str:
    """One line for an error: a config error's message, else ``Type: first line``."""
    from envfactory.errors import ConfigError

    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, ConfigError):
        return " ".join(text.split()) or type(exc).__name__
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _failed(cfg: DictConfig, job: dict[str, Any], exc: Exception) -> dict[str, Any]:
    """Report a failed job: one line on stderr; in a sweep a ``failed`` summary (the sweep
    goes on), else exit 2 (config) or 1 (an envfactory error); re-raise anything else."""
    import traceback

    from envfactory.errors import ConfigError, EnvfactoryError

    line = error_line(exc)
    if not job.get("multirun"):
        if not isinstance(exc, EnvfactoryError):
            raise exc
        print(f"envfactory: error: {line}", file=sys.stderr, flush=True)
        raise SystemExit(2 if isinstance(exc, ConfigError) else 1) from None
    print(f"envfactory: error: job {job.get('job_num')}: {line}", file=sys.stderr, flush=True)
    summary: dict[str, Any] = {**_settings(cfg), "status": "failed", "error": line}
    if not isinstance(exc, ConfigError):
        summary["traceback"] = "".join(traceback.format_exception(exc))
    _save(summary, job)
    return summary


def _interrupted(cfg: DictConfig, job: dict[str, Any], summary: dict[str, Any] | None) -> None:
    """Ctrl-C: save what was measured (``status: interrupted``), one line, exit 130."""
    if summary is None:
        summary = {**_settings(cfg), "status": "interrupted", "steps": 0}
        _save(summary, job)
    where = f"; partial summary saved to {Path(job['output_dir']) / SUMMARY_FILE}" if job else ""
    steps = summary.get("steps", 0)
    print(f"envfactory: interrupted after {steps} steps{where}", file=sys.stderr, flush=True)
    raise SystemExit(130)


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


def version_line() -> str:
    """``envfactory 0.1.0 (hydra-core 1.3.2, gymnasium 1.2.0, Python 3.11.7)``."""
    import importlib.metadata as md
    import platform

    def version(dist: str) -> str:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "?"

    from envfactory import __version__

    deps = ", ".join(f"{d} {version(d)}" for d in ("hydra-core", "gymnasium"))
    return f"envfactory {__version__} ({deps}, Python {platform.python_version()})"


def main() -> None:
    """Console entry point of ``envfactory`` and ``python -m envfactory`` (arguments are
    read from ``sys.argv``).

    Exit status: 0; 1 for a runtime error or a sweep with failed jobs; 2 for a config
    error (one line, no traceback); 130 after Ctrl-C.

    Hydra prints its own composition errors over several lines; ``HYDRA_FULL_ERROR=1``
    (Hydra's documented switch) makes it raise them instead, and they are printed here as
    one line. A user who set ``HYDRA_FULL_ERROR`` gets Hydra's full tracebacks as usual.
    """
    import hydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from envfactory.cli.sweep import SweepSummary
    from envfactory.config.compose import hydra_error
    from envfactory.errors import ConfigError, EnvfactoryError

    if sys.argv[1:2] == ["tune"]:  # `envfactory tune ...`: its own parser, before Hydra
        from envfactory.cli.tune import main as tune

        raise SystemExit(tune(sys.argv[2:]))
    if "--version" in sys.argv[1:]:
        print(version_line())
        return
    try:
        config_path = _load_registry()
    except (EnvfactoryError, FileNotFoundError) as exc:
        print(f"envfactory: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    app = hydra.main(version_base="1.3", config_path=config_path, config_name="config")(run)
    user_wants_tracebacks = bool(os.environ.get("HYDRA_FULL_ERROR"))
    os.environ["HYDRA_FULL_ERROR"] = "1"
    SweepSummary.last = None
    try:
        app()
    except BrokenPipeError:  # `envfactory --help | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        print("envfactory: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except (ConfigError, HydraException, OmegaConfBaseException) as exc:
        if user_wants_tracebacks:
            raise
        err = exc if isinstance(exc, ConfigError) else hydra_error(exc)
        print(f"envfactory: error: {error_line(err)}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        if not user_wants_tracebacks:
            os.environ.pop("HYDRA_FULL_ERROR", None)
    sweep = SweepSummary.last
    if sweep is not None and sweep.failed:
        print(
            f"envfactory: error: {sweep.failed} of {sweep.total} sweep jobs failed "
            f"(see {sweep.table_path})",
            file=sys.stderr,
        )
        raise SystemExit(1)


if __name__ == "__main__":
    main()
