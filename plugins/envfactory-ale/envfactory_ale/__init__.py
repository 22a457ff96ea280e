"""envfactory vectorizer ``ale-vector``: the ``atari`` family's config run on ale_py's native
C++ ``AtariVectorEnv`` (threads, no Python per env)."""

__version__ = "0.1.0"
