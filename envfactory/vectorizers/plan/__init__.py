"""The plan: the options checked once, the split decided once, the launch of workers."""
