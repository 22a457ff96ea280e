"""A new run directory for every job of the ``envfactory`` command: the Hydra callback
`UniqueRunDir` (``hydra.callbacks.unique_run_dir`` in ``conf/config.yaml``).

Hydra names a job's run dir by the second it started (``outputs/<date>/<time>``) and
makes it with ``exist_ok=True``: two jobs started in the same second (``envfactory
--rerun runs/first; envfactory --rerun runs/first seed=4``, two terminals, a script)
wrote into one folder, the second job's ``summary.json``, ``error.txt`` and ``.hydra/``
replacing the first's. The same held for two sweeps' ``multirun/<date>/<time>``.

Decisions:
    * The rule: a run dir (a sweep dir with ``-m``) named by the time (its value holds a
      ``${now:...}``, as Hydra's default does) and not given on the command line is
      claimed before Hydra makes it: made with ``exist_ok=False``, atomically, so two
      processes never get the same one. When it exists already, the job takes the same
      name with ``-2``, ``-3``, ... appended (``outputs/2026-11-27/05-34-01-2``). The
      common case (a free name) is Hydra's documented pattern, unchanged.
    * A ``hydra.run.dir`` / ``hydra.sweep.dir`` given on the command line is used as it
      is (a folder named on purpose, reused on purpose), and so is a fixed one from a
      config file (``hydra.run.dir: .`` is a common Hydra setting); only a time-named
      folder promises to be new.
    * Done in ``on_run_start`` / ``on_multirun_start``, which Hydra calls after composing
      the config and before it makes the folder and writes ``.hydra/`` (the
      sweeper makes the sweep dir): the composed value is what is checked, whichever
      config file set it. The concrete folder replaces the pattern in the config (so
      ``.hydra/hydra.yaml`` records it); for a sweep it is also added to
      ``hydra.overrides.hydra``, from which Hydra composes each job of the sweep again.
    * A folder that cannot be made (no permission, a file in the way) is left to Hydra,
      which raises the error the command reports as one line (`envfactory.cli.main`).
    * ``~`` at the start of ``hydra.run.dir`` / ``hydra.sweep.dir`` is the home folder, as
      in any path a user types (the shell does not expand it after ``key=``, and Hydra
      neither expands it nor reads it unquoted): the command line's value, quoted or not,
      is expanded before Hydra reads it (`expand_home`), and a config file's value when
      the run starts. ``~user`` works too; an unknown user is refused in one line. Before,
      ``hydra.run.dir=~/runs/a`` was refused with advice to quote it, and quoting made a
      folder named ``~`` in the working directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

__all__ = ["UniqueRunDir", "claim_dir", "expand_home", "hydra_quote", "make_unique"]

DIR_KEYS = ("hydra.run.dir", "hydra.sweep.dir")
HOME_FLAGS = ("--config-dir", "-cd", "--rerun")  # options whose value may start with ~


def claim_dir(path: str | Path) -> Path | None:
    """Make ``path`` (and its parents), or the first free ``path-2``, ``path-3``, ... and
    return it; None when it cannot be made (Hydra's own ``mkdir`` then raises the error:
    a file in the way, no permission)."""
    base = Path(path)
    n = 1
    while True:
        candidate = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            if not candidate.is_dir():
                return None  # a file of that name: Hydra says so
        except OSError:
            return None
        n += 1


def hydra_quote(value: str) -> str:
    """``value`` as a quoted value of a Hydra override (``key='...'``): quotes, the
    backslashes before them or at the end, and ``${`` escaped."""
    text = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value)
    return "'" + text.replace("'", "\\'").replace("${", "\\${") + "'"


def _home(path: str, where: str) -> str:
    """``path`` with a leading ``~`` or ``~user`` expanded (``where`` names it in the
    error for an unknown user)."""
    from envfactory.errors import ConfigError

    expanded = os.path.expanduser(path)
    if expanded == path:  # ~user of no such user (or no home folder to expand to)
        user = path[1:].split("/", 1)[0]
        who = f"no user {user!r}" if user else "no home folder ($HOME is not set)"
        raise ConfigError(
            f"{where}: {path[: path.find('/') if '/' in path else None]} cannot be expanded: "
            f"{who}; give the folder's full path"
        )
    return expanded


def expand_home(args: Sequence[str]) -> list[str]:
    """The command line with a leading ``~`` of a ``hydra.run.dir`` / ``hydra.sweep.dir``
    override's value (quoted or not) expanded to the home folder, the value quoted for
    Hydra (see the module docstring); also of a ``--config-dir=~/..`` or ``--rerun=~/..``,
    which the shell does not expand after ``=``."""
    out = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and key in HOME_FLAGS and value.startswith("~"):  # (the shell left it)
            arg = f"{key}={_home(value, arg)}"
        elif sep and key.lstrip("+") in DIR_KEYS:
            quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
            raw = value[1:-1] if quoted else value
            if raw.startswith("~") and "\\" not in raw:
                home = _home(raw, arg)
                arg = f"{key}='{home}'" if "'" not in home else f"{key}={hydra_quote(home)}"
        out.append(arg)
    return out


def _expand_config_home(config: DictConfig, kind: str) -> None:
    """A ``~`` that starts the ``hydra.<kind>.dir`` a config file set, expanded in place
    (its ``${now:...}`` kept); for a sweep also added to ``hydra.overrides.hydra``, from
    which each job is composed again."""
    node = OmegaConf.select(config, f"hydra.{kind}", default=None)
    if not isinstance(node, DictConfig):
        return
    raw = OmegaConf.to_container(node, resolve=False).get("dir")  # type: ignore[union-attr]
    if not isinstance(raw, str) or not raw.startswith("~"):
        return
    home = _home(raw, f"hydra.{kind}.dir={raw}")
    with read_write(config.hydra), open_dict(config.hydra):
        node.dir = home
        if kind == "sweep":
            config.hydra.overrides.hydra.append(f"hydra.sweep.dir='{home}'")


def _given(config: DictConfig, key: str) -> bool:
    """Whether ``key`` (``hydra.run.dir``) or its node is set on the command line."""
    overrides = OmegaConf.select(config, "hydra.overrides.hydra", default=None) or []
    node = key.rsplit(".", 1)[0]
    return any(str(o).split("=", 1)[0].lstrip("+~") in (key, node) for o in overrides)


def make_unique(config: DictConfig, kind: str) -> Path | None:
    """Claim the ``hydra.<kind>.dir`` of ``config`` (``kind``: ``run`` or ``sweep``) by the
    rule of the module docstring and put the folder claimed in its place; the folder, or
    None when the rule leaves the value alone."""
    key = f"hydra.{kind}.dir"
    node = OmegaConf.select(config, f"hydra.{kind}", default=None)
    if not isinstance(node, DictConfig) or _given(config, key):
        return None
    raw = OmegaConf.to_container(node, resolve=False).get("dir")  # type: ignore[union-attr]
    if not isinstance(raw, str) or "${now:" not in raw:
        return None
    claimed = claim_dir(str(node.dir))
    if claimed is None:
        return None
    with read_write(config.hydra), open_dict(config.hydra):
        node.dir = str(claimed)
        if kind == "sweep":  # each job of the sweep is composed again from these
            config.hydra.overrides.hydra.append(f"{key}={hydra_quote(str(claimed))}")
    return claimed


class UniqueRunDir(Callback):
    """Hydra callback: a new run dir (sweep dir) for every job (sweep) named by the time;
    see the module docstring."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _expand_config_home(config, "run")
        make_unique(config, "run")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _expand_config_home(config, "sweep")
        make_unique(config, "sweep")
