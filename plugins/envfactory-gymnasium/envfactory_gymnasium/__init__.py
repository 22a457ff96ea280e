"""envfactory vectorizers ``gymnasium-sync`` and ``gymnasium-async``: gymnasium's own
``SyncVectorEnv`` / ``AsyncVectorEnv`` built from envfactory's composed env constructors."""

__version__ = "0.1.0"
