"""The long run of the fault simulation (tests/unit/group/faulty_world.py), seeded and
reproducible: random sequences of client moves (consumer-protocol and classic clients in one
group), lost answers, client crashes, a growing topic, offset commits, failed appends and
coordinator crashes, and transactional offset commits ended by COMMIT or ABORT markers,
checked after every step (no partition owned twice, no acknowledged commit lost, the
committed offsets exactly those the log made visible, open transactions' partitions unstable
to require_stable, replayed offsets equal to live); after each sequence the group must come
to rest and replay must equal live.

    .venv/bin/python scripts/simulate.py --steps 1000000 --seed 1

`--txn W` is the share of steps that are transactional (TxnOffsetCommit or the end of a
transaction), 0 for none; the other steps keep their relative weights.

Runs the classic clients eager, then cooperative, each for `--steps` steps. A failure
prints the seed and the sequence number, which replay it exactly (`--seed S --only N`).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.unit.group.faulty_world import PRODUCERS, check_replay_after_faults, run_faulty
from tests.unit.group.test_mixed_properties import (
    CLASSICS,
    CONSUMERS,
    check_safety,
    converge,
)

CLIENTS = CONSUMERS + CLASSICS


def sequence(rng: random.Random, length: int, txn: float = 0.0) -> list[tuple]:
    """One random sequence of operations, with the weights of the property tests; a share
    `txn` of them transactional (two TxnOffsetCommits for one end of a transaction)."""
    out: list[tuple] = []
    for _ in range(length):
        if rng.random() < txn:
            which = rng.randrange(PRODUCERS)
            if rng.random() < 2 / 3:
                bound = rng.randrange(CLIENTS) if rng.random() < 0.5 else None
                out.append(("txn_commit", (which, rng.randrange(1, 128)), bound))
            else:
                out.append(("txn_end", which, rng.random() < 0.5))
            continue
        roll = rng.random()
        if roll < 0.30:
            order = list(range(CLIENTS))
            rng.shuffle(order)
            out.append(("round", (rng.getrandbits(CLIENTS), rng.getrandbits(CLIENTS)), order))
        elif roll < 0.55:
            out.append(("move", rng.randrange(CLIENTS), rng.random() < 0.5))
        elif roll < 0.60:
            out.append(("ack", rng.randrange(CONSUMERS), None))
        elif roll < 0.65:
            out.append(("advance", rng.choice((1_000, 5_000, 12_000)), None))
        elif roll < 0.72:
            out.append(("start", rng.randrange(CLIENTS), None))
        elif roll < 0.75:
            out.append(("leave", rng.randrange(CLIENTS), None))
        elif roll < 0.78:
            out.append(("crash", rng.randrange(CLIENTS), None))
        elif roll < 0.81:
            out.append(("restart", rng.randrange(CLIENTS), None))
        elif roll < 0.82:
            out.append(("grow", None, None))
        elif roll < 0.92:
            out.append(("commit", rng.randrange(CLIENTS), None))
        elif roll < 0.96:
            out.append(("fail", None, None))
        else:
            out.append(("coordinator_crash", None, None))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100_000, help="steps per protocol")
    ap.add_argument("--length", type=int, default=100, help="operations per sequence")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, default=None, help="replay one sequence number")
    ap.add_argument("--txn", type=float, default=0.15,
                    help="share of transactional steps (0: none)")
    args = ap.parse_args()
    for cooperative in (False, True):
        label = "cooperative" if cooperative else "eager"
        steps = sequences = failed_appends = crashes = commits = 0
        txn_committed = txn_aborted = txn_offsets = unstable = 0
        started = time.monotonic()
        number = 0
        while steps < args.steps:
            number += 1
            rng = random.Random(f"{args.seed}/{label}/{number}")
            ops = sequence(rng, args.length, args.txn)
            if args.only is not None and number != args.only:
                steps += len(ops)
                continue
            try:
                w = run_faulty(ops, cooperative)
                converge(w)
                check_safety(w)
                w.check_commits()
                check_replay_after_faults(w)
            except AssertionError:
                traceback.print_exc()
                print(f"FAILED ({label}) seed {args.seed} sequence {number} (replay it with "
                      f"--seed {args.seed} --only {number}):\n{ops}")
                return 1
            steps += len(ops)
            sequences += 1
            failed_appends += w.h.failed_appends
            crashes += w.h.crashes
            commits += len(w.acked)
            txn_committed += w.txn_committed
            txn_aborted += w.txn_aborted
            txn_offsets += w.txn_offsets
            unstable += w.unstable_seen
        took = time.monotonic() - started
        print(f"{label}: {steps} steps in {sequences} sequences, {took:.0f} s "
              f"({steps / max(took, 1e-9):,.0f} steps/s): {failed_appends} failed appends, "
              f"{crashes} coordinator crashes, {commits} partitions with acknowledged "
              f"commits; {txn_offsets} transactional offsets written, {txn_committed} "
              f"transactions committed, {txn_aborted} aborted, {unstable} partitions "
              f"UNSTABLE_OFFSET_COMMIT to require_stable (over all checks); no "
              f"partition owned twice, no acknowledged commit lost, no aborted or open "
              f"offset visible, replayed offsets equal to live at every step, "
              f"every sequence came to rest and replayed equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
