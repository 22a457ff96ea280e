"""The async pool (envpool's `send`/`recv`): its scheduler, its front over any worker group, and
what a backend gives it.
"""
