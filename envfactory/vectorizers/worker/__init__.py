"""The worker side: the worker process, the env runner and host every backend uses, the recovery
rule, the typed messages.
"""
