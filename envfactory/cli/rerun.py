"""Re-running a saved job: ``envfactory --rerun RUN_DIR [overrides]``.

Every job saves what made it in ``RUN_DIR/.hydra``: ``overrides.yaml`` (its command-line
overrides), ``hydra.yaml`` (Hydra's settings: the config dirs and primary config name it
was composed from) and ``config.yaml`` (the composed config, the record of what ran).
`rerun_arguments` turns ``--rerun RUN_DIR`` into the command line that composes that
job again: the saved config dirs (``--config-dir``) and config name, the saved overrides,
then the overrides given now (which win: ``--rerun RUN_DIR seed=1``). The new job gets its
own output dir, as any job.

Hydra's own spelling, ``--config-dir RUN_DIR/.hydra --config-name config``, means the same
here. Hydra alone would run the default job instead: ``config.yaml`` of envfactory's own
conf dir comes first in the search path and shadows the saved one (and the saved one has
no defaults list: no schema, no sweep table).

A run dir is config, and config is code: the saved job's ``hydra.callbacks`` are
instantiated and run, and its saved config dirs are searched; re-run only run dirs you
trust (``envfactory --help`` says so, from ``conf/config.yaml``). A damaged run dir (an
emptied, binary or truncated file, a ``hydra.yaml`` without its ``hydra`` key) is one line
and exit status 2, never the default job.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envfactory.cli.sweeper import options_first
from envfactory.errors import ConfigError

__all__ = ["USAGE", "rerun_arguments"]

_CONFIG_DIR = ("--config-dir", "-cd")
_CONFIG_NAME = ("--config-name", "-cn")


USAGE = "envfactory --rerun RUN_DIR [overrides]"


def _take(argv: list[str], names: Sequence[str]) -> str | None:
    """Remove ``NAME VALUE`` / ``NAME=VALUE`` (the last one given) from ``argv``; its value."""
    value = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, inline = arg.partition("=")
        if flag in names and (eq or i + 1 < len(argv)):
            value = inline if eq else argv[i + 1]
            del argv[i : i + (1 if eq else 2)]
            continue
        i += 1
    return value


def _is_saved_job(hydra_dir: Path) -> bool:
    return (hydra_dir / "overrides.yaml").is_file() and (hydra_dir / "hydra.yaml").is_file()


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def rerun_arguments(argv: Sequence[str]) -> list[str]:
    """The command line (without the program name) that re-runs the saved job named by
    ``--rerun RUN_DIR`` in ``argv``, or by ``--config-dir RUN_DIR/.hydra`` with no other
    ``--config-name`` than ``config``; ``argv`` itself, as a list, when it names none.

    The saved job's options go first, then the options given now, the saved overrides and
    the overrides given now (Hydra's parser takes the overrides as one run, so
    ``--rerun RUN_DIR -m seed=1,2`` sweeps the saved job over two seeds).

    Raises:
        ConfigError: ``--rerun`` has no directory; ``RUN_DIR`` holds no saved job
            (``RUN_DIR/.hydra/overrides.yaml`` and ``hydra.yaml``), or a damaged one.
    """

    args = list(argv)
    _check_has_dir(args)
    run_dir = _take(args, ("--rerun",))
    if run_dir is None:
        probe = list(args)
        config_dir, name = _take(probe, _CONFIG_DIR), _take(probe, _CONFIG_NAME)
        if config_dir is None or name not in (None, "config"):
            return args
        if not _is_saved_job(Path(config_dir)):
            return args
        run_dir, args = str(Path(config_dir).parent), probe
    hydra_dir = Path(run_dir) / ".hydra"
    if not _is_saved_job(hydra_dir):
        inside = sorted(p.parent.parent.name for p in Path(run_dir).glob("*/.hydra/hydra.yaml"))
        hint = (
            f"; it is a sweep dir: name one of its jobs, e.g. --rerun {Path(run_dir) / inside[0]}"
            if inside
            else ""
        )
        missing = [f for f in ("overrides.yaml", "hydra.yaml") if not (hydra_dir / f).is_file()]
        raise ConfigError(
            f"--rerun {run_dir}: no saved job there ({' and '.join(missing)} not found in "
            f"{hydra_dir}); pass the output dir of a job, where its summary.json is{hint}"
        )
    saved, config_dirs, name = _saved_job(run_dir, hydra_dir)
    if _take(list(args), _CONFIG_DIR) is not None:
        config_dirs = []  # the user names the config dir now
    front = [f"--config-dir={d}" for d in config_dirs]
    if name and name != "config" and _take(list(args), _CONFIG_NAME) is None:
        front.append(f"--config-name={name}")
    options, overrides = options_first(args)  # Hydra takes the overrides as one run
    now = {_key(a) for a in overrides}
    return [*front, *options, *(o for o in saved if _key(o) not in now), *overrides]


def _check_has_dir(args: Sequence[str]) -> None:
    """``--rerun`` with no run dir after it (the last argument, an option, ``--rerun=``)."""
    for i, arg in enumerate(args):
        value = arg.partition("=")[2] if arg.startswith("--rerun=") else None
        if arg == "--rerun":
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else ""
        if value == "":
            raise ConfigError(
                f"--rerun needs the run dir of a saved job: {USAGE} (e.g. envfactory --rerun "
                "outputs/2024-05-01/12-00-00 seed=1); a sweep of it: add -m and the values"
            )


def _saved_job(run_dir: str, hydra_dir: Path) -> tuple[list[str], list[str], str | None]:
    """The saved job's overrides, command-line config dirs and config name.

    Raises:
        ConfigError: a saved file that cannot be read, is not YAML, or lacks what Hydra
            writes there (a damaged run dir: one line, rather than the default job).
    """
    from omegaconf import DictConfig, ListConfig, OmegaConf

    def load(name: str) -> Any:
        path = hydra_dir / name
        try:
            if not path.read_bytes().strip():
                raise ValueError(f"{name} is empty")
            return OmegaConf.load(path)
        except Exception as exc:  # OSError, YAML's errors, a binary file's decode error
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise ConfigError(
                f"--rerun {run_dir}: cannot read the saved job's {path}: {why}; the run dir "
                "is damaged: run the job again with its overrides (config.yaml there records "
                "what ran)"
            ) from None

    overrides, hydra = load("overrides.yaml"), load("hydra.yaml")
    if not isinstance(overrides, ListConfig) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(
            f"--rerun {run_dir}: {hydra_dir / 'overrides.yaml'} is not a list of overrides "
            "(what Hydra writes there, e.g. - seed=1); the run dir is damaged: run the job "
            "again with its overrides"
        )
    if not isinstance(hydra, DictConfig) or not isinstance(hydra.get("hydra"), DictConfig):
        raise ConfigError(
            f"--rerun {run_dir}: {hydra_dir / 'hydra.yaml'} has no 'hydra' key (what Hydra "
            "writes there); the run dir is damaged: run the job again with its overrides"
        )
    node = hydra.hydra
    sources = OmegaConf.select(node, "runtime.config_sources", default=None)
    name = OmegaConf.select(node, "job.config_name", default=None)
    if not isinstance(sources, ListConfig) or not isinstance(name, str):
        raise ConfigError(
            f"--rerun {run_dir}: {hydra_dir / 'hydra.yaml'} lacks hydra.runtime.config_sources "
            "or hydra.job.config_name (what Hydra writes there; truncated?); the run dir is "
            "damaged: run the job again with its overrides"
        )
    config_dirs = [
        str(s.path)
        for s in sources
        if isinstance(s, DictConfig) and s.get("provider") == "command-line"
        and s.get("schema") == "file"
    ]  # fmt: skip
    return [str(o) for o in overrides], config_dirs, name
