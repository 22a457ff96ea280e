"""The front: the `gymnasium.vector.VectorEnv` a user holds and what it owns (architecture.md)."""
