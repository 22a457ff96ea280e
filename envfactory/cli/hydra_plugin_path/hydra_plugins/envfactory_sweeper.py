"""``hydra/sweeper: envfactory``, the ``envfactory`` command's sweeper
(`envfactory.cli.sweeper`).

Hydra instantiates a sweeper only from its ``hydra_plugins`` namespace. This folder is not
on ``sys.path`` of other programs: the ``envfactory`` command adds it
(`envfactory.cli.sweeper.register_sweeper`), so no other Hydra app sees the plugin.
"""

from envfactory.cli import sweeper as _sweeper


class EnvfactorySweeper(_sweeper.ComposingSweeper):
    """Hydra's basic sweeper; a job whose config does not compose is a failed row."""
