"""coterie's `__share_group_state` records read by Apache Kafka's own serde (the reference
version's share-coordinator jar): Kafka must parse every record coterie writes into the fields
coterie meant, and write it back byte for byte; and coterie reads what Kafka writes."""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid

import pytest

from coterie.share import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareStateRecord,
    ShareUpdateKey,
    ShareUpdateValue,
    StateBatch,
    decode,
    encode,
)
from tests.fixtures.reference_broker import load_reference_kafka

pytestmark = pytest.mark.reference

HARNESS = r"""
import java.io.*;
import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde;

/** Per input line "KEYHEX VALUEHEX|-": Kafka's reading of the record, and its own bytes. */
public class ShareRecordHarness {
    public static void main(String[] args) throws IOException {
        HexFormat hex = HexFormat.of();
        ShareCoordinatorRecordSerde serde = new ShareCoordinatorRecordSerde();
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


def kafka_uuid(topic_id: uuid.UUID) -> str:
    """How Kafka prints a topic id: URL-safe base64 of its 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


@pytest.fixture(scope="module")
def kafka_serde(tmp_path_factory: pytest.TempPathFactory):
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("needs java and javac")
    rk = load_reference_kafka()
    lib = rk.lib_dir()
    if not (lib / f"kafka-share-coordinator-{rk.kafka_version()}.jar").exists():
        if rk.missing_tools(("mvn",)):
            pytest.skip("needs the reference Kafka jars (or mvn to fetch them)")
        lib = rk.fetch()
    work = tmp_path_factory.mktemp("share-record-harness")
    (work / "ShareRecordHarness.java").write_text(HARNESS)
    classpath = f"{lib}/*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(work),
                    str(work / "ShareRecordHarness.java")],
                   check=True, capture_output=True, timeout=180)

    def run(lines: list[str]) -> list[str]:
        done = subprocess.run(["java", "-cp", f"{classpath}:{work}", "ShareRecordHarness"],
                              input="\n".join(lines) + "\n", capture_output=True, text=True,
                              check=True, timeout=300)
        return done.stdout.splitlines()

    return run


CASES: list[tuple[ShareStateRecord, list[str]]] = [
    (ShareStateRecord(ShareSnapshotKey("sg", T1, 3), ShareSnapshotValue(
        0, 1, 7, 40, 1_700_000_000_000, 1_700_000_000_500,
        (StateBatch(40, 49, 2, 1), StateBatch(50, 50, 0, 3), StateBatch(51, 60, 4, 5)), 11)),
     ["groupId='sg'", f"topicId={kafka_uuid(T1)}", "partition=3", "snapshotEpoch=0",
      "stateEpoch=1", "leaderEpoch=7", "startOffset=40", "deliveryCompleteCount=11",
      "createTimestamp=1700000000000", "writeTimestamp=1700000000500",
      "firstOffset=50", "lastOffset=50", "deliveryState=0", "deliveryCount=3"]),
    (ShareStateRecord(ShareSnapshotKey("sg", T2, 0), ShareSnapshotValue(2, 0, 0, 0, 5, 6)),
     ["stateBatches=[]", "deliveryCompleteCount=-1", "snapshotEpoch=2"]),
    (ShareStateRecord(ShareSnapshotKey("sg", T2, 0), None), ["partition=0"]),
    (ShareStateRecord(ShareUpdateKey("sg", T2, 9), ShareUpdateValue(
        4, 2, -1, (StateBatch(100, 100, 4, 5),), 0)),
     ["groupId='sg'", f"topicId={kafka_uuid(T2)}", "partition=9", "snapshotEpoch=4",
      "leaderEpoch=2", "startOffset=-1", "deliveryCompleteCount=0", "deliveryState=4"]),
    (ShareStateRecord(ShareUpdateKey("grüppe", T1, 1), ShareUpdateValue(0, 0, 12)),
     ["groupId='grüppe'", "startOffset=12", "stateBatches=[]"]),
    (ShareStateRecord(ShareUpdateKey("sg", T1, 1), None), ["partition=1"]),
]


def test_kafka_reads_what_coterie_writes(kafka_serde):
    lines = []
    for record, _ in CASES:
        key, value = encode(record)
        lines.append(f"{key.hex()} {'-' if value is None else value.hex()}")
    answers = kafka_serde(lines)
    assert len(answers) == len(CASES)
    for (record, expected), line, answer in zip(CASES, lines, answers, strict=True):
        assert not answer.startswith("ERROR"), (record, answer)
        key_hex, value_hex, text = answer.split(" ", 2)
        assert f"{key_hex} {value_hex}" == line, (record, answer)
        for fragment in expected:
            assert fragment in text, (fragment, text)
        value = None if value_hex == "-" else bytes.fromhex(value_hex)
        assert decode(bytes.fromhex(key_hex), value) == record


def test_kafka_refuses_what_coterie_refuses(kafka_serde):
    """A null StateBatches array: neither side accepts it."""
    key, value = encode(CASES[3][0])
    assert value is not None
    null_batches = value[:18] + b"\x00"
    [answer] = kafka_serde([f"{key.hex()} {null_batches.hex()}"])
    assert answer.startswith("ERROR"), answer
