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
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

__all__ = ["UniqueRunDir", "claim_dir", "hydra_quote", "make_unique"]


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
        make_unique(config, "run")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        make_unique(config, "sweep")
