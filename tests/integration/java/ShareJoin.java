import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

/**
 * Kafka 4.2.1's share consumer joining a share group on a coterie broker: it subscribes,
 * polls for a few seconds (its heartbeats join the group; coterie does not serve ShareFetch
 * yet, so nothing is fetched), prints the group as Kafka's Admin describes it, and closes
 * (leaving the group).
 *
 * Usage: ShareJoin bootstrap group topic seconds
 */
public class ShareJoin {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        long until = System.currentTimeMillis() + 1000L * Integer.parseInt(args[3]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        props.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(topic));
            while (System.currentTimeMillis() < until) {
                try {
                    consumer.poll(Duration.ofMillis(200));
                } catch (Exception e) {
                    System.out.println("POLL " + e);
                }
            }
            Properties adminProps = new Properties();
            adminProps.put("bootstrap.servers", bootstrap);
            try (Admin admin = Admin.create(adminProps)) {
                ShareGroupDescription d = admin.describeShareGroups(List.of(group))
                    .describedGroups().get(group).get();
                System.out.println("STATE " + d.groupState());
                d.members().forEach(m -> System.out.println(
                    "MEMBER " + m.clientId() + " " + m.memberEpoch() + " "
                    + m.assignment().topicPartitions().size()));
            }
        }
        System.out.println("CLOSED");
    }
}
