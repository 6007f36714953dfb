"""Run the coterie command line (`python benchmarks/_instrumented_serve.py serve ...`, as
`python -m coterie serve ...`) with measuring hooks that benchmarks/load.py reads, each on when
its environment variable is set:

* COTERIE_TRACEMALLOC_DIR: tracemalloc on (COTERIE_TRACEMALLOC_FRAMES frames per allocation,
  default 1); each SIGUSR1 writes a snapshot to the next `<dir>/snapshot-<n>`, then
  `<dir>/snapshot-<n>.done` once it is complete.
* COTERIE_MALLOCSTATS_DIR (instead): each SIGUSR1 writes `<dir>/mallocstats-<n>`, Python's
  small-object allocator statistics (`sys._debugmallocstats`: how full its pools and arenas
  are, where RSS above the live objects goes; only without tracemalloc, which hides them),
  then `<dir>/snapshot-<n>.done`.
* COTERIE_GC_LOG: one line per full (generation 2) garbage collection, appended to that file:
  wall-clock end time (s), its duration (ms), objects collected.
"""

from __future__ import annotations

import gc
import os
import runpy
import signal
import sys
import time
import tracemalloc
from pathlib import Path
from types import FrameType
from typing import Any

_taken = 0
_gc_started = 0.0


def _dump(signum: int, frame: FrameType | None) -> None:
    global _taken
    directory = os.environ.get("COTERIE_TRACEMALLOC_DIR") or os.environ[
        "COTERIE_MALLOCSTATS_DIR"]
    path = Path(directory) / f"snapshot-{_taken}"
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(str(path))
    else:
        _malloc_stats(path.with_name(f"mallocstats-{_taken}"))
    _taken += 1
    Path(f"{path}.done").touch()


def _malloc_stats(path: Path) -> None:
    """sys._debugmallocstats writes to the C stderr: point descriptor 2 at `path` meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "w") as out:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _gc_hook(log: Any) -> Any:
    def hook(phase: str, info: dict[str, int]) -> None:
        global _gc_started
        if info["generation"] != 2:
            return
        if phase == "start":
            _gc_started = time.perf_counter()
        else:
            log.write(f"{time.time():.3f} {(time.perf_counter() - _gc_started) * 1000:.2f} "
                      f"{info['collected']}\n")
            log.flush()
    return hook


if os.environ.get("COTERIE_TRACEMALLOC_DIR"):
    tracemalloc.start(int(os.environ.get("COTERIE_TRACEMALLOC_FRAMES", "1")))
    signal.signal(signal.SIGUSR1, _dump)
elif os.environ.get("COTERIE_MALLOCSTATS_DIR"):
    signal.signal(signal.SIGUSR1, _dump)
if os.environ.get("COTERIE_GC_LOG"):
    gc.callbacks.append(_gc_hook(open(os.environ["COTERIE_GC_LOG"], "a")))  # noqa: SIM115
sys.argv[0] = "coterie"
runpy.run_module("coterie", run_name="__main__", alter_sys=True)
