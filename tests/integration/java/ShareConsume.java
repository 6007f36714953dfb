import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

/**
 * Kafka 4.2.1's share consumers reading a topic through one share group, each in a thread of
 * its own, with the default (implicit) acknowledgement: every record a poll returns is
 * accepted at the next poll or at close. Stops when `expected` distinct records have been
 * seen or after `seconds`, closes every consumer, and prints what each got and whether any
 * record came twice.
 *
 * Usage: ShareConsume bootstrap group topic consumers expected seconds
 */
public class ShareConsume {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2];
        int consumers = Integer.parseInt(args[3]), expected = Integer.parseInt(args[4]);
        long until = System.currentTimeMillis() + 1000L * Integer.parseInt(args[5]);
        ConcurrentHashMap<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        AtomicInteger[] counts = new AtomicInteger[consumers];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            AtomicInteger count = counts[i] = new AtomicInteger();
            Thread t = new Thread(() -> {
                Properties props = new Properties();
                props.put("bootstrap.servers", bootstrap);
                props.put("group.id", group);
                props.put("max.poll.records", "5");
                props.put("key.deserializer",
                    "org.apache.kafka.common.serialization.ByteArrayDeserializer");
                props.put("value.deserializer",
                    "org.apache.kafka.common.serialization.StringDeserializer");
                try (KafkaShareConsumer<byte[], String> consumer = new KafkaShareConsumer<>(props)) {
                    consumer.subscribe(List.of(topic));
                    while (seen.size() < expected && System.currentTimeMillis() < until) {
                        for (ConsumerRecord<byte[], String> r : consumer.poll(Duration.ofMillis(200))) {
                            seen.computeIfAbsent(r.value(), v -> new AtomicInteger()).incrementAndGet();
                            count.incrementAndGet();
                        }
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        int twice = 0;
        for (AtomicInteger n : seen.values()) {
            if (n.get() > 1) {
                twice++;
            }
        }
        StringBuilder each = new StringBuilder();
        for (AtomicInteger c : counts) {
            each.append(' ').append(c.get());
        }
        System.out.println("DISTINCT " + seen.size() + " TWICE " + twice + " EACH" + each);
    }
}
