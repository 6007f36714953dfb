"""What the declared-size walk (coterie.wire.bounds) adds to decoding a request (issue 10).

Every request frame is walked along its schema before kio decodes it, so that no declared
length or count can make kio reserve more memory than the frame could fill. This prints, for
a settled member's ConsumerGroupHeartbeat v1 (the most frequent request of a busy group
coordinator) and a JoinGroup v9, the time of `decode_request_and_header` (walk included) and
of the walk alone, in the same run, and the walk's share. Best of 3 repeats of 200,000 calls.

    .venv/bin/python benchmarks/bounds_walk.py
"""

from __future__ import annotations

import datetime
import timeit

from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol

from coterie.wire.bounds import check_request
from coterie.wire.codec import decode_request_and_header, encode_request

CALLS = 200_000


def _frames() -> dict[str, tuple[bytes, type, int, int]]:
    unchanged = datetime.timedelta(milliseconds=-1)
    heartbeat = ConsumerGroupHeartbeatRequest(
        group_id="group-1", member_id="AAAAAAAAAAAAAAAAAAAAAA", member_epoch=7,
        instance_id=None, rack_id=None, rebalance_timeout=unchanged,
        subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=None)
    join = JoinGroupRequest(
        group_id="group-1", session_timeout=datetime.timedelta(seconds=45),
        rebalance_timeout=datetime.timedelta(minutes=5), member_id="rdkafka-" + "0" * 36,
        group_instance_id=None, protocol_type="consumer", protocols=tuple(
            JoinGroupRequestProtocol(name=name, metadata=bytes(64))
            for name in ("range", "roundrobin")), reason=None)
    return {
        "ConsumerGroupHeartbeat v1 (settled)": (
            bytes(encode_request(1, heartbeat, "rdkafka"))[4:], type(heartbeat), 68, 1),
        "JoinGroup v9": (bytes(encode_request(1, join, "rdkafka"))[4:], type(join), 11, 9),
    }


def main() -> None:
    for label, (frame, schema, key, version) in _frames().items():
        whole = min(timeit.repeat(lambda f=frame, k=key, v=version:
                                  decode_request_and_header(f, k, v),
                                  number=CALLS, repeat=3)) / CALLS
        walk = min(timeit.repeat(lambda f=frame, s=schema: check_request(f, s),
                                 number=CALLS, repeat=3)) / CALLS
        print(f"{label}: {len(frame)} bytes; decode with walk {whole * 1e6:.2f} us, "
              f"walk alone {walk * 1e6:.2f} us ({walk / whole:.0%} of the decode)")


if __name__ == "__main__":
    main()
