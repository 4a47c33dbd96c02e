"""``python -m logstream``: the same as the ``logstream`` command."""

from logstream.entry import entry_point

entry_point()
