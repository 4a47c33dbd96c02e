"""Regenerate what is generated from ``logstream run``'s configuration models.

``python -m logstream.cli.regenerate`` rewrites :mod:`logstream.cli._run_model` (the models'
defaults and descriptions, read by the CLI without importing them) and docs/options.md;
``--check`` exits 1 when either is stale instead (:mod:`logstream.cli.run_options`).
"""

from __future__ import annotations

import subprocess
import sys

from logstream.cli.run_options import DOCS, REPO, SNAPSHOT, model_snapshot

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the snapshot and docs/options.md (``--check``: exit 1 when either is stale).

    The snapshot is written first and docs/options.md from it in a new process, so one run
    brings both up to date.
    """
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    snapshot = model_snapshot()
    stale = [p for p in (SNAPSHOT,) if p.read_text(encoding="utf-8") != snapshot]
    if not check and stale:
        SNAPSHOT.write_text(snapshot, encoding="utf-8")
    docs = subprocess.run(
        [
            sys.executable,
            "-c",
            "from logstream.cli.run_options import options_markdown as m; print(m(), end='')",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if not DOCS.is_file() or DOCS.read_text(encoding="utf-8") != docs:
        stale.append(DOCS)
        if not check:
            DOCS.write_text(docs, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if check else 'rewrote'}: {path.relative_to(REPO)}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
