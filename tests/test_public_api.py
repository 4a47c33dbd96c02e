"""The public surface is pinned: a change to it is a deliberate edit here."""

import logstream
import logstream.analytics
import logstream.parsing


def test_top_level_names():
    assert sorted(logstream.__all__) == [
        "ConfigError",
        "InputPathError",
        "LogFormatError",
        "LogstreamError",
        "__version__",
    ]


def test_every_exported_name_exists():
    for module in (logstream, logstream.parsing, logstream.analytics):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_errors_share_one_root():
    for name in ("ConfigError", "InputPathError", "LogFormatError"):
        assert issubclass(getattr(logstream, name), logstream.LogstreamError)
