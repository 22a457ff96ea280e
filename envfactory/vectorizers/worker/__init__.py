"""The worker side: the process, the env runner and host, the recovery rule, the messages."""
