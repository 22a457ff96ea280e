"""The front: the `gymnasium.vector.VectorEnv` a user holds, and the components it owns (its
checks, its per-env calls, its worker group and the supervisor that decides what a failure
means).
"""
