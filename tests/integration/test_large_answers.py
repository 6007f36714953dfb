"""Large answers (coterie.broker.large): the same answers as the ordinary path, and other
connections served while one is built.

* An OffsetFetch of 250,000 partitions is read in slices and encoded on a worker thread:
  while it is being answered, another connection's requests are answered, many of them
  (before, the broker answered nobody for about two seconds).
* The large path answers exactly what the ordinary path answers (committed, unknown and
  never-committed partitions, in the asked order; several groups; the old versions).
* DescribeGroups of hundreds of groups and ListGroups of thousands take the large path
  and list every group.
* The all-topics Metadata answer is kept between requests and made again when a topic
  changes.
"""

from __future__ import annotations

import select

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchV7
from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic as TopicV7
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)

from coterie.broker.large import LARGE
from coterie.wire.codec import encode_request
from tests.integration.test_data_plane_raw import create
from tests.kafka_raw import RawConnection

API_VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="1")


def _commit(conn: RawConnection, group: str, topic: str, offsets: dict[int, int]) -> None:
    answer = conn.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=(OffsetCommitRequestTopic(name=topic, partitions=tuple(
            OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                         committed_leader_epoch=-1,
                                         committed_metadata=f"m{p}")
            for p, o in offsets.items())),)))
    codes = {p.error_code for t in answer.topics for p in t.partitions}
    assert codes == {ErrorCode.none}, answer


def _fetch_v9(conn: RawConnection, groups: dict[str, dict[str, list[int]] | None]) -> list:
    answer = conn.request(OffsetFetchRequest(groups=tuple(
        OffsetFetchRequestGroup(
            group_id=g, member_id=None, member_epoch=-1,
            topics=None if topics is None else tuple(
                OffsetFetchRequestTopics(name=t, partition_indexes=tuple(ps))
                for t, ps in topics.items()))
        for g, topics in groups.items()), require_stable=False))
    return [(g.group_id, g.error_code, [
        (t.name, [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                  for p in t.partitions]) for t in g.topics]) for g in answer.groups]


def test_large_offset_fetch_answers_as_the_ordinary_path(coterie):
    with RawConnection(coterie.host, coterie.port, timeout=60) as conn:
        create(conn, "big", 8)
        _commit(conn, "g1", "big", {0: 10, 3: 30, 7: 70})
        _commit(conn, "g2", "big", {1: 11})
        small = {"big": [7, 0, 1, 3], "absent": [0, 2]}
        # The same request padded past LARGE with partitions nobody committed.
        padding = {"absent": [0, 2], "pad": list(range(LARGE + 10))}
        large = {"big": [7, 0, 1, 3], **padding}
        ordinary = _fetch_v9(conn, {"g1": small, "g2": None})
        big = _fetch_v9(conn, {"g1": large, "g2": None})
        assert big[0][2][0] == ordinary[0][2][0]  # the committed topic, in the asked order
        assert big[0][2][0][1] == [(7, 70, "m7", 0), (0, 10, "m0", 0), (1, -1, "", 0),
                                   (3, 30, "m3", 0)]
        assert big[0][2][1] == ordinary[0][2][1]  # an unknown topic answers -1 per partition
        assert big[0][2][2][1] == [(p, -1, "", 0) for p in range(LARGE + 10)]
        assert big[1] == ordinary[1] == ("g2", 0, [("big", [(1, 11, "m1", 0)])])
        # Old versions (one group, top-level topics) take the same path.
        v7 = conn.request(OffsetFetchV7(group_id="g1", require_stable=False, topics=(
            TopicV7(name="big", partition_indexes=(3, 5)),
            TopicV7(name="pad", partition_indexes=tuple(range(LARGE))))))
        assert v7.error_code == ErrorCode.none
        assert [(p.partition_index, p.committed_offset) for p in v7.topics[0].partitions] == [
            (3, 30), (5, -1)]
        assert len(v7.topics[1].partitions) == LARGE


def test_others_are_served_while_a_huge_offset_fetch_is_answered(coterie):
    """While one connection's OffsetFetch of 250,000 partitions is being answered, another
    connection sends ApiVersions requests one after another until the first bytes of the big
    answer arrive: with the loop free between slices, many are answered meanwhile (with
    the old single-piece answer, none or one)."""
    frame = encode_request(1, OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
        group_id="huge", member_id=None, member_epoch=-1, topics=tuple(
            OffsetFetchRequestTopics(name=f"t{t:03d}", partition_indexes=tuple(range(1000)))
            for t in range(250))),), require_stable=False), client_id="hog")
    with RawConnection(coterie.host, coterie.port, timeout=120) as hog, \
            RawConnection(coterie.host, coterie.port, timeout=30) as other:
        assert other.request(API_VERSIONS).error_code == ErrorCode.none
        hog.send_bytes(frame)
        answered = 0
        while not select.select([hog.sock], [], [], 0)[0]:
            assert other.request(API_VERSIONS).error_code == ErrorCode.none
            answered += 1
        big = hog.recv_frame()
        assert len(big) > 250_000 * 8  # the whole answer came, every partition in it
        assert answered >= 20, f"only {answered} requests answered meanwhile"


def test_describe_and_list_many_groups(coterie):
    with RawConnection(coterie.host, coterie.port, timeout=60) as conn:
        create(conn, "idle", 1)
        names = [f"idle-{i:04d}" for i in range(LARGE + 5)]
        part = (OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                             committed_leader_epoch=-1,
                                             committed_metadata=None),)
        for name in names:  # pipelined: one answer read per commit, all at the end
            conn.send(OffsetCommitRequest(
                group_id=name, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None,
                topics=(OffsetCommitRequestTopic(name="idle", partitions=part),)))
        for _ in names:
            conn.recv_frame()
        listed = conn.request(ListGroupsRequest(states_filter=(), types_filter=()))
        assert listed.error_code == ErrorCode.none
        assert set(names) <= {g.group_id for g in listed.groups}
        asked = (*names[:300], "never-seen")
        described = conn.request(DescribeGroupsRequest(groups=asked,
                                                       include_authorized_operations=False))
        assert [g.group_id for g in described.groups] == list(asked)
        assert {g.group_state for g in described.groups[:300]} == {"Empty"}
        assert described.groups[-1].group_state == "Dead"
        assert all(g.error_code == ErrorCode.none for g in described.groups)


def test_all_topics_metadata_is_kept_until_a_topic_changes(coterie):
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    with RawConnection(coterie.host, coterie.port) as conn:
        create(conn, "first", 2)
        before = conn.request(request)
        again = conn.request(request)
        assert before == again
        create(conn, "second", 3)
        after = conn.request(request)
        topics = {t.name: len(t.partitions) for t in after.topics}
        assert topics["first"] == 2 and topics["second"] == 3
        assert "second" not in {t.name for t in before.topics}
