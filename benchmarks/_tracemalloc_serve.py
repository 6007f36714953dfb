"""Run the coterie command line (`python benchmarks/_tracemalloc_serve.py serve ...`, as
`python -m coterie serve ...`) with tracemalloc on; each SIGUSR1 writes a snapshot to the
next `<COTERIE_TRACEMALLOC_DIR>/snapshot-<n>`, then `<...>.done` once it is complete.

Used by benchmarks/load.py --tracemalloc to see where the broker's memory per member goes.
The frames kept per allocation come from COTERIE_TRACEMALLOC_FRAMES (default 1).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

OUT = Path(os.environ["COTERIE_TRACEMALLOC_DIR"])
tracemalloc.start(int(os.environ.get("COTERIE_TRACEMALLOC_FRAMES", "1")))
_taken = 0


def _dump(signum: int, frame: FrameType | None) -> None:
    global _taken
    path = OUT / f"snapshot-{_taken}"
    _taken += 1
    tracemalloc.take_snapshot().dump(str(path))
    Path(f"{path}.done").touch()


signal.signal(signal.SIGUSR1, _dump)
sys.argv[0] = "coterie"
runpy.run_module("coterie", run_name="__main__", alter_sys=True)
