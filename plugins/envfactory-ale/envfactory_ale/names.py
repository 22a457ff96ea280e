"""The vectorizer's name and what its refusals offer instead: shared by the plugin module
(config, checks) and the vector env, which import this and not each other."""

from __future__ import annotations

__all__ = ["ALTERNATIVE", "NAME"]

NAME = "ale-vector"
#: What the error messages offer instead.
ALTERNATIVE = "vectorizer=subproc-atari"
