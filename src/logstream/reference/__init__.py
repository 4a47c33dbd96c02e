"""Reference data: enrich every event with static tables that may be refreshed.

The stream–static join of the book (Ch. 8–9) and the Spark guide ("Join Operations"):
client networks, user-agent classes and site sections, broadcast into the pipeline and the
batch report alike. :mod:`logstream.reference.tables` loads, validates and versions the
tables; :mod:`logstream.reference.enrich` joins them with native Spark expressions.
"""

from logstream.reference.enrich import (
    ENRICHMENT_COLUMNS,
    Enricher,
    agent_class_column,
    ipv4_number,
)
from logstream.reference.tables import (
    AGENT_CLASSES,
    CRAWLER_CLASS,
    REFERENCE_KINDS,
    ReferenceTables,
    Table,
    builtin_agent_rules,
    load_table,
    parse_reference_options,
)

__all__ = [
    "AGENT_CLASSES",
    "CRAWLER_CLASS",
    "ENRICHMENT_COLUMNS",
    "REFERENCE_KINDS",
    "Enricher",
    "ReferenceTables",
    "Table",
    "agent_class_column",
    "builtin_agent_rules",
    "ipv4_number",
    "load_table",
    "parse_reference_options",
]
