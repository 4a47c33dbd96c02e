"""``logstream model train occupancy`` and ``logstream model evaluate occupancy``."""
