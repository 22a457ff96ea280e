"""envfactory's command-line tools.

- ``envfactory`` (:mod:`envfactory.cli.main`): the Hydra app that builds the configured
  vectorized env, runs a rollout and saves a summary; ``-m`` sweeps end with one table.
- ``envfactory-plugins`` (:mod:`envfactory.cli.plugins`): everything the installed plugins
  register, with the distribution and version that gave each.

The sweep table is written by a Hydra callback (:mod:`envfactory.cli.sweep`) registered
under ``hydra.callbacks`` in ``conf/config.yaml``.
"""
