"""envfactory's sweeper (``hydra/sweeper=envfactory``, which the ``envfactory`` command adds to
a ``-m`` command line, `with_sweeper`):
Hydra's basic sweeper, except that a job whose config does not compose is a failed row of
the sweep table instead of the end of the sweep.

Hydra composes each job of a batch before launching any and stops the sweep at the first
that fails: ``-m vectorizer=dummy,dumy`` or ``-m num_envs=2,abc`` ran nothing and printed
no table, while ``-m seed=0,-1`` (which composes, and fails envfactory's own checks inside
the job) gave a failed row. Here the basic sweeper and the configured launcher run as
always, over a config loader (`ComposeErrorsAsJobs`) that answers a job that does
not compose with the sweep's base config, marked with the one-line error the same value
gives outside a sweep (``unknown vectorizer 'dumy' ... Did you mean 'dummy'?``) and the
job's own overrides. The launcher runs that job like any other, with its number and
output dir; the task (`envfactory.cli.main.run`) sees the mark and saves a failed
summary at once. Every launcher works (the loader travels with Hydra's context), and the
command exits with status 1 when a job failed, as for any failed job.

envfactory installs nothing into Hydra's ``hydra_plugins`` namespace (other Hydra apps in
the environment must not import it). Hydra instantiates a sweeper only from there, so the
plugin module (``hydra_plugins.envfactory_sweeper``, a subclass of `ComposingSweeper`)
lives in a folder of this package that only the ``envfactory`` command puts on
``sys.path`` (`register_sweeper`).
"""

from __future__ import annotations

import copy
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

__all__ = [
    "COMPOSE_ERROR_KEY",
    "PLUGIN_PATH",
    "ComposeErrorsAsJobs",
    "ComposingSweeper",
    "EnvfactorySweeperConf",
    "composition_error",
    "options_first",
    "register_sweeper",
    "with_sweeper",
]

#: the top-level key that marks a job whose config did not compose (the job's one line)
COMPOSE_ERROR_KEY = "envfactory_compose_error"


def composition_error(exc: BaseException) -> str:
    """The one line a composition error gives (as the CLI prints it outside a sweep)."""
    from envfactory.cli.report import error_line
    from envfactory.config.compose import hydra_error
    from envfactory.errors import ConfigError

    return error_line(exc if isinstance(exc, ConfigError) else hydra_error(exc))


def _override_dirname(overrides: Sequence[str], job: DictConfig) -> str:
    """``hydra.job.override_dirname`` of a job, as Hydra builds it (sorted, excluded keys
    left out, its separators)."""
    conf = job.config.override_dirname
    excluded = set(conf.exclude_keys)
    lines = sorted(o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in excluded)
    return str(conf.item_sep).join(line.replace("=", str(conf.kv_sep)) for line in lines)


class ComposeErrorsAsJobs:
    """A config loader over Hydra's whose ``load_sweep_config`` answers a job that does not
    compose with the base config of the sweep, marked (`COMPOSE_ERROR_KEY`) with the
    job's one-line error and carrying the job's overrides. Everything else is Hydra's
    loader."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:  # the rest of Hydra's ConfigLoader
        loader = self.__dict__.get("loader")  # none yet while unpickling (joblib's workers)
        if loader is None:
            raise AttributeError(name)
        return getattr(loader, name)

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> Any:
        try:
            return self.loader.load_sweep_config(master_config, sweep_overrides)
        except Exception as exc:  # Hydra's and OmegaConf's errors, envfactory's checks
            line = composition_error(exc)
        cfg = self.loader.load_sweep_config(master_config, [])
        with open_dict(cfg):
            cfg[COMPOSE_ERROR_KEY] = line
            cfg.hydra.overrides.task = list(sweep_overrides)
            cfg.hydra.job.override_dirname = _override_dirname(sweep_overrides, cfg.hydra.job)
        return cfg


@dataclass
class EnvfactorySweeperConf:
    """``hydra/sweeper: envfactory``: the options of Hydra's basic sweeper."""

    _target_: str = "hydra_plugins.envfactory_sweeper.EnvfactorySweeper"
    max_batch_size: Any = None  # int or None
    params: Any = None  # {key: "v1,v2"} or None


class ComposingSweeper(Sweeper):
    """Hydra's basic sweeper (made by Hydra from its own ``hydra/sweeper: basic`` config),
    whose launcher composes each job through `ComposeErrorsAsJobs`.

    Args:
        max_batch_size: jobs launched at a time (None: all), as the basic sweeper.
        params: sweep values from the config (``{key: "v1,v2"}``), as the basic sweeper.
    """

    def __init__(self, max_batch_size: int | None = None, params: Any = None) -> None:
        self.options = {"max_batch_size": max_batch_size, "params": params}
        self.inner: Sweeper | None = None
        self.context: HydraContext | None = None
        self.config: DictConfig | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        from hydra.core.plugins import Plugins

        basic = ConfigStore.instance().load("hydra/sweeper/basic.yaml").node
        inner_config = copy.deepcopy(config)
        with open_dict(inner_config):
            inner_config.hydra.sweeper = OmegaConf.merge(basic, self.options)
        context = HydraContext(
            config_loader=ComposeErrorsAsJobs(hydra_context.config_loader),  # type: ignore[arg-type]
            callbacks=hydra_context.callbacks,
        )
        self.context, self.config = context, config
        self.inner = Plugins.instance().instantiate_sweeper(
            hydra_context=context, task_function=task_function, config=inner_config
        )

    def sweep(self, arguments: list[str]) -> Any:
        """The basic sweeper's sweep. Ctrl-C (a job's exit with status 130, or an interrupt
        between jobs) ends the sweep as Hydra's end of a multirun would, with
        ``on_multirun_end(config, interrupted=True)`` (the sweep table of the jobs run so
        far, the interrupted one a row), then goes on stopping the command."""
        assert self.inner is not None, "setup() first"
        try:
            return self.inner.sweep(arguments)
        except KeyboardInterrupt:
            self._interrupted()
            raise
        except SystemExit as exc:
            if exc.code == 130:
                self._interrupted()
            raise

    def _interrupted(self) -> None:
        if self.context is None or self.config is None:
            return
        try:
            self.context.callbacks.on_multirun_end(config=self.config, interrupted=True)
        except Exception as exc:  # the interrupt matters more than a callback's failure
            print(f"envfactory: warning: sweep callbacks failed: {exc}", file=sys.stderr)


#: the folder holding ``hydra_plugins/envfactory_sweeper.py``
PLUGIN_PATH = Path(__file__).resolve().parent / "hydra_plugin_path"


def register_sweeper() -> None:
    """For the ``envfactory`` command, before Hydra composes: put `PLUGIN_PATH` on
    ``sys.path`` (Hydra's plugin scan finds the sweeper there), register the sweeper with
    Hydra in case its plugins were scanned already in this process, and store
    ``hydra/sweeper: envfactory``."""
    from envfactory import _compat

    if str(PLUGIN_PATH) not in sys.path:
        sys.path.append(str(PLUGIN_PATH))
        importlib.invalidate_caches()
    plugin = importlib.import_module("hydra_plugins.envfactory_sweeper")
    _compat.register_hydra_plugin(plugin.EnvfactorySweeper)
    cs = ConfigStore.instance()
    cs.store(group="hydra/sweeper", name="envfactory", node=EnvfactorySweeperConf)


#: Hydra's options that take a value (``--info`` takes one only from its choices)
_VALUED = {"--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
           "--config-dir", "-cd", "--experimental-rerun"}  # fmt: skip
_INFO = ({"--info", "-i"}, {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"})


def options_first(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(options, overrides)`` of a command line (without the program name): Hydra's
    options with their values, in order, and the overrides, in order. Hydra's parser takes
    the overrides only as one run (``seed=1 -m num_envs=1,2`` is "unrecognized arguments"),
    so a command line built from pieces puts ``[*options, *overrides]``."""
    options: list[str] = []
    overrides: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            overrides.append(arg)
        else:
            options.append(arg)
            value = args[i + 1] if i + 1 < len(args) else None
            if value is not None and (arg in _VALUED or (arg in _INFO[0] and value in _INFO[1])):
                options.append(args[i + 1])
                i += 1
        i += 1
    return options, overrides


def with_sweeper(args: Sequence[str]) -> list[str]:
    """``args`` (the command line, without the program name) with ``hydra/sweeper=envfactory``
    added to a ``-m`` / ``--multirun`` sweep that names no sweeper of its own, the options
    first (`options_first`). Not in ``conf/config.yaml``: [`envfactory.compose`][envfactory.compose]
    composes that file in processes where the sweeper is not registered."""
    args = list(args)
    multirun = "-m" in args or "--multirun" in args
    chosen = any(a.lstrip("+").startswith("hydra/sweeper=") for a in args)
    if not multirun or chosen:
        return args
    options, overrides = options_first(args)
    return [*options, *overrides, "hydra/sweeper=envfactory"]
