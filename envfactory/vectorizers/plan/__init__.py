"""The plan: the options checked once, the split of envs over workers decided once, and the launch
of worker processes.
"""
