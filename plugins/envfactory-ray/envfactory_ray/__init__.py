"""envfactory vectorizer ``ray``: envs hosted in Ray actors (``in_series`` envs per actor),
on this machine or on a Ray cluster."""

__version__ = "0.1.0"
