"""coterie's consumer in one group with librdkafka and kafka-python consumers: a mixed group
converges, and one member joining triggers an eager or a cooperative (KIP-429) rebalance
whose effect on the other members is measured.

All consumers run as threads of this process (ours on its own event loop), so the
`time.monotonic()` stamps of every member's assign/revoke callbacks and deliveries are on one
clock. A producer thread writes to every partition all along. From the stamps:

- ownership intervals per partition, which must never overlap between two members, at any
  instant of the whole run (every member believes it owns a partition from its assign
  callback to its revoke callback);
- partitions that kept their owner across the join ("unmoved"): under cooperative-sticky
  they see no revocation at all and their records keep arriving during the rebalance; under
  eager range every partition is revoked first;
- the pause of unmoved partitions: time without an owner, and the longest stretch without a
  delivered record, between the join and the end of the rebalance, printed side by side for
  eager and cooperative.

Runs against coterie and, marked `reference`, against Apache Kafka.
"""

from __future__ import annotations

from typing import Any

from tests.integration import member_helpers
from tests.integration.member_helpers import Target
from tests.integration.rebalance_timeline import join_scenario

group_broker = member_helpers.group_broker


def test_one_join_cooperative_keeps_unmoved_partitions_eager_pauses_all(
        group_broker: Target, capsys: Any) -> None:
    coop = join_scenario(group_broker, "cooperative-sticky")
    # The mixed group converged twice (wait_until_settled), and throughout the run no
    # partition ever had two owners.
    assert coop.overlaps == []
    assert coop.moved and len(coop.unmoved) >= 3, (coop.moved, coop.unmoved)
    # Cooperative: partitions that stay put are never revoked, never without an owner, and
    # their records keep being delivered while the group rebalances.
    assert not set(coop.revoked_after_join) & coop.unmoved, coop.revoked_after_join
    assert set(coop.revoked_after_join) == set(coop.moved)
    assert all(coop.unowned[tp] == 0.0 for tp in coop.unmoved), coop.unowned
    assert all(coop.delivered_in_window[tp] > 0 for tp in coop.unmoved), \
        coop.delivered_in_window
    # Our consumer rebalances in its own task: its unmoved partitions never go quiet for
    # long (kafka-python's do: its poll() runs the rebalance).
    ours = coop.owned_by("coterie", coop.unmoved)
    assert ours and all(coop.silence[tp] < coop.window / 2 for tp in ours), coop.silence

    eager = join_scenario(group_broker, "range")
    assert eager.overlaps == []
    # Eager: everything owned before the join was revoked, moved or not, and every partition
    # spent a while without an owner.
    assert set(eager.revoked_after_join) == set(eager.unowned)
    assert all(v > 0.0 for v in eager.unowned.values()), eager.unowned
    with capsys.disabled():
        print(f"\n[{group_broker.kind}] one member joins a group of 3 (6 partitions):")
        print(eager.figures())
        print(coop.figures())
