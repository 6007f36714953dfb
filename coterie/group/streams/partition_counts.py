"""How many partitions each internal topic of a streams topology needs, as Kafka 4.2 decides.

Three steps, in Kafka's order (InternalTopicManager.decidePartitionCounts), each using what
the ones before decided:

1. Repartition topics (`repartition_counts`). A count the application fixed is taken as is.
   Any other repartition topic gets the largest partition count among the inputs of the
   subtopology that writes it: its input topics as they exist, and its repartition inputs
   as decided so far. That is a fixpoint over the graph of subtopologies; a repartition
   topic nobody writes, or a loop with no input of known size, cannot be decided and the
   topology is invalid.
2. Copartitioning (`copartitioned_counts`), group by group: a join's inputs must have the
   same partition count. With an external topic in the group, the external topics must
   agree and every repartition topic of the group is set to their count; a group of only
   repartition topics takes the fixed count of its fixed ones (which must agree), or else
   the largest. A fixed repartition topic that disagrees with the count the group needs is
   incorrectly partitioned.
3. Changelog topics (`changelog_counts`): one partition per task, that is the largest
   partition count among the subtopology's inputs (source and repartition topics).

Where a topic exists, its real partition count is what steps 2 and 3 read (Kafka's
"metadata image first"); a repartition topic that exists with another count than decided is
reported by the caller (`configured_topology`), not here.

Two decisions differ from Kafka 4.2, both where its result depends on hash-map order or on
an unrelated part of the topology:
- Kafka resolves a repartition topic as soon as *one* input of its writer is known; when the
  writer also reads a repartition topic not yet decided, the result depends on the order the
  subtopologies are visited in. Here a repartition topic is decided once all of its writer's
  inputs are, and only a loop (no such topic left) falls back to "the inputs known so far",
  Kafka's rule, for one topic at a time (the first by subtopology id). On a topology
  without loops every order gives Kafka's result for the upstream-first order.
- For a group of only repartition topics, Kafka 4.2 checks the fixed counts of *every*
  repartition topic of the topology, not just the group's (`fixedRepartitionTopics` is the
  topology-wide set): two unrelated `repartition(n)` calls with different n make any such
  group fail, and a group without a fixed topic would take an unrelated topic's count. Here
  only the group's own fixed topics count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from coterie.group.streams.status import GroupStatus, incorrectly_partitioned, topic_list
from coterie.group.streams.topology import Subtopology


class InvalidTopology(Exception):
    """No state of the topics could serve this topology (STREAMS_INVALID_TOPOLOGY)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unconfigurable(Exception):
    """The topics as they are now cannot serve the topology; the members are told why."""

    def __init__(self, status: GroupStatus) -> None:
        super().__init__(status.detail)
        self.status = status


@dataclass(frozen=True, slots=True)
class Inputs:
    """What one subtopology reads: its external source topics (named, or matched by its
    regexes; all exist) and its repartition source topics."""

    sources: tuple[str, ...]
    repartition: tuple[str, ...]

    def all(self) -> tuple[str, ...]:
        return (*self.sources, *self.repartition)


def repartition_counts(subtopologies: Sequence[Subtopology], inputs: Mapping[str, Inputs],
                       existing: Mapping[str, int]) -> dict[str, int]:
    """Step 1: every repartition topic's partition count (written ones included), keyed by
    name. `inputs` is keyed by subtopology id; every source topic is in `existing`."""
    counts = {t.name: t.partitions for s in subtopologies
              for t in s.repartition_source_topics if t.partitions != 0}
    pending = [(s.subtopology_id, sink) for s in subtopologies
               for sink in dict.fromkeys(s.repartition_sink_topics) if sink not in counts]
    while pending:
        # Writers whose inputs are all known first. Only a loop leaves none such; then one
        # topic of it is decided by Kafka's rule, the largest input known so far, and the
        # rest follows from it. (A writer's count cannot change within a round: all its
        # inputs are known, or it is the only one decided.)
        known = [(sid, sink, n) for sid, sink in pending
                 if (n := _largest_known(inputs[sid], counts, existing)) is not None]
        ready = [(sid, sink, n) for sid, sink, n in known
                 if all(r in counts for r in inputs[sid].repartition)] or known[:1]
        if not ready:
            raise InvalidTopology(
                "Could not work out the partition count of repartition topics "
                f"{topic_list(sink for _, sink in pending)}: the topology may have loops "
                "without an input topic.")
        for _, sink, n in ready:
            counts.setdefault(sink, n)  # two writers: the first decided wins
        pending = [(sid, sink) for sid, sink in pending if sink not in counts]
    for s in subtopologies:
        unwritten = [t.name for t in s.repartition_source_topics if t.name not in counts]
        if unwritten:
            raise InvalidTopology(
                f"Could not work out the partition count of repartition topics "
                f"{topic_list(unwritten)}: no subtopology writes to them.")
    return counts


def _largest_known(inputs: Inputs, counts: Mapping[str, int],
                   existing: Mapping[str, int]) -> int | None:
    known = [counts[r] for r in inputs.repartition if r in counts]
    known.extend(existing[t] for t in inputs.sources)
    return max(known, default=None)


def copartitioned_counts(groups: Iterable[Set[str]], fixed: Set[str], flexible: Set[str],
                         existing: Mapping[str, int],
                         decided: Mapping[str, int]) -> dict[str, int]:
    """Step 2: `decided` with the repartition topics of each copartition group set to the
    group's count, group after group (a later group sees what an earlier one set). `fixed`
    and `flexible` are the repartition topics whose count the application did or did not
    fix. Raises Unconfigurable (INCORRECTLY_PARTITIONED_TOPICS)."""
    out = dict(decided)

    def count(topic: str) -> int:
        return existing[topic] if topic in existing else out[topic]

    for group in groups:
        if not group:
            continue
        members = sorted(group)
        repartition = {t: count(t) for t in members if t in fixed or t in flexible}
        external = {t: count(t) for t in members if t not in repartition}
        if external:
            if len(set(external.values())) > 1:
                raise Unconfigurable(incorrectly_partitioned(
                    "Topics that must be copartitioned have different partition counts: "
                    f"[{_java_map(external)}]"))
            n = next(iter(external.values()))
        else:
            own_fixed = {t: n for t, n in repartition.items() if t in fixed}
            if len(set(own_fixed.values())) > 1:
                raise Unconfigurable(incorrectly_partitioned(
                    "Copartitioned repartition topics have different fixed partition counts: "
                    f"[{_java_map(repartition)}]"))
            n = next(iter(own_fixed.values())) if own_fixed else max(repartition.values())
            if n <= 0:
                raise InvalidTopology("No topic of the copartition group "
                                      f"{', '.join(members)} has a partition count.")
        for topic, has in repartition.items():
            out[topic] = n
            if topic in fixed and has != n:
                raise Unconfigurable(incorrectly_partitioned(
                    f"Repartition topic [{topic}] has [{has}] partitions, but the topics it "
                    f"must be copartitioned with have [{n}]."))
    return out


def _java_map(counts: Mapping[str, int]) -> str:
    """A sorted map as Java prints one ({a=1, b=2}), the way Kafka lists such topics."""
    return "{" + ", ".join(f"{t}={counts[t]}" for t in sorted(counts)) + "}"


def changelog_counts(subtopologies: Sequence[Subtopology], inputs: Mapping[str, Inputs],
                     existing: Mapping[str, int], decided: Mapping[str, int]) -> dict[str, int]:
    """Step 3: every changelog topic's partition count, the task count of its subtopology.
    A subtopology with no input at all is an invalid topology (it could have no task)."""
    out: dict[str, int] = {}
    for s in subtopologies:
        tasks = task_count(inputs[s.subtopology_id], existing, decided)
        if tasks is None:
            raise InvalidTopology(f"Subtopology {s.subtopology_id} has no source topics.")
        for name in s.changelog_names():
            out[name] = tasks
    return out


def task_count(inputs: Inputs, existing: Mapping[str, int],
               decided: Mapping[str, int]) -> int | None:
    """A subtopology's number of tasks: one per partition of its largest input, existing
    topics counted as they are, the others as decided. None when it has no input."""
    return max((existing[t] if t in existing else decided[t] for t in inputs.all()),
               default=None)
