// A Kafka Streams WordCount, the application Kafka's own quickstart runs, used by
// tests/integration/test_kafka_streams.py to drive coterie the way a Streams deployment does:
// a repartition topic, a changelog topic, a classic consumer group with Streams' own assignor,
// and (with exactly_once_v2) a transactional producer committing offsets through the group
// coordinator.
//
// Run as a single-file source program (java -cp <kafka-streams jars> WordCount.java ...):
//   args: bootstrap application-id processing-guarantee input-topic output-topic state-dir
//         [name=value ...]   (further Streams or client settings)
// Every setting not named here is Kafka Streams' default. Caching is off so that every count
// update reaches the output topic: the test checks each word's whole sequence of counts.
// Prints "STATE <new state>" on each state change, so the test knows when it is RUNNING.
// With the argument print.metadata=true (not a Streams setting), it also prints, twice a
// second while RUNNING, what Interactive Queries sees: "METADATA host:port=active/standby
// ..." per Streams client (the partitions each serves, sorted), and "KEY word host:port"
// for a few words (where queryMetadataForKey routes a query for that word's count).

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.TopicPartition;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.KeyQueryMetadata;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.kstream.Produced;

public final class WordCount {
    public static void main(String[] args) throws InterruptedException {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[2]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        boolean printMetadata = false;
        for (int i = 6; i < args.length; i++) {
            String[] setting = args[i].split("=", 2);
            if (setting[0].equals("print.metadata")) {
                printMetadata = Boolean.parseBoolean(setting[1]);
                continue;
            }
            props.put(setting[0], setting[1]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(args[3])
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word)
                .count()
                .toStream()
                .to(args[4], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(streams::close));
        streams.start();
        if (printMetadata) {
            Thread printer = new Thread(() -> printMetadata(streams));
            printer.setDaemon(true);
            printer.start();
        }
        done.await();
    }

    private static String partitions(Collection<TopicPartition> parts) {
        TreeSet<String> names = new TreeSet<>();
        for (TopicPartition tp : parts) {
            names.add(tp.topic() + ":" + tp.partition());
        }
        return String.join(",", names);
    }

    private static void printMetadata(KafkaStreams streams) {
        String[] words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
        while (true) {
            try {
                Thread.sleep(500);
                if (streams.state() != KafkaStreams.State.RUNNING) {
                    continue;
                }
                List<String> entries = new ArrayList<>();
                String store = null;
                for (StreamsMetadata m : streams.metadataForAllStreamsClients()) {
                    entries.add(m.host() + ":" + m.port() + "=" + partitions(m.topicPartitions())
                            + "/" + partitions(m.standbyTopicPartitions()));
                    if (store == null && !m.stateStoreNames().isEmpty()) {
                        store = m.stateStoreNames().iterator().next();
                    }
                }
                entries.sort(null);
                StringBuilder out = new StringBuilder("METADATA " + String.join(" ", entries));
                if (store != null) {
                    for (String word : words) {
                        KeyQueryMetadata key = streams.queryMetadataForKey(
                                store, word, Serdes.String().serializer());
                        out.append("\nKEY ").append(word).append(' ')
                                .append(key.activeHost().host()).append(':')
                                .append(key.activeHost().port());
                    }
                }
                System.out.println(out);
                System.out.flush();
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                System.out.println("METADATA-ERROR " + e);
                System.out.flush();
            }
        }
    }
}
