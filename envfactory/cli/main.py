"""The ``envfactory`` command: a Hydra app that builds the configured vectorized env, runs
a rollout and reports throughput and episode statistics.

``envfactory`` with no arguments runs the embedded default (``conf/config.yaml``:
CartPole, 4 envs, 2000 steps). Any override works as in any Hydra app:

    envfactory env=mountaincar num_envs=8 run.total_steps=10000 run.policy=noop
    envfactory -m env=gym,mountaincar num_envs=1,4          # a sweep, ends with one table
    envfactory --config-dir my_exps +experiment=fast          # a config-only experiment
    envfactory --rerun outputs/2024-05-01/12-00-00 seed=1     # a saved job again

Each job prints a summary and saves it as ``summary.json`` in its Hydra output dir; a
sweep ends with ``sweep_summary.md`` / ``.json`` in the sweep dir
(`envfactory.cli.sweep`). The rollout itself is `envfactory.cli.rollout`
(gymnasium's ``step`` loop, or envpool's ``recv``/``send`` loop when
``vectorizer.batch_size`` is set); how failures are reported, `envfactory.cli.report`.

Decisions:
    * ``--rerun RUN_DIR [overrides]`` (also spelled as Hydra's ``--config-dir
      RUN_DIR/.hydra --config-name config``, which Hydra itself cannot do: envfactory's own
      ``config.yaml`` comes first in the search path and shadows the saved one) composes
      the saved job's overrides (``.hydra/overrides.yaml``) and config dirs (``--config-dir``
      of that run, from ``.hydra/hydra.yaml``) again, then the overrides given now; the new
      job gets a new output dir. The saved ``config.yaml`` is the record of what ran; the
      re-run composes today's config files, so it equals the record while they are
      unchanged.
    * The progress bar goes to stderr; it is off with ``run.progress=false`` and when
      stderr is not a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

from envfactory.cli import held
from envfactory.cli.report import (
    SUMMARY_FILE,
    error_line,
    remove_run_dir,
    save_error,
    save_summary,
)
from envfactory.cli.rollout import (
    RolloutStats,
    episode_returns,
    noop_action,
    rollout,
)
from envfactory.cli.run_record import (
    one_line_warnings,
    record_fields,
    record_rows,
    restart_warning,
)
from envfactory.cli.startup import load_registry, release_conflicts

__all__ = [  # the rollout's names stay importable from here (they lived here before)
    "SUMMARY_FILE",
    "RolloutStats",
    "episode_returns",
    "error_line",
    "main",
    "noop_action",
    "rollout",
    "run",
]

_E = TypeVar("_E", bound=BaseException)


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


def built_as(envs: Any) -> str:
    """What the vectorizer built (``auto`` decides when it builds, ``subproc`` splits by the
    cores free then): ``SubprocVecEnv, 2 workers``, ``DummyVecEnv``."""
    inner = getattr(envs, "unwrapped", envs)
    parts = [type(inner).__name__]
    workers = getattr(inner, "workers", None)
    if isinstance(workers, list) and workers:
        parts.append(f"{len(workers)} worker{'s' if len(workers) != 1 else ''}")
    local = getattr(inner, "in_parent", 0)
    if isinstance(local, int) and local > 0:
        parts.append(f"{local} env{'s' if local != 1 else ''} in this process")
    return ", ".join(parts)


def summarize(
    cfg: DictConfig,
    stats: RolloutStats,
    built: str | None = None,
    record: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The job's summary; ``status`` is ``ok`` or ``interrupted`` (Ctrl-C: the numbers
    cover the steps taken); ``built``: what the vectorizer built (`built_as`); ``record``:
    its split and restarts (`envfactory.cli.run_record.record_fields`)."""
    return {
        **_settings(cfg),
        **({"built": built} if built else {}),
        **(record or {}),
        "num_envs": int(cfg.num_envs),
        "status": "interrupted" if stats.interrupted else "ok",
        "steps": stats.steps,
        "seconds": round(stats.seconds, 6),
        "steps_per_second": round(stats.steps_per_second, 1),
        "episodes": stats.episodes,
        "mean_return": None if stats.mean_return is None else round(stats.mean_return, 4),
    }


NO_RETURNS = "n/a (episode returns not recorded: episode_stats_key is null)"


def format_summary(summary: Mapping[str, Any], *, returns_recorded: bool = True) -> str:
    """The summary as the job prints it. ``returns_recorded=False``: no statistics key
    recorded returns (``episode_stats_key=null``), so the mean return line says why."""
    mean = summary["mean_return"]
    no_mean = "n/a (no episode finished)" if returns_recorded else NO_RETURNS
    built = f" ({summary['built']})" if summary.get("built") else ""
    rows: list[tuple[str, Any]] = [
        ("env", f"{summary['env']} (family {summary['family']})"),
        ("vectorizer", f"{summary['vectorizer']}{built}"),
        ("num_envs", summary["num_envs"]),
        ("steps", summary["steps"]),
        ("seconds", f"{summary['seconds']:.3f}"),
        ("steps/s", f"{summary['steps_per_second']:,.0f}"),
        ("episodes", summary["episodes"]),
        ("mean return", no_mean if mean is None else f"{mean:.2f}"),
        *record_rows(summary),
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
    any other failure (a worker died, an env raised under ``dummy``, ...) prints one line
    and exits with 1, its tracebacks saved in ``error.txt`` in the run dir, whose path the
    line names. In a ``-m`` sweep a failing job does not stop the sweep: its ``summary.json``
    says ``status: failed`` with the one-line ``error`` (and the traceback of an unexpected
    exception), and the sweep table shows it. Ctrl-C stops the rollout, saves the partial
    summary with ``status: interrupted``, prints one line and exits with 130 (a sweep
    stops too); a Ctrl-C while the envs are built or first reset saves one of 0 steps.
    """
    job = _job_info()
    if held.take():  # a Ctrl-C while Hydra composed this job's config
        _interrupted(cfg, job, None)
    try:
        with one_line_warnings():  # (here too: a launcher may run the job in its own process)
            return _run(cfg, job)
    finally:
        held.resume_holding()


def _run(cfg: DictConfig, job: dict[str, Any]) -> dict[str, Any]:
    from envfactory.cli.sweeper import COMPOSE_ERROR_KEY

    if job and cfg.get(COMPOSE_ERROR_KEY):  # a sweep job whose config did not compose
        return _not_composed(job, str(cfg[COMPOSE_ERROR_KEY]))
    if str(_plain(OmegaConf.select(cfg, "run.job", default="rollout"))) == "render":
        from envfactory.cli.render import headless_sdl

        with headless_sdl():  # also for the workers, which start in make_vec
            return _render(cfg, job)
    envs, failed = _build(cfg, job)
    if failed is not None:
        return failed
    try:
        pooled = OmegaConf.select(cfg, "vectorizer.batch_size", default=None) is not None
        stats_key = cfg.get("episode_stats_key") or None  # null: no envfactory statistics
        stats = rollout(
            envs,
            int(cfg.run.total_steps),
            policy=str(_plain(cfg.run.policy)),
            seed=cfg.seed,
            progress=bool(cfg.run.progress),
            stats_key=stats_key,
            pool=pooled,
        )
    except KeyboardInterrupt:  # before the first step (the first reset, where an Atari
        # env's workers load its ROM): 0 steps, as in _build; later, the rollout's own
        _close(envs, now=True)
        _interrupted(cfg, job, None)
        raise  # not reached: _interrupted exits
    except Exception as exc:
        record = record_fields(envs)
        _close(envs)
        return _failed(cfg, job, exc, record)
    built, record = built_as(envs), record_fields(envs)
    _close(envs)
    summary = summarize(cfg, stats, built, record)
    save_summary(summary, job)
    print(format_summary(summary, returns_recorded=stats.returns_recorded), flush=True)
    saved = str(Path(job["output_dir"]) / SUMMARY_FILE) if job else ""
    if restart_warning(summary, saved):
        print(restart_warning(summary, saved), file=sys.stderr, flush=True)
    if stats.interrupted:
        _interrupted(cfg, job, summary)
    return summary


def _build(cfg: DictConfig, job: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """Check the config and make the envs: ``(envs, None)``, or ``(None, summary)`` of a
    failed job (reported by `_failed`)."""
    import envfactory
    from envfactory.config import validate

    try:
        plan = validate(cfg, presets=_preset_files())
        release_conflicts()  # the config is good: a conflict it does not use is a warning
        return envfactory.make_vec(plan), None  # the checked plan: checked once
    except KeyboardInterrupt:
        _interrupted(cfg, job, None)
        raise  # not reached: _interrupted exits
    except Exception as exc:
        return None, _failed(cfg, job, exc)


def _render(cfg: DictConfig, job: dict[str, Any]) -> dict[str, Any]:
    """The render job (`envfactory.cli.render`): PNG and MP4 into the run dir."""
    from envfactory.cli.render import force_rgb_array, pygame_missing, render_job

    try:
        force_rgb_array(cfg)
    except Exception as exc:
        return _failed(cfg, job, exc)
    envs, failed = _build(cfg, job)
    if failed is not None:
        return failed
    try:
        out = render_job(cfg, envs, Path(job.get("output_dir") or os.getcwd()))
    except KeyboardInterrupt:
        _close(envs)
        _interrupted(cfg, job, None)
    except Exception as exc:
        _close(envs)
        return _failed(cfg, job, pygame_missing(exc, str(_settings(cfg)["env"])) or exc)
    _close(envs)
    summary: dict[str, Any] = {**_settings(cfg), "job": "render", "status": "ok", **out}
    save_summary(summary, job)
    w, h = out["image_size"]
    print(
        f"envfactory render: {summary['env']} x{summary['num_envs']}: {out['png']} ({w}x{h}), "
        f"{out['mp4']} ({out['frames']} frames at {out['fps']} fps)",
        flush=True,
    )
    return summary


def _close(envs: Any, *, now: bool = False) -> None:
    """Close the envs. ``now``: end the workers at once (Ctrl-C before the first step:
    they may be busy building or resetting, which a graceful close would wait out, and
    nothing of them is kept); a vectorizer whose ``close`` takes no ``terminate`` is closed
    as usual."""
    try:
        if now:
            try:
                envs.close(terminate=True)
                return
            except TypeError:
                pass
        envs.close()
    except KeyboardInterrupt:  # a second Ctrl-C while closing: end the workers now
        envs.close(terminate=True)


def _preset_files() -> dict[str, str]:
    """The job's ``env`` / ``vectorizer`` preset files (`envfactory.config.compose.preset_files`),
    from Hydra's choices and config folders (``--config-dir`` too)."""
    from hydra.core.hydra_config import HydraConfig

    from envfactory.config.compose import preset_files
    from envfactory.config.store import search_dirs
    from envfactory.plugin.manager import get_registry

    if not HydraConfig.initialized():
        return {}
    hc = HydraConfig.get()
    sources = hc.runtime.config_sources or []
    folders = [str(s.path).removeprefix("file://") for s in sources if s.schema == "file"]
    return preset_files(hc.runtime.choices, [*folders, *search_dirs(get_registry())])


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


def _failed(
    cfg: DictConfig, job: dict[str, Any], exc: Exception, record: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Report a failed job: one line on stderr; in a sweep a ``failed`` summary (the sweep
    goes on), else exit 2 (config) or 1 (anything else: a worker failure, an env's own
    exception under ``dummy``). Outside a Hydra job (``run(cfg)`` from Python) an exception
    that is not envfactory's is re-raised. The tracebacks of anything but a config error go
    to ``error.txt`` in the run dir. ``record``: the split and restarts of envs that were
    built (`envfactory.cli.run_record.record_fields`), kept in a sweep job's summary."""
    import traceback

    from envfactory.errors import ConfigError, EnvfactoryError

    if not job and not isinstance(exc, EnvfactoryError):
        raise exc
    release_conflicts(exc)
    line, where = error_line(exc), ""
    if job:
        saved = save_error(exc, job["output_dir"])
        where = f" (full traceback: {saved})" if saved else ""
    if not job.get("multirun"):
        if job and isinstance(exc, ConfigError):
            remove_run_dir(job["output_dir"])  # the job never started: no run dir
        print(f"envfactory: error: {line}{where}", file=sys.stderr, flush=True)
        raise SystemExit(2 if isinstance(exc, ConfigError) else 1) from None
    print(
        f"envfactory: error: job {job.get('job_num')}: {line}{where}", file=sys.stderr, flush=True
    )
    summary: dict[str, Any] = {**_settings(cfg), **(record or {})}
    summary.update(status="failed", error=line)
    if not isinstance(exc, ConfigError):
        summary["traceback"] = "".join(traceback.format_exception(exc))
    save_summary(summary, job)
    return summary


def _not_composed(job: dict[str, Any], line: str) -> dict[str, Any]:
    """A sweep job whose config did not compose (`envfactory.cli.sweeper`): its one
    line, and a failed summary with its overrides (no settings: there is no config)."""
    print(f"envfactory: error: job {job.get('job_num')}: {line}", file=sys.stderr, flush=True)
    summary: dict[str, Any] = {"status": "failed", "error": line}
    save_summary(summary, job)
    return summary


def _interrupted(cfg: DictConfig, job: dict[str, Any], summary: dict[str, Any] | None) -> None:
    """Ctrl-C: save what was measured (``status: interrupted``), one line, exit 130."""
    if summary is None:
        summary = {**_settings(cfg), "status": "interrupted", "steps": 0}
        save_summary(summary, job)
    where = f"; partial summary saved to {Path(job['output_dir']) / SUMMARY_FILE}" if job else ""
    steps = summary.get("steps", 0)
    print(f"envfactory: interrupted after {steps} steps{where}", file=sys.stderr, flush=True)
    raise SystemExit(130)


def run_dir_error(exc: OSError, args: list[str]) -> str:
    """The line for a run dir (a sweep dir with ``-m``) that cannot be made or written: a
    file in its path, no permission, a read-only file system."""
    sweep = "-m" in args or "--multirun" in args
    what, key, example = (
        ("sweep dir", "hydra.sweep.dir", "multirun/sweep1")
        if sweep
        else ("run dir", "hydra.run.dir", "outputs/run1")
    )
    where = f": {exc.filename}" if exc.filename else ""
    why = exc.strerror or type(exc).__name__
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        why += " (a file is in the way)"
    return (
        f"cannot write the {what}{where}: {why}; set {key} to a folder you can write, "
        f"e.g. {key}={example}"
    )


def _under(exc: BaseException, kind: type[_E]) -> _E | None:
    """The ``kind`` exception that ``exc`` is or was raised from (its cause or context, at any
    depth)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kind):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


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

    ``--rerun RUN_DIR [overrides]`` re-runs a saved job (`envfactory.cli.rerun`).

    Hydra prints its own composition errors over several lines; ``HYDRA_FULL_ERROR=1``
    (Hydra's documented switch) makes it raise them instead, and they are printed here as
    one line. A user who set ``HYDRA_FULL_ERROR`` gets Hydra's full tracebacks as usual.
    """
    try:
        _main()
    except KeyboardInterrupt:  # (before the job: while importing, loading the plugins)
        print("envfactory: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:  # raised while a Ctrl-C unwound: a library's cleanup failing on
        # what it left (OmegaConf in `import hydra`), or one it swallowed (envfactory.cli.held)
        if _under(exc, KeyboardInterrupt) is None and not held.counted():
            raise
        print("envfactory: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _main() -> None:
    import hydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException
    from yaml import YAMLError  # a preset file that does not parse

    from envfactory.cli.arguments import check_arguments
    from envfactory.cli.rerun import rerun_arguments
    from envfactory.cli.run_dir import expand_home
    from envfactory.cli.sweep import SweepSummary
    from envfactory.cli.sweeper import with_sweeper
    from envfactory.config.compose import header_error, hydra_error
    from envfactory.errors import ConfigError, EnvfactoryError

    if sys.argv[1:2] == ["tune"]:  # `envfactory tune ...`: its own parser, before Hydra
        from envfactory.cli.tune import main as tune

        raise SystemExit(tune(sys.argv[2:]))
    if "--version" in sys.argv[1:]:
        print(version_line())
        return
    try:
        config_path = load_registry(hold_conflicts=True)
    except (EnvfactoryError, FileNotFoundError) as exc:
        print(f"envfactory: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    try:
        args = with_sweeper(rerun_arguments(expand_home(sys.argv[1:])))  # ~/.. expanded
        check_arguments(args)
    except ConfigError as exc:
        release_conflicts(exc)
        print(f"envfactory: error: {error_line(exc)}", file=sys.stderr)
        raise SystemExit(2) from None
    held.check()  # (one the imports and plugins swallowed: before the fork server starts)
    if args and all("=" in a and not a.startswith(("-", "hydra")) for a in args):
        from envfactory.config.prestart import prestart, records_of
        from envfactory.factory import _prestart_builtin
        from envfactory.plugin.manager import get_registry

        _prestart_builtin(args)  # one job of overrides only: its fork server starts now,
        prestart(args, *records_of(get_registry()))  # a plugin's once the plugins are read
    app = hydra.main(version_base="1.3", config_path=config_path, config_name="config")(run)
    user_wants_tracebacks = os.environ.get("HYDRA_FULL_ERROR") == "1"  # (as Hydra reads it)
    os.environ["HYDRA_FULL_ERROR"] = "1"
    SweepSummary.last = None
    given, sys.argv[1:] = sys.argv[1:], args  # Hydra reads sys.argv
    if "-m" not in args and "--multirun" not in args:  # (a sweep's launcher has its own)
        held.hold()  # a Ctrl-C while Hydra composes waits for the job (envfactory.cli.held)
    try:
        app()
    except BrokenPipeError:  # `envfactory --help | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        print("envfactory: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except (ConfigError, HydraException, OmegaConfBaseException, YAMLError, ValueError) as exc:
        unwritable = _under(exc, OSError) if isinstance(exc, ValueError) else None
        if unwritable is not None and not user_wants_tracebacks:
            # logging's "Unable to configure handler 'file'": the run dir exists but its
            # log file cannot be written (no permission, a read-only file system)
            print(f"envfactory: error: {run_dir_error(unwritable, args)}", file=sys.stderr)
            raise SystemExit(2) from None
        if user_wants_tracebacks or (isinstance(exc, ValueError) and not header_error(exc)):
            raise  # (a ValueError of Hydra's other than a bad "# @package" header: a bug)
        err = exc if isinstance(exc, ConfigError) else hydra_error(exc, args)
        release_conflicts(err)
        print(f"envfactory: error: {error_line(err)}", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as exc:  # after Hydra's own (MissingConfigException is an
        # OSError): Hydra makes the run dir and writes .hydra/ before the job
        if user_wants_tracebacks:
            raise
        print(f"envfactory: error: {run_dir_error(exc, args)}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        held.release()
        release_conflicts()  # (those a job never got to: --help, --cfg job, ...)
        sys.argv[1:] = given
        if not user_wants_tracebacks:
            os.environ.pop("HYDRA_FULL_ERROR", None)
    sweep = SweepSummary.last
    if sweep is not None and sweep.same_error:  # what every job shares: say it once
        print(
            f"envfactory: error: all {sweep.total} sweep jobs failed: {sweep.same_error} "
            f"(see {sweep.table_path})",
            file=sys.stderr,
        )
        raise SystemExit(1)
    if sweep is not None and sweep.failed:
        print(
            f"envfactory: error: {sweep.failed} of {sweep.total} sweep jobs failed "
            f"(see {sweep.table_path})",
            file=sys.stderr,
        )
        raise SystemExit(1)


if __name__ == "__main__":
    main()
