"""Analytics: pure DataFrame → DataFrame functions over the canonical event schema.

They know nothing of sources or sinks, so the batch report and the streaming pipeline run the
same code. Functions that group by event-time windows work on streaming DataFrames once the
caller has set a watermark; :func:`top_n_per_group` uses a ranking window and is for batch
DataFrames (in streaming it runs inside ``foreachBatch``).
"""

from logstream.analytics.alerts import anomaly_alerts
from logstream.analytics.pages import (
    is_content_page,
    page_counts_per_window,
    top_content_pages_by_day,
    top_not_found,
    top_urls,
)
from logstream.analytics.sessions import duration_quantiles, session_stats_per_window, sessions
from logstream.analytics.topk import top_n_per_group
from logstream.analytics.traffic import (
    ERROR_STATUS_MIN,
    STATUS_CLASSES,
    general_summary,
    status_class,
    status_class_counts,
    status_counts,
    traffic_per_window,
)
from logstream.analytics.visitors import (
    client_counts_per_window,
    top_clients_per_window,
    top_hosts,
    unique_visitors_per_day,
    visitor_sketches_per_window,
)

__all__ = [
    "ERROR_STATUS_MIN",
    "STATUS_CLASSES",
    "anomaly_alerts",
    "client_counts_per_window",
    "duration_quantiles",
    "general_summary",
    "is_content_page",
    "page_counts_per_window",
    "session_stats_per_window",
    "sessions",
    "status_class",
    "status_class_counts",
    "status_counts",
    "top_clients_per_window",
    "top_content_pages_by_day",
    "top_hosts",
    "top_n_per_group",
    "top_not_found",
    "top_urls",
    "traffic_per_window",
    "unique_visitors_per_day",
    "visitor_sketches_per_window",
]
