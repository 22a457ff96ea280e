"""``python -m envfactory``: the ``envfactory`` command (same arguments, same exit status)."""

from envfactory.cli.main import main

if __name__ == "__main__":
    main()
