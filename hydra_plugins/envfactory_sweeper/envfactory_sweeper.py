"""``hydra/sweeper=envfactory``: Hydra's basic sweeper, where a job whose config does not
compose is a failed row of envfactory's sweep table instead of the end of the sweep (see
:mod:`envfactory.cli.sweeper`). envfactory's ``conf/config.yaml`` selects it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # the sweeper extended
from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class EnvfactorySweeperConf:
    """The options of Hydra's basic sweeper."""

    _target_: str = "hydra_plugins.envfactory_sweeper.envfactory_sweeper.EnvfactorySweeper"
    max_batch_size: int | None = None
    params: dict[str, str] | None = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="envfactory", node=EnvfactorySweeperConf, provider="envfactory"
)


class _ComposingLauncher(Launcher):
    """The configured launcher, behind :func:`envfactory.cli.sweeper.launch_composable`."""

    def __init__(self, inner: Launcher, hydra_context: HydraContext, config: DictConfig) -> None:
        self.inner, self.hydra_context, self.config = inner, hydra_context, config

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.inner.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from envfactory.cli.sweeper import launch_composable

        return launch_composable(
            self.inner, self.hydra_context, self.config, job_overrides, initial_job_idx
        )


class EnvfactorySweeper(BasicSweeper):
    """Hydra's basic sweeper; each job is composed by the launcher step, not up front."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, **kw: Any) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, **kw)
        assert self.launcher is not None and self.config is not None
        self.launcher = _ComposingLauncher(self.launcher, hydra_context, self.config)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        """Nothing up front: a job that does not compose becomes a failed row."""
