"""The broker's log cleaner task: compacts the partitions of compacted topics, one at a time.

Every `log.cleaner.backoff.ms` (Kafka's name and default, 15 s) it asks each compacted
partition whether a pass is due (coterie.log.cleaner has the rules), takes the dirtiest, and
runs the pass on a worker thread: reading and rewriting segments takes time in proportion to
the log, and the event loop must keep answering heartbeats meanwhile. The swap back into the
log happens on the loop, between requests, and costs no reads. A partition that still has
work goes again at once; when none has, the task sleeps.

`__consumer_offsets` is compacted by the same cleaner: the group runtime only rolls its
active segment when enough history has piled up (coterie.broker.offsets_topic).

On a cluster (coterie.broker.cluster) the leader's copy is what the cleaner reads, and the
database must lose what the copy loses, or a failover would bring it back: `publish`, given,
does the pass to the database before the pass is installed; when it cannot (the lease is
gone, the database is away, the pass reaches past what the database holds), the pass is
thrown away and the copy stays as the database is.

Settings (Kafka's names): log.cleaner.enable, log.cleaner.backoff.ms,
log.cleaner.dedupe.buffer.size (the budget of the key map of one pass; coterie counts about
100 bytes of Python objects per key, so it holds fewer keys than Kafka's 24 bytes each, and
a large dirty section is cleaned in several passes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from coterie.log.cleaner import CleaningStopped, CleanJob, CleanResult, run_cleaning
from coterie.log.files import unlink_all
from coterie.log.manager import LogManager
from coterie.log.partition import PartitionLog

log = logging.getLogger("coterie.cleaner")


# Does a pass of (topic, partition, its log) elsewhere first; False: throw the pass away.
Publish = Callable[[str, int, PartitionLog, CleanResult], Awaitable[bool]]


class LogCleaner:
    """Finds the dirtiest compacted partition and cleans it, over and over."""

    def __init__(self, logs: LogManager, now_ms: Callable[[], int], *, backoff_ms: int,
                 key_budget_bytes: int,
                 publish: Publish | None = None,
                 leads: Callable[[str, int], bool] | None = None) -> None:
        self.logs = logs
        self.publish = publish
        self.leads = leads  # a cluster: only the partitions this broker leads are cleaned
        self.now_ms = now_ms
        self.backoff_s = backoff_ms / 1000
        self.key_budget_bytes = key_budget_bytes
        self._stop = threading.Event()
        self._wake = asyncio.Event()
        # Told of every pass that cleaned a partition (the broker's metrics), if set.
        self.on_cleaned: Callable[[], None] | None = None

    def wake(self) -> None:
        """Look for work now instead of at the end of the backoff (tests, config changes)."""
        self._wake.set()

    def stop(self) -> None:
        """Make a pass under way give up at its next segment (the broker is stopping)."""
        self._stop.set()

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                worked = await self.clean_once()
            except Exception:
                log.exception("log cleaner pass failed")
                worked = False
            if not worked:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.backoff_s)

    def _dirtiest(self) -> tuple[str, int, PartitionLog, CleanJob] | None:
        now = self.now_ms()
        best: tuple[str, int, PartitionLog, CleanJob] | None = None
        for name, index, part in self.logs.compacted_partitions():
            if self.leads is not None and not self.leads(name, index):
                continue
            job = part.cleaning_job(now, self.key_budget_bytes)
            if job is not None and (best is None or job.dirty_ratio > best[3].dirty_ratio):
                best = (name, index, part, job)
        return best

    async def clean_once(self) -> bool:
        """One pass over the dirtiest partition due; False when none is."""
        found = self._dirtiest()
        if found is None:
            return False
        topic, index, part, job = found
        name = f"{topic}-{index}"
        loop = asyncio.get_running_loop()
        started = loop.time()
        part.cleaning = True
        try:
            result = await asyncio.to_thread(run_cleaning, job, self._stop)
            if self.publish is not None and not await self.publish(topic, index, part, result):
                await asyncio.to_thread(unlink_all, [g.path for g in result.groups])
                return False
        except CleaningStopped:
            return False
        finally:
            part.cleaning = False
        retired: list[Path] = []
        installed = part.install_cleaned(result, retired)
        took = loop.time() - started
        await asyncio.to_thread(unlink_all, retired)
        if installed and self.on_cleaned is not None:
            self.on_cleaned()
        if installed:
            log.info("cleaned %s up to offset %d in %.2f s: %d segments into %d, %.1f MB "
                     "read, %.1f MB written, %d records removed", name, result.cleaned_to,
                     took, sum(len(g.replaced) for g in result.groups), len(result.groups),
                     result.bytes_read / 1e6, result.bytes_written / 1e6,
                     result.records_removed)
        return installed

