"""envfactory vectorizer ``threads``: envs stepped by threads of this process (see ``plugin``)."""

__version__ = "0.1.0"
