"""envfactory's command-line tools.

- ``envfactory`` (`envfactory.cli.main`, started by `envfactory.cli.command`): the Hydra
  app that builds the configured vectorized env, runs a rollout and saves a summary; ``-m``
  sweeps end with one table; ``--rerun RUN_DIR`` runs a saved job again
  (`envfactory.cli.rerun`).
- ``envfactory-plugins`` (`envfactory.cli.plugins`): everything the installed plugins
  register, with the distribution and version that gave each.

The modules of ``envfactory`` (imports go down this list, never up):

- `main`: the command and its Hydra task (check, build, run a job,
  report).
- `render`: the render job (``job=render``).
- `rollout`: the rollout loops (gymnasium's ``step``; envpool's
  ``recv``/``send`` over the async pool) and the helpers the render job shares.
- `rerun`: ``--rerun RUN_DIR``.
- `sweep`: the sweep table, a Hydra callback registered under
  ``hydra.callbacks`` in ``conf/config.yaml``; `plot`, its plot.
- `sweeper`: the sweeper of a ``-m`` sweep (a value that does not
  compose is a failed row, not the end of the sweep).
- `report`: the one-line error, ``summary.json``, ``error.txt``.
- `run_dir`: a new run dir for every job (a Hydra callback in ``conf/config.yaml``: a
  time-named run dir that exists already gets ``-2``, ``-3``, ...).
"""
