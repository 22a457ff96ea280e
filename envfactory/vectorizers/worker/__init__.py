"""The worker side: the worker process, the env runner and host, the recovery rule, the
messages."""
