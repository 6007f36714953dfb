"""coterie's `uniform` next to Apache Kafka's own `UniformAssignor` (the reference version's
group-coordinator jar), on generated groups.

A small Java program, compiled here against the reference jars, hands each group to Kafka's
assignor through a GroupSpec whose member ids come in sorted order (as in Kafka's own
heterogeneous tests) and topic ids whose order is the topic names' order, so Kafka's choices
are deterministic and comparable:

coterie's answer must equal Kafka's exactly (for homogeneous groups with partition numbers
of 16 and more: up to which of its partitions an over-share member keeps, see below).
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from coterie.assign.spec import TopicPartition
from coterie.assign.uniform_heterogeneous import assign_heterogeneous
from coterie.assign.uniform_homogeneous import assign_homogeneous
from tests.fixtures.reference_broker import load_reference_kafka

pytestmark = pytest.mark.reference

HARNESS = r"""
import java.io.*;
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.*;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;

/** One group per input line: KIND#topic:count,...#member|topic,...|topic:p,...#...
 *  One answer per output line: member|topic:p,...#... (or ERROR ...). */
public class UniformHarness {
    record Sub(Set<Uuid> topics) implements MemberSubscription {
        public Optional<String> rackId() { return Optional.empty(); }
        public Optional<String> instanceId() { return Optional.empty(); }
        public Set<Uuid> subscribedTopicIds() { return topics; }
    }
    record Owned(Map<Uuid, Set<Integer>> partitions) implements MemberAssignment {}

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("#", -1);
            boolean homogeneous = parts[0].equals("HOM");
            List<String> sorted = new ArrayList<>();
            for (String t : parts[1].split(",")) sorted.add(t.split(":")[0]);
            Collections.sort(sorted);
            Map<String, Uuid> ids = new HashMap<>();
            Map<Uuid, String> names = new HashMap<>();
            Map<Uuid, Integer> counts = new HashMap<>();
            for (String t : parts[1].split(",")) {
                String[] nc = t.split(":");
                Uuid id = new Uuid(sorted.indexOf(nc[0]) + 1, 0);
                ids.put(nc[0], id);
                names.put(id, nc[0]);
                counts.put(id, Integer.parseInt(nc[1]));
            }
            TreeMap<String, Sub> subs = new TreeMap<>();
            Map<String, Owned> owned = new HashMap<>();
            Map<Uuid, Set<Integer>> assigned = new HashMap<>();
            for (int i = 2; i < parts.length; i++) {
                String[] m = parts[i].split("\\|", -1);
                Set<Uuid> ts = new HashSet<>();
                for (String t : m[1].split(",")) if (!t.isEmpty()) ts.add(ids.get(t));
                subs.put(m[0], new Sub(ts));
                Map<Uuid, Set<Integer>> o = new HashMap<>();
                for (String tp : m[2].split(",")) {
                    if (tp.isEmpty()) continue;
                    String[] x = tp.split(":");
                    int p = Integer.parseInt(x[1]);
                    o.computeIfAbsent(ids.get(x[0]), k -> new HashSet<>()).add(p);
                    assigned.computeIfAbsent(ids.get(x[0]), k -> new HashSet<>()).add(p);
                }
                owned.put(m[0], new Owned(Collections.unmodifiableMap(o)));
            }
            List<String> order = new ArrayList<>(subs.keySet());
            GroupSpec spec = new GroupSpec() {
                public Collection<String> memberIds() { return order; }
                public SubscriptionType subscriptionType() {
                    return homogeneous
                        ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
                }
                public boolean isPartitionAssigned(Uuid t, int p) {
                    return assigned.getOrDefault(t, Set.of()).contains(p);
                }
                public boolean isPartitionAssignable(Uuid t, int p) { return true; }
                public MemberSubscription memberSubscription(String id) { return subs.get(id); }
                public MemberAssignment memberAssignment(String id) { return owned.get(id); }
            };
            SubscribedTopicDescriber describer = new SubscribedTopicDescriber() {
                public int numPartitions(Uuid t) { return counts.getOrDefault(t, -1); }
                public Set<String> racksForPartition(Uuid t, int p) { return Set.of(); }
            };
            StringBuilder out = new StringBuilder();
            try {
                GroupAssignment result = new UniformAssignor().assign(spec, describer);
                for (String m : order) {
                    List<String> tps = new ArrayList<>();
                    MemberAssignment a = result.members().get(m);
                    if (a != null) for (var e : a.partitions().entrySet())
                        for (int p : e.getValue()) tps.add(names.get(e.getKey()) + ":" + p);
                    out.append(m).append('|').append(String.join(",", tps)).append('#');
                }
            } catch (Exception e) {
                out.append("ERROR ").append(e);
            }
            System.out.println(out);
        }
    }
}
"""

Group = tuple[bool, dict[str, int], list[str], dict[str, list[str]],
              dict[str, list[TopicPartition]]]


@pytest.fixture(scope="module")
def kafka_uniform(tmp_path_factory: pytest.TempPathFactory):
    """A function: lines in, Kafka's answer lines out (one JVM for all of them)."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs java and javac")
    rk = load_reference_kafka()
    lib = rk.lib_dir()
    if not (lib / "kafka-group-coordinator-api-" f"{rk.kafka_version()}.jar").exists():
        if rk.missing_tools(("mvn",)):
            pytest.skip("needs the reference Kafka jars (or mvn to fetch them)")
        lib = rk.fetch()
    work = tmp_path_factory.mktemp("uniform-harness")
    (work / "UniformHarness.java").write_text(HARNESS)
    classpath = f"{lib}/*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(work), str(work / "UniformHarness.java")],
                   check=True, capture_output=True, timeout=180)

    def run(lines: list[str]) -> list[str]:
        done = subprocess.run(["java", "-cp", f"{classpath}:{work}", "UniformHarness"],
                              input="\n".join(lines) + "\n", capture_output=True, text=True,
                              check=True, timeout=300)
        return done.stdout.splitlines()

    return run


def generate(rnd: random.Random, homogeneous: bool, big: bool) -> Group:
    """A group with random topics, subscriptions and disjoint ownership (a partition owned by
    a member that does not subscribe to its topic must be dropped by both)."""
    topic_pool = range(12) if big else range(6)
    names = rnd.sample([f"t{i}" for i in topic_pool], rnd.randint(1, len(topic_pool) - 1))
    topics = {t: rnd.randint(1, 60 if big else 12) for t in names}
    members = sorted(rnd.sample([f"m{i}" for i in range(60)], rnd.randint(1, 40 if big else 7)))
    shared = rnd.sample(names, rnd.randint(1, len(names)))
    subs = {m: shared if homogeneous else rnd.sample(names, rnd.randint(0, len(names)))
            for m in members}
    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    if rnd.random() < 0.8:
        for t in names:
            for p in range(topics[t]):
                if rnd.random() < 0.7:
                    owned[rnd.choice(members)].append((t, p))
    return homogeneous, topics, members, subs, owned


def line(group: Group) -> str:
    homogeneous, topics, members, subs, owned = group
    return "#".join(["HOM" if homogeneous else "HET",
                     ",".join(f"{t}:{n}" for t, n in topics.items()),
                     *(f"{m}|{','.join(subs[m])}|{','.join(f'{t}:{p}' for t, p in owned[m])}"
                       for m in members)])


def parse(answer: str) -> dict[str, frozenset[TopicPartition]]:
    assert not answer.startswith("ERROR"), answer
    out = {}
    for chunk in filter(None, answer.split("#")):
        member, tps = chunk.split("|")
        out[member] = frozenset((tp.split(":")[0], int(tp.split(":")[1]))
                                for tp in tps.split(",") if tp)
    return out


def ours(group: Group) -> dict[str, frozenset[TopicPartition]]:
    homogeneous, topics, members, subs, owned = group
    claims = [frozenset(owned[m]) for m in members]
    if homogeneous:
        shape = tuple((t, topics[t]) for t in sorted(subs[members[0]]))
        targets = assign_homogeneous(shape, claims, [0] * len(members))
    else:
        subscribed = {t for m in members for t in subs[m]}
        targets = assign_heterogeneous({t: n for t, n in topics.items() if t in subscribed},
                                       [frozenset(subs[m]) for m in members], claims,
                                       [0] * len(members))
    return dict(zip(members, targets, strict=True))


@pytest.mark.parametrize("big", [False, True])
def test_heterogeneous_equals_kafka(kafka_uniform, big):
    rnd = random.Random(848 + big)
    groups = [generate(rnd, False, big) for _ in range(400)]
    for group, answer in zip(groups, kafka_uniform([line(g) for g in groups]), strict=True):
        assert ours(group) == parse(answer), line(group)


@pytest.mark.parametrize("big", [False, True])
def test_homogeneous_matches_kafka(kafka_uniform, big):
    """Exactly equal while partition numbers stay below 16. Beyond, an over-share member
    keeps its lowest partitions in coterie but the first ones of a Java HashSet's iteration
    in Kafka (not index order), so then each member must get as many partitions and keep as
    many of its own as in Kafka."""
    rnd = random.Random(4848 + big)
    groups = [generate(rnd, True, big) for _ in range(400)]
    for group, answer in zip(groups, kafka_uniform([line(g) for g in groups]), strict=True):
        mine, kafka = ours(group), parse(answer)
        sizes = sorted(map(len, mine.values()))
        assert sizes[-1] - sizes[0] <= 1
        if not big:
            assert mine == kafka, line(group)
            continue
        owned = group[4]
        for m in mine:
            assert len(mine[m]) == len(kafka[m]), line(group)
            assert len(mine[m] & set(owned[m])) == len(kafka[m] & set(owned[m])), line(group)
