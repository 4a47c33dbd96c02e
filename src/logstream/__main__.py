"""``python -m logstream``: the same as the ``logstream`` command."""

from logstream.cli import entry_point

entry_point()
