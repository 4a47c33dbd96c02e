"""The live progress line of ``logstream replay`` and ``logstream generate`` (rich)."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from logstream.replay.engine import ReplaySummary

__all__ = ["ReplayProgress"]


class ReplayProgress:
    """Show lines sent, event time reached, rate and sink state, four times a second.

    Use it as a context manager and pass the instance as the replay's ``progress`` callback.

    Parameters
    ----------
    console : rich.console.Console
        Where to draw (the CLI uses standard error, so standard output stays clean).
    title : str
        Shown before the figures (``replay``, ``generate``).
    """

    def __init__(self, console: Console, title: str = "replay") -> None:
        self.title = title
        # Redrawn in place on a terminal and cleared at the end (the command prints its own
        # final line); nothing is drawn when the console is a file or a pipe.
        self._live = (
            Live(console=console, refresh_per_second=4, transient=True)
            if console.is_terminal
            else None
        )

    def __enter__(self) -> ReplayProgress:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.stop()

    def __call__(self, summary: ReplaySummary) -> None:
        """Redraw with the live figures of ``summary``."""
        if self._live is not None:
            self._live.update(self.render(summary))

    def render(self, summary: ReplaySummary) -> Text:
        """Return the progress line for ``summary`` (it wraps on narrow terminals)."""
        reached = summary.event_time_reached
        cells = [
            f"[bold]{self.title}[/bold]",
            f"[cyan]{summary.lines_sent:,}[/cyan] lines sent",
            f"event time [green]{reached.isoformat() if reached else '—'}[/green]",
            f"[cyan]{summary.rate_per_s:,.0f}[/cyan] lines/s",
        ]
        if summary.options.get("late_fraction"):
            cells.append(f"[yellow]{summary.late_lines:,}[/yellow] late")
        if summary.passes > 1:
            cells.append(f"pass {summary.passes}")
        if summary.sink_status:
            cells.append(escape(summary.sink_status))
        return Text.from_markup(" · ".join(cells))
