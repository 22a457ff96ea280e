"""The async pool (envpool's `send`/`recv`): its scheduler, its front, what a backend gives it."""
