"""``logstream model train bots`` and ``logstream model evaluate bots``."""
