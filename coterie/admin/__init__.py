"""Operator-side reads and writes against any Kafka-compatible cluster (coterie or Kafka).

The `coterie topics|groups|...` commands and the web console ask a cluster what it holds through
the Kafka protocol (`coterie.client`), never through the broker's memory, so that they work the
same against coterie and Apache Kafka and obey the cluster's authentication and ACLs.

Modules: `client` (AdminClient: where each request goes, deadlines, coordinator retries),
`groups` (list and describe every group type in one shape), `offsets` (committed, end, lag;
reset, delete), `topics` (list, describe, create, delete, alter).
"""
