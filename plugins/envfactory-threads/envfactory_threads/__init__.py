"""envfactory vectorizer ``threads``: envs stepped by threads of this process
(``in_series`` envs per thread), a backend written on envfactory's vectorizer-author API
(:mod:`envfactory.vectorizers.remote`). It pays for envs that release the GIL while they
step (emulators, physics engines in C/C++), and under free-threaded Python."""

__version__ = "0.1.0"
