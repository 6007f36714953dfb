"""What a member's subscription does to its group (step 3 of a heartbeat), and regexes
resolved asynchronously, as in Kafka 4.2 (GroupMetadataManager's
maybeUpdateRegularExpressions and handleRegularExpressionsResult).

Topic names. New or changed topic names bump the group epoch, as does moving to a regex the
group has already resolved, or dropping a regex, or joining a group still at epoch 0 (a new
group always moves to epoch 1). The new epoch records the hash of the subscribed topics
(`TopicImage.metadata_hash`), so a later topic change can tell whether it concerns the group.

Regexes (`regex.py` has the RE2 semantics). A regex new to the group is not resolved in the
heartbeat that brings it: it adds no topic yet, and a resolution is asked for. So a member
with a literal topic and a regex gets the literal topic's partitions first and the matched
topics in a later epoch, the order clients (librdkafka's tests among them) expect.
- Asking (`regex_refresh`). Every heartbeat, and every JoinGroup of a classic member, asks
  for a resolution of all the group's regexes (the CONSUMER_REGEX timer, due at once so that
  it runs after the heartbeat has been answered) when none is pending, the last one is more
  than 10 s old, and either a regex is unresolved (a member just brought it), topics were
  created since the last resolution (`topic_changes.py` keeps that version), or it is older
  than group.consumer.regex.refresh.interval.ms. Every regex of the group is resolved
  together, so that one epoch bump takes all the changes in.
- Resolving (`resolution_records`, when the timer fires). The regexes asked for that are
  still in use are resolved against the known topics, a record is written for each, and the
  group epoch is bumped if a regex now matches other topics (or the subscribed topics' hash
  moved); the next heartbeat computes the target.
- Dropping (`update_regexes`, and `leaving.removal`). A regex nobody subscribes with any more
  loses its resolution (a tombstone).

Each function decides only: the records it returns are applied by the coordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from coterie.group.consumer.changes import epoch_record, regex_record, regex_tombstone
from coterie.group.consumer.config import MIN_REGEX_REFRESH_INTERVAL_MS
from coterie.group.consumer.group import ConsumerGroup, ResolvedRegex
from coterie.group.consumer.heartbeat_request import Refused
from coterie.group.consumer.member import ConsumerMember
from coterie.group.consumer.regex import InvalidRegex, compile_regex, resolve
from coterie.group.records.consumer import ConsumerGroupRegularExpressionValue
from coterie.group.records.record import Record
from coterie.group.topic_image import TopicImage


@dataclass(frozen=True, slots=True)
class SubscriptionChange:
    """What `member` becoming `updated` (and `removed` leaving) does to the group, decided
    and not yet applied."""

    records: list[Record]  # tombstones of regexes left without users, then the group epoch
    regexes: dict[str, ResolvedRegex]  # the resolutions the rest of the heartbeat sees
    group_epoch: int  # the group epoch after the change (the current one if it stays)
    refresh: frozenset[str] | None  # the regexes to resolve (CONSUMER_REGEX), or None


def subscription_change(group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                        removed: list[ConsumerMember], image: TopicImage, now_ms: int, *,
                        refresh_interval_ms: int, new_topics_version: int,
                        recheck_metadata: bool = False) -> SubscriptionChange:
    """Drop regexes nobody uses any more; bump the epoch when the member's topics are known
    to have changed (a regex new to the group adds none yet: its resolution, asked for here,
    bumps the epoch when it has run). With `recheck_metadata` (the group's state was put
    back to what is durable after a failed write, which may predate a topic change it was
    told of), the epoch is also bumped when the topics' picture no longer matches the
    group's metadata hash. Raises Refused (INVALID_REGULAR_EXPRESSION)."""
    regexes = dict(group.resolved_regexes)
    records, regex_resolved = update_regexes(group, member, updated, removed, regexes)
    refresh = regex_refresh(group, member, updated, removed, now_ms,
                            refresh_interval_ms=refresh_interval_ms,
                            new_topics_version=new_topics_version)
    group_epoch = group.group_epoch
    if (group_epoch == 0 or regex_resolved
            or updated.subscribed_topic_names != member.subscribed_topic_names):
        topics = group.subscribed_topics_after(removed, [updated], regexes)
        metadata_hash = image.metadata_hash(topics)
        group_epoch += 1
        records.append(epoch_record(group.group_id, group_epoch, metadata_hash))
    elif recheck_metadata:
        topics = group.subscribed_topics_after(removed, [updated], regexes)
        metadata_hash = image.metadata_hash(topics)
        if metadata_hash != group.metadata_hash:
            group_epoch += 1
            records.append(epoch_record(group.group_id, group_epoch, metadata_hash))
    return SubscriptionChange(records, regexes, group_epoch, refresh)


def update_regexes(group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                   removed: list[ConsumerMember],
                   regexes: dict[str, ResolvedRegex]) -> tuple[list[Record], bool]:
    """The first half of Kafka's maybeUpdateRegularExpressions: tombstones for the regexes
    this change leaves without users (dropped from `regexes`, the resolutions the rest of
    the heartbeat sees), and whether the member's regex changed to one whose topics the
    group already knows: a regex the group has resolved, or no regex at all. That calls
    for a new group epoch at once; a regex new to the group is only checked here, and
    is resolved later (`regex_refresh`)."""
    old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
    if new == old:
        return [], False  # the same regex users as before
    if new is not None:
        try:
            compile_regex(new)
        except InvalidRegex as exc:
            raise Refused(ErrorCode.invalid_regular_expression,
                           f"SubscribedTopicRegex `{new}` is not a valid regular "
                           f"expression: {exc}.") from None
    records = []
    for m in removed:
        gone = m.subscribed_topic_regex
        if gone is not None and gone in regexes and group.regex_users_after(
                gone, removed, [updated]) <= 0:
            del regexes[gone]
            records.append(regex_tombstone(group.group_id, gone))
    if new is None:
        return records, old is not None
    return records, group.regex_users(new) > 0 and new in group.resolved_regexes


def regex_refresh(group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                  removed: Iterable[ConsumerMember], now_ms: int, *, refresh_interval_ms: int,
                  new_topics_version: int) -> frozenset[str] | None:
    """The second half of Kafka's maybeUpdateRegularExpressions: the regexes whose
    resolution this change (`member` becoming `updated`, `removed` leaving) should ask
    for, or None. Only when the group (after the change) has regexes, none is pending,
    the last resolution is more than 10 s old (Kafka's fixed batching interval), and
    one of: a regex is unresolved (the member may just have brought it), a topic was
    created since the last resolution (after image version `new_topics_version`), or the
    last resolution is older than `refresh_interval_ms`
    (group.consumer.regex.refresh.interval.ms). Every regex of the group is resolved
    together, so that one epoch bump takes all the changes in."""
    old, new = member.subscribed_topic_regex, updated.subscribed_topic_regex
    brings_new = new is not None and new != old and group.regex_users(new) == 0
    if not brings_new and not group.has_regexes():
        return None
    if group.regex_refresh is not None:
        return None  # a resolution is pending
    last = group.last_regex_refresh_ms()
    if last is not None and now_ms <= last + MIN_REGEX_REFRESH_INTERVAL_MS:
        return None
    removed = list(removed)
    in_use = {r for r in group.regexes_in_use()
              if group.regex_users_after(r, removed, [updated]) > 0}
    if new is not None:
        in_use.add(new)
    due = (brings_new or len(in_use) != len(group.resolved_regexes)
           or group.last_regex_version() < new_topics_version
           or last is None or now_ms > last + refresh_interval_ms)
    return frozenset(in_use) if due and in_use else None


def resolution_records(group: ConsumerGroup, wanted: frozenset[str], image: TopicImage,
                       now_ms: int,
                       allowed: Callable[[Iterable[str]], frozenset[str]] | None = None,
                       ) -> list[Record]:
    """The "consumer-regex" timer: Kafka's handleRegularExpressionsResult, with the
    resolution itself done here against the topics known now (`image`). Each regex in
    `wanted` that someone still subscribes with gets a record (a new timestamp and version
    even when its topics are the same); the group epoch moves if a regex matches other
    topics than before or the subscribed topics' hash moved. `allowed`, when the broker
    authorizes, keeps of the matched topics those the member who asked may describe
    (Kafka 4.2 filters a resolution so); the record holds what was kept."""
    group_id = group.group_id
    regexes = dict(group.resolved_regexes)
    records: list[Record] = []
    changed = False
    for regex in sorted(wanted):
        if group.regex_users(regex) <= 0:
            continue  # nobody subscribes with it any more
        value = resolved(regex, image, now_ms, allowed)
        topics = frozenset(value.topics)
        known = regexes.get(regex)
        changed |= topics != (frozenset() if known is None else known.topics)
        regexes[regex] = ResolvedRegex(topics, value.version, value.timestamp_ms)
        records.append(regex_record(group_id, regex, value))
    metadata_hash = image.metadata_hash(group.subscribed_topics_after((), (), regexes))
    if changed or metadata_hash != group.metadata_hash:
        records.append(epoch_record(group_id, group.group_epoch + 1, metadata_hash))
    return records


def resolved(regex: str, image: TopicImage, now_ms: int,
             allowed: Callable[[Iterable[str]], frozenset[str]] | None = None,
             ) -> ConsumerGroupRegularExpressionValue:
    """`regex` resolved against the topics of `image` (of them, those `allowed` keeps),
    stamped with its version and now."""
    topics = resolve(regex, image.names())
    if allowed is not None and topics:
        kept = allowed(topics)
        topics = tuple(t for t in topics if t in kept)
    return ConsumerGroupRegularExpressionValue(
        topics=topics, version=image.version, timestamp_ms=now_ms)
