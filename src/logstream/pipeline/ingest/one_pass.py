"""An ingest-only micro-batch in one pass: parsed once, its events written by the same job.

The Spark steps (:mod:`.stage`) cache a large micro-batch's parse, judge it (:mod:`.watermark`:
the counts, the in-batch rule's newest 0.1 %, :mod:`.skew`'s buckets, jobs over the cache),
then write the events from the cache. When no output but the events reads the parse
(``--queries none``: no pane, session or alert), that is two more passes over the rows than
the work needs. Here the job that parses the micro-batch writes its on-time events at once,
hidden (:func:`logstream.sinks.publish.prepare_batch`), and observes what the judgment needs
(``Dataset.observe``, Spark docs "Observed metrics"): the counts, the oldest and newest
event time, the sum of the event times in whole seconds and the set of half-delay buckets
(``floor(t / ⌊D / 2⌋)``, ``D`` the watermark delay).

**The certificate.** Both rules quarantine events only after a gap of more than ``D``
between two consecutive event times ``e < e'``: the in-batch rule among the newest 0.1 %
(:func:`.watermark.ahead_bound_ms`), the skew above an empty ``D``-bucket with at most 20 %
of the events at or after it (:func:`.skew.skew_cut`); either way at most a fifth of the
events lie after ``e``. Markov's inequality on ``max − t`` (``max`` the newest event time,
``μ`` the mean) bounds that share from below by ``(μ − e) / (max − e)``, above a fifth for
every ``e`` below ``q = (5μ − max) / 4``: so ``e ≥ q``. ``q`` is computed on the driver from a
lower bound of ``μ`` (the seconds' sum, each second floored, less one second an event), in
integers. If every half-delay bucket from ``q``'s to the newest event's holds an event, two
consecutive events from ``q`` on lie less than ``D`` apart (within two adjacent buckets):
neither rule can fire, and the prepared events are exactly the on-time events the Spark
steps would write. Events spread evenly over the batch put ``q`` at three eighths of its
span; a 79th percentile (``percentile_approx``, which this replaced) asked for fewer buckets,
but its per-row insert cost about 1 s of a 31-day backfill's 18 s (2 cores, cold process).

**Certified**: the prepared events are published (:func:`.publish.events_task`: a rename), the
late events and quarantined lines, when the counts show any, are read from the micro-batch
again (a second pass only then). **Not certified** (a quiet hour after ``q``, more than
:data:`MAX_HALF_BUCKETS` buckets, a sum past a 64-bit integer): the Spark steps judge the
batch exactly; when neither rule fires the prepared events are still published, otherwise
they are dropped and written anew. Either way the outputs are the Spark steps' own; a replay
decides alike (the certificate is a proof, so whichever way a replay goes, the rows are the
same).

The 31 NASA days in one micro-batch, ingest only, each way in its own cold process (2 cores,
one run each, alternating; ``bench/bench_single_pass.py`` measures the steps warm): see
docs/performance.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from logstream.connect import is_connect
from logstream.pipeline.ingest.watermark import Split, count_metrics, judged, lateness
from logstream.pipeline.state import SnapshotMeta
from logstream.schema import EVENT_COLUMNS
from logstream.sinks.publish import batch_dir

if TYPE_CHECKING:
    from collections.abc import Collection

    from logstream.pipeline.ingest.context import StageContext

__all__ = [
    "MAX_HALF_BUCKETS",
    "OnePass",
    "certified",
    "gap_floor_ms",
    "one_pass_eligible",
    "prepare_events",
]

#: The most half-delay buckets observed (about 1.9 years of event time at the default
#: 10-minute delay); a micro-batch spanning more is not certified.
MAX_HALF_BUCKETS = 100_000


@dataclass(frozen=True)
class OnePass:
    """What the one pass found.

    Attributes
    ----------
    certified : bool
        Neither in-batch rule can fire (module docstring): ``split`` is the batch's.
    split : Split or None
        The micro-batch's split when certified (None: a micro-batch with no line).
    prepared : bool
        The on-time events are written, hidden (``events/.prepared-batch_id=…``): published
        when the batch's final split is ``prepared``, dropped by the stage otherwise.
    """

    certified: bool
    split: Split | None
    prepared: bool


def gap_floor_ms(events: int, sum_s: int, max_ms: int) -> int:
    """A time at or below the event before any gap that an in-batch rule can quarantine after
    (module docstring: ``q = (5μ − max) / 4``, Markov's inequality), from a lower bound of the
    mean event time.

    Parameters
    ----------
    events : int
        The micro-batch's events (on time and late), at least 1.
    sum_s : int
        The sum of their event times in whole seconds, each rounded down (``floor(t_ms /
        1000)``); the bound allows each to be one second too high.
    max_ms : int
        The newest event time (epoch ms).

    Returns
    -------
    int
        Epoch ms, rounded down.

    Examples
    --------
    >>> gap_floor_ms(4, 0 + 600 + 1_200 + 1_800, 1_800_000)  # 0, 10, 20, 30 minutes
    673750
    """
    mean_lo_x_events = 1000 * (sum_s - events)  # μ ≥ this / events
    return (5 * mean_lo_x_events - events * max_ms) // (4 * events)


def certified(
    events: int,
    min_ms: int | None,
    max_ms: int | None,
    sum_s: int | None,
    halves: Collection[int],
    delay_ms: int,
) -> bool:
    """Whether neither the in-batch rule nor the skew can quarantine an event of a micro-batch
    (module docstring), from what its one pass observed.

    Parameters
    ----------
    events : int
        Its events (on time and late).
    min_ms, max_ms : int or None
        Its oldest and newest event time (epoch ms; None without events).
    sum_s : int or None
        The sum of its event times in whole seconds, rounded down (:func:`gap_floor_ms`);
        None when it passed a 64-bit integer (``try_sum``).
    halves : collection of int
        Its half-delay buckets (``t // (delay_ms // 2)``), each once; more than
        :data:`MAX_HALF_BUCKETS` certify nothing.
    delay_ms : int
        The watermark delay (ms), at least 2.

    Returns
    -------
    bool

    Examples
    --------
    >>> certified(4, 0, 1_800_000, 3_600, {0, 1, 2, 3, 4, 5, 6}, 600_000)
    True
    >>> certified(4, 0, 2_000_000, 3_600, {0, 1, 6}, 600_000)  # 900,000 to 1,800,000 ms empty
    False
    """
    if events < 2 or max_ms is None or min_ms is None or max_ms - min_ms <= delay_ms:
        return True  # neither rule reads such a batch
    if sum_s is None or len(halves) > MAX_HALF_BUCKETS:
        return False
    half = delay_ms // 2
    first, last = gap_floor_ms(events, sum_s, max_ms) // half, max_ms // half
    seen = halves if isinstance(halves, set | frozenset) else set(halves)
    return all(k in seen for k in range(max(first, min_ms // half), last + 1))


def one_pass_eligible(stage: StageContext, batch_id: int) -> bool:
    """Whether micro-batch ``batch_id`` (past the live path) may be delivered in one pass: no
    output but the events reads its parse, its source has no state to commit (deduplication
    runs its plan once), the events are not sent to a sink (which would read them again), a
    watermark delay of at least 2 ms, a classic session (``Dataset.observe`` is Spark's
    classic API here) and the events not published by an earlier attempt (a replay takes the
    Spark steps)."""
    s = stage.settings
    return (
        not s.outputs
        and not stage.stateful_input
        and s.watermark_ms >= 2
        and not stage.publish.sends("events")
        and not is_connect(stage._spark)
        and not batch_dir(stage.output_dir / "events", batch_id).exists()
    )


def prepare_events(
    stage: StageContext,
    parsed: DataFrame,
    batch_id: int,
    prev: SnapshotMeta,
    corrupt: dict[str, str],
) -> OnePass:
    """Parse micro-batch ``batch_id`` once: write its on-time events (by the watermark of
    snapshot ``prev``) hidden under ``events/``, observe its counts and the certificate's
    figures in the same job, and judge it (module docstring).

    Parameters
    ----------
    stage : StageContext
    parsed : DataFrame
        The micro-batch's parsed rows as Spark hands them (not cached).
    batch_id : int
    prev : SnapshotMeta
        The snapshot before this batch.
    corrupt : dict of str to str
        The batch's corrupt input files and their errors.

    Returns
    -------
    OnePass
    """
    s = stage.settings
    columns = lateness(s.watermark_at(prev.max_event_ms))
    is_event, is_late, _ = columns
    t_ms = F.when(is_event, F.unix_millis("event_time"))
    half = F.floor(t_ms / F.lit(s.watermark_ms // 2))
    seen = Observation()
    observed = parsed.observe(
        seen,
        *count_metrics(is_event, is_late),
        F.try_sum(F.floor(t_ms / F.lit(1000))).alias("sum_s"),
        F.slice(F.collect_set(half), 1, MAX_HALF_BUCKETS + 1).alias("halves"),
    )
    root = stage.output_dir / "events"
    on_time = observed.where(is_event & ~is_late).select(*EVENT_COLUMNS)
    with stage._timed("one_pass"):
        if not stage.publish.prepare(on_time, root, batch_id, files=None):
            return OnePass(False, None, False)  # published before: nothing ran, nothing seen
        m = seen.get
    events = m["on_time"] + m["late"]
    if not certified(events, m["min_ms"], m["max_ms"], m["sum_s"], m["halves"], s.watermark_ms):
        return OnePass(False, None, True)
    return OnePass(True, judged(stage, parsed, batch_id, prev, corrupt, m, columns, True), True)
