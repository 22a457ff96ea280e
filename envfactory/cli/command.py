"""The ``envfactory`` console script: `envfactory.cli.main.main`, imported here so that a
Ctrl-C while it is imported (a few tenths of a second: Hydra, gymnasium) is one line and exit
130 too, as a Ctrl-C at any later moment of the command."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Run the ``envfactory`` command (see `envfactory.cli.main.main`)."""
    from envfactory.cli import held

    held.watch()  # (one an import swallowed is raised again: envfactory.cli.held)
    try:
        from envfactory.cli.main import main as command

        held.check()
    except (KeyboardInterrupt, Exception) as exc:  # (Cython turns one into an ImportError)
        if not (isinstance(exc, KeyboardInterrupt) or held.counted()):
            raise
        print("envfactory: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    command()
