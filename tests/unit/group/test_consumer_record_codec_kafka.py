"""coterie's consumer-group records read by Apache Kafka's own record serde (the reference
version's group-coordinator jar): Kafka must parse every record coterie writes into the fields
coterie meant, and write it back byte for byte."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from coterie.group.records import consumer_codec as codec
from coterie.group.records.consumer import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from coterie.group.records.record import Record
from tests.fixtures.reference_broker import load_reference_kafka

pytestmark = pytest.mark.reference

HARNESS = r"""
import java.io.*;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;

/** Per input line "KEYHEX VALUEHEX|-": Kafka's reading of the record, and its own bytes. */
public class RecordHarness {
    public static void main(String[] args) throws IOException {
        HexFormat hex = HexFormat.of();
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] kv = line.split(" ");
            ByteBuffer value = kv[1].equals("-") ? null : ByteBuffer.wrap(hex.parseHex(kv[1]));
            try {
                ByteBuffer key = ByteBuffer.wrap(hex.parseHex(kv[0]));
                CoordinatorRecord r = serde.deserialize(key, value);
                byte[] v = serde.serializeValue(r);
                System.out.println(hex.formatHex(serde.serializeKey(r)) + " "
                    + (v == null ? "-" : hex.formatHex(v)) + " " + r.key() + " "
                    + (r.value() == null ? "null" : r.value().message()));
            } catch (Exception e) {
                System.out.println("ERROR " + e);
            }
        }
    }
}
"""

T1, T2 = uuid.UUID(int=0x1234), uuid.UUID("6d3c0b8e-4f3a-4d7e-9a51-3c2f1e0d9b8a")


@pytest.fixture(scope="module")
def kafka_serde(tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs java and javac")
    rk = load_reference_kafka()
    lib = rk.lib_dir()
    if not (lib / f"kafka-group-coordinator-{rk.kafka_version()}.jar").exists():
        if rk.missing_tools(("mvn",)):
            pytest.skip("needs the reference Kafka jars (or mvn to fetch them)")
        lib = rk.fetch()
    work = tmp_path_factory.mktemp("record-harness")
    (work / "RecordHarness.java").write_text(HARNESS)
    classpath = f"{lib}/*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(work), str(work / "RecordHarness.java")],
                   check=True, capture_output=True, timeout=180)

    def run(lines: list[str]) -> list[str]:
        done = subprocess.run(["java", "-cp", f"{classpath}:{work}", "RecordHarness"],
                              input="\n".join(lines) + "\n", capture_output=True, text=True,
                              check=True, timeout=300)
        return done.stdout.splitlines()

    return run


CASES: list[tuple[Record, list[str]]] = [
    (Record(ConsumerGroupMetadataKey("grp"), ConsumerGroupMetadataValue(21, -42)),
     ["groupId='grp'", "epoch=21", "metadataHash=-42"]),
    (Record(ConsumerGroupMetadataKey("grp"), ConsumerGroupMetadataValue(7)),
     ["epoch=7", "metadataHash=0"]),
    (Record(ConsumerGroupMetadataKey("grp"), None), ["groupId='grp'"]),
    (Record(ConsumerGroupMemberMetadataKey("grp", "m-1"), ConsumerGroupMemberMetadataValue(
        "inst", "rack-a", "client", "/10.0.0.1", ("foo", "bar"), "", 30000, "uniform")),
     ["memberId='m-1'", "instanceId='inst'", "rackId='rack-a'", "clientHost='/10.0.0.1'",
      "subscribedTopicNames=[foo, bar]", "rebalanceTimeoutMs=30000",
      "serverAssignor='uniform'",
      "classicMemberMetadata=null"]),
    (Record(ConsumerGroupMemberMetadataKey("grp", "m-2"), ConsumerGroupMemberMetadataValue(
        None, None, "c", "h", (), "fo.*", 1, None,
        ClassicMemberMetadata(45000, (("range", b"\x00\x01"), ("roundrobin", b""))))),
     ["instanceId=null", "subscribedTopicRegex='fo.*'", "sessionTimeoutMs=45000",
      "name='range'", "name='roundrobin'"]),
    (Record(ConsumerGroupTargetAssignmentMetadataKey("grp"),
            ConsumerGroupTargetAssignmentMetadataValue(22)), ["assignmentEpoch=22"]),
    (Record(ConsumerGroupTargetAssignmentMemberKey("grp", "m-1"),
            ConsumerGroupTargetAssignmentMemberValue(frozenset({(T1, 0), (T1, 5), (T2, 2)}))),
     ["partitions=[0, 5]", "partitions=[2]"]),
    (Record(ConsumerGroupCurrentMemberAssignmentKey("grp", "m-1"),
            ConsumerGroupCurrentMemberAssignmentValue(
                22, 21, 1, frozenset({(T1, 0)}), frozenset({(T2, 3), (T2, 4)}))),
     ["memberEpoch=22", "previousMemberEpoch=21", "state=1", "partitions=[0]",
      "partitions=[3, 4]"]),
    (Record(ConsumerGroupCurrentMemberAssignmentKey("grp", "m-1"), None), ["memberId='m-1'"]),
    (Record(ConsumerGroupRegularExpressionKey("grp", "orders.*"),
            ConsumerGroupRegularExpressionValue(("orders", "orders-eu"), 17, 1_700_000_000_000)),
     ["regularExpression='orders.*'", "topics=[orders, orders-eu]", "version=17",
      "timestamp=1700000000000"]),
]


def test_kafka_reads_what_coterie_writes(kafka_serde):
    lines = []
    for record, _ in CASES:
        key, value = codec.encode(record)
        lines.append(f"{key.hex()} {'-' if value is None else value.hex()}")
    answers = kafka_serde(lines)
    assert len(answers) == len(CASES)
    for (record, expected), line, answer in zip(CASES, lines, answers, strict=True):
        assert not answer.startswith("ERROR"), (record, answer)
        key_hex, value_hex, text = answer.split(" ", 2)
        assert f"{key_hex} {value_hex}" == line, (record, answer)
        for fragment in expected:
            assert fragment in text, (fragment, text)
        # And coterie reads back what Kafka wrote.
        value = None if value_hex == "-" else bytes.fromhex(value_hex)
        assert codec.decode(bytes.fromhex(key_hex), value) == record
