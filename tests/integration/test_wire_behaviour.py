"""The wire layer over TCP: ApiVersions, pipelining, frame limits, bad frames, unknown APIs."""

from __future__ import annotations

import struct
import time

from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsRespV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v17.request import FetchRequest as FetchV17
from kio.schema.fetch.v17.response import FetchResponse as FetchRespV17
from kio.schema.metadata.v1.request import MetadataRequest as MetadataV1
from kio.schema.metadata.v1.response import MetadataResponse as MetadataRespV1

from tests.kafka_raw import RawConnection


def _api_map(resp) -> dict[int, tuple[int, int]]:
    return {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}


def test_api_versions_v0_and_v3(coterie):
    with RawConnection(coterie.host, coterie.port) as c:
        r0 = c.request(ApiVersionsV0())
        r3 = c.request(ApiVersionsV3(client_software_name="t", client_software_version="1"))
    assert r0.error_code == ErrorCode.none
    assert r3.error_code == ErrorCode.none
    apis = _api_map(r3)
    assert apis[18] == (0, 3)
    assert apis[3] == (0, 13)
    assert apis[1] == (4, 16)
    assert apis[0][0] == 3
    assert _api_map(r0) == apis


def test_api_versions_newer_than_ours_gets_v0_answer(coterie):
    """A client asking ApiVersions v4 must get a v0-shaped UNSUPPORTED_VERSION with our list."""
    with RawConnection(coterie.host, coterie.port) as c:
        corr = c.send(ApiVersionsV4(client_software_name="t", client_software_version="1"))
        got, body = c.recv(ApiVersionsRespV0)
    assert got == corr
    assert body.error_code == ErrorCode.unsupported_version
    assert _api_map(body)[18] == (0, 3)


def test_unsupported_version_of_known_api(coterie):
    with RawConnection(coterie.host, coterie.port) as c:
        req = FetchV17(max_wait=__import__("datetime").timedelta(0), min_bytes=0,
                       max_bytes=1000, isolation_level=0, session_id=0, session_epoch=-1,
                       topics=(), forgotten_topics_data=(), rack_id="")
        corr = c.send(req)
        got, body = c.recv(FetchRespV17)
    assert got == corr
    assert body.error_code == ErrorCode.unsupported_version


def test_pipelined_requests_answered_in_order(coterie):
    with RawConnection(coterie.host, coterie.port) as c:
        from coterie.wire.codec import encode_request
        blob = b"".join(
            encode_request(i, MetadataV1(topics=()) if i % 2 else ApiVersionsV0())
            for i in range(1, 101)
        )
        c.send_bytes(blob)
        seen = []
        for i in range(1, 101):
            cls = MetadataRespV1 if i % 2 else ApiVersionsRespV0
            corr, _ = c.recv(cls)
            seen.append(corr)
    assert seen == list(range(1, 101))


def test_unknown_api_key_closes_connection_only(coterie):
    with RawConnection(coterie.host, coterie.port) as bystander:
        with RawConnection(coterie.host, coterie.port) as c:
            body = struct.pack(">hhi", 9999, 0, 1) + struct.pack(">h", -1)
            c.send_bytes(struct.pack(">i", len(body)) + body)
            assert c.is_closed_by_peer()
        assert bystander.request(ApiVersionsV0()).error_code == ErrorCode.none
    assert "unknown api_key=9999" in coterie.log_text()


def test_undecodable_frame_closes_that_connection_only(coterie):
    with RawConnection(coterie.host, coterie.port) as bystander:
        with RawConnection(coterie.host, coterie.port) as c:
            # A Metadata v1 header followed by a topic array claiming 1e9 entries.
            body = struct.pack(">hhih", 3, 1, 7, -1) + struct.pack(">i", 1_000_000_000)
            c.send_bytes(struct.pack(">i", len(body)) + body)
            assert c.is_closed_by_peer()
        assert bystander.request(ApiVersionsV0()).error_code == ErrorCode.none


def test_frame_above_socket_request_max_bytes_closes_connection(coterie_factory):
    broker = coterie_factory(config={"socket.request.max.bytes": "1024"})
    with RawConnection(broker.host, broker.port) as bystander:
        with RawConnection(broker.host, broker.port) as c:
            c.send_bytes(struct.pack(">i", 2048) + b"\0" * 64)
            assert c.is_closed_by_peer()
        assert bystander.request(ApiVersionsV0()).error_code == ErrorCode.none
    assert "socket.request.max.bytes=1024" in broker.log_text()


def test_half_sent_frame_then_disconnect_leaves_broker_healthy(coterie):
    c = RawConnection(coterie.host, coterie.port)
    c.send_bytes(struct.pack(">i", 500) + b"\0" * 10)
    c.close()
    time.sleep(0.2)
    with RawConnection(coterie.host, coterie.port) as c2:
        assert c2.request(ApiVersionsV0()).error_code == ErrorCode.none


def test_repeated_requests_are_answered_each_in_its_own_right(coterie):
    """The broker keeps recent small requests decoded and reuses one when the same bytes
    come again with another correlation id (Broker._handle_frame). Each
    answer must still carry its own correlation id, and a request that differs in any byte
    must be decoded afresh."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
    from kio.schema.describe_groups.v5.response import DescribeGroupsResponse

    with RawConnection(coterie.host, coterie.port) as conn:
        for round_ in range(3):
            for group in ("memo-a", "memo-b", "memo-b", "memo-a"):
                sent = conn.send(DescribeGroupsRequest(groups=(group,),
                                                       include_authorized_operations=False))
                correlation, answer = conn.recv(DescribeGroupsResponse)
                assert correlation == sent
                assert [g.group_id for g in answer.groups] == [group], (round_, group)
