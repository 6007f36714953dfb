"""Run the coterie command line (`python benchmarks/_instrumented_serve.py serve ...`, as
`python -m coterie serve ...`) with measuring hooks that benchmarks/load.py reads, each on when
its environment variable is set:

* COTERIE_TRACEMALLOC_DIR: tracemalloc on (COTERIE_TRACEMALLOC_FRAMES frames per allocation,
  default 1); each SIGUSR1 writes a snapshot to the next `<dir>/snapshot-<n>`, then
  `<dir>/snapshot-<n>.done` once it is complete.
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
    path = Path(os.environ["COTERIE_TRACEMALLOC_DIR"]) / f"snapshot-{_taken}"
    _taken += 1
    tracemalloc.take_snapshot().dump(str(path))
    Path(f"{path}.done").touch()


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
if os.environ.get("COTERIE_GC_LOG"):
    gc.callbacks.append(_gc_hook(open(os.environ["COTERIE_GC_LOG"], "a")))  # noqa: SIM115
sys.argv[0] = "coterie"
runpy.run_module("coterie", run_name="__main__", alter_sys=True)
