"""One read and one rendering of the store per micro-batch, shared by every open page.

Every open page refreshes every ``refresh_s`` seconds, and each refresh reads the store and
draws the panels: 20 pages on the same store did the same work 20 times per micro-batch, on
the cores the pipeline needs (issue 56: 20 clients took a micro-batch to 1.55x). The
dashboard process keeps the newest results instead, keyed by what they depend on: the
store's version (:attr:`Snapshot.version <logstream.dashboard.model.Snapshot.version>`,
which changes with every committed micro-batch), the store's recorded state and the page's
controls. The first refresh that asks for a key computes it; the others that ask for it
meanwhile wait for that result rather than compute it again (cachetools' ``condition``:
no cache stampede when a micro-batch lands and every page asks at once).

What depends on the wall clock is never shared: the time of the read and whether the store
is stale are the asking refresh's own (:func:`logstream.dashboard.data.read_snapshot`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

from cachetools import LRUCache, cached

T = TypeVar("T")

__all__ = ["SharedResults"]


class SharedResults:
    """Results computed once per key and handed to every caller that asks for the key.

    Parameters
    ----------
    maxsize : int
        Results kept (least recently used first out): one per distinct set of controls
        open on pages, per store version still asked for.

    Examples
    --------
    >>> shared = SharedResults(4)
    >>> calls = []
    >>> shared.get(("v1", "all"), lambda: calls.append(1) or "drawn")
    'drawn'
    >>> shared.get(("v1", "all"), lambda: calls.append(1) or "drawn again")
    'drawn'
    >>> len(calls)
    1
    """

    def __init__(self, maxsize: int = 32) -> None:
        self._cache: LRUCache[Hashable, object] = LRUCache(maxsize=maxsize)
        self._condition = threading.Condition()
        # one wrapper for every key: its set of keys being computed is what makes the others
        # wait (a wrapper per call would compute every key as often as it is asked for)
        self._get = cached(self._cache, key=_first, condition=self._condition)(_call_second)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result for ``key``: kept, being computed by another thread (waited for), or
        computed now by ``compute()``; an exception of ``compute`` is raised and nothing is
        kept."""
        return self._get(key, compute)

    def clear(self) -> None:
        """Forget every result."""
        with self._condition:
            self._cache.clear()


def _first(key: Hashable, _compute: Callable[[], object]) -> Hashable:
    return key


def _call_second(_key: Hashable, compute: Callable[[], T]) -> T:
    return compute()
