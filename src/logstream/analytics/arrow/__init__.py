"""The stream's analytics over Arrow tables, on the driver, for small micro-batches.

A live micro-batch holds a few thousand lines, and in Spark its time is the fixed cost of
the jobs it runs, not work (docs/streaming.md, "The live path"). The ingest stage therefore
parses and classifies a small micro-batch's lines in **one** Spark job, the shared Spark
definitions (:mod:`logstream.parsing`, :mod:`logstream.analytics.pages`,
:mod:`logstream.analytics.requests`), collects the rows as one Arrow table (``toArrow``,
bounded by :attr:`~logstream.pipeline.ingest.AnalyticsSettings.driver_rows`), and folds them
into the open state with Arrow's compute kernels: the functions of this package. They compute
exactly what the Spark forms compute (:mod:`logstream.analytics.panes`,
:mod:`logstream.analytics.sessions`, :mod:`logstream.analytics.alerts`), row for row, and
the parity tests hold them to it (``tests/analytics/test_arrow.py``,
``tests/pipeline/test_parity.py``).

* :mod:`.panes`: events → panes of every view, merged with the open panes; the final windows
  of every output; the store's live views.
* :mod:`.sessions`: per-visitor minute summaries, merged with the open sessions by the
  session-window rule; the closed sessions and their statistics.
* :mod:`.sketches`: HyperLogLog and KLL sketches in the byte formats of Spark's
  ``hll_sketch_agg`` and ``kll_sketch_agg_bigint`` (Apache DataSketches).
* :mod:`.classify`: what a small micro-batch classifies per distinct value rather than per
  event, memoised for the process: user-agent families, agent classes, countries, sections,
  networks.
"""
