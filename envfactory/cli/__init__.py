"""envfactory's command-line tools.

- ``envfactory`` (:mod:`envfactory.cli.main`): the Hydra app that builds the configured
  vectorized env, runs a rollout and saves a summary; ``-m`` sweeps end with one table;
  ``--rerun RUN_DIR`` runs a saved job again (:mod:`envfactory.cli.rerun`).
- ``envfactory-plugins`` (:mod:`envfactory.cli.plugins`): everything the installed plugins
  register, with the distribution and version that gave each.

The modules of ``envfactory`` (imports go down this list, never up):

- :mod:`~envfactory.cli.main`: the command and its Hydra task (check, build, run a job,
  report).
- :mod:`~envfactory.cli.render`: the render job (``job=render``).
- :mod:`~envfactory.cli.rollout`: the rollout loops (gymnasium's ``step``; envpool's
  ``recv``/``send`` over the async pool) and the helpers the render job shares.
- :mod:`~envfactory.cli.rerun`: ``--rerun RUN_DIR``.
- :mod:`~envfactory.cli.sweep`: the sweep table, a Hydra callback registered under
  ``hydra.callbacks`` in ``conf/config.yaml``; :mod:`~envfactory.cli.plot`, its plot.
- :mod:`~envfactory.cli.sweeper`: the sweeper of a ``-m`` sweep (a value that does not
  compose is a failed row, not the end of the sweep).
- :mod:`~envfactory.cli.report`: the one-line error, ``summary.json``, ``error.txt``.
"""
