"""The parent's side of the workers: the board that posts to and waits on them, each worker's
channel (shared-memory slot, wake-up, pipe), the one waiting policy, and the one place a Ctrl-C
goes through.
"""
