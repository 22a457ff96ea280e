"""``python -m envfactory``: the ``envfactory`` command (same arguments, same exit status)."""

from envfactory.cli.command import main

if __name__ == "__main__":
    main()
