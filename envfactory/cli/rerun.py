"""Re-running a saved job: ``envfactory --rerun RUN_DIR [overrides]``.

Every job saves what made it in ``RUN_DIR/.hydra``: ``overrides.yaml`` (its command-line
overrides), ``hydra.yaml`` (Hydra's settings: the config dirs and primary config name it
was composed from) and ``config.yaml`` (the composed config, the record of what ran).
:func:`rerun_arguments` turns ``--rerun RUN_DIR`` into the command line that composes that
job again: the saved config dirs (``--config-dir``) and config name, the saved overrides,
then the overrides given now (which win: ``--rerun RUN_DIR seed=1``). The new job gets its
own output dir, as any job.

Hydra's own spelling, ``--config-dir RUN_DIR/.hydra --config-name config``, means the same
here. Hydra alone would run the default job instead: ``config.yaml`` of envfactory's own
conf dir comes first in the search path and shadows the saved one (and the saved one has
no defaults list: no schema, no sweep table).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envfactory.errors import ConfigError

__all__ = ["rerun_arguments"]

_CONFIG_DIR = ("--config-dir", "-cd")
_CONFIG_NAME = ("--config-name", "-cn")


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

    Raises:
        ConfigError: ``RUN_DIR`` holds no saved job (``RUN_DIR/.hydra/overrides.yaml`` and
            ``hydra.yaml``).
    """
    from omegaconf import OmegaConf

    args = list(argv)
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
        raise ConfigError(
            f"--rerun {run_dir}: no saved job there ({hydra_dir / 'overrides.yaml'} and "
            f"hydra.yaml not found); pass the output dir of a job, where its summary.json "
            f"is{hint}"
        )
    saved = [str(o) for o in OmegaConf.load(hydra_dir / "overrides.yaml")]
    hydra = OmegaConf.load(hydra_dir / "hydra.yaml").hydra
    sources = hydra.runtime.get("config_sources") or []
    config_dirs = [s.path for s in sources if s.provider == "command-line" and s.schema == "file"]
    if _take(list(args), _CONFIG_DIR) is not None:
        config_dirs = []  # the user names the config dir now
    front = [f"--config-dir={d}" for d in config_dirs]
    name = hydra.job.get("config_name")
    if name and name != "config" and _take(list(args), _CONFIG_NAME) is None:
        front.append(f"--config-name={name}")
    now = {_key(a) for a in args if not a.startswith("-")}
    return [*front, *(o for o in saved if _key(o) not in now), *args]
