// Kafka's Java producer writing what event_floor.py's loop writes with librdkafka: one
// transactional producer per raw partition, rounds of a transaction each, every change one
// event round-robin over the topics (read one per line from stdin), a random key, the value
// it is given. The settings are the job's where Java has them (acks=all, idempotence, lz4, a
// 30 s linger so a transaction's records go at its commit, 1 MB batches, 128 MiB of
// buffer). Java's client puts every partition bound for a broker in one produce request,
// where librdkafka sends one request per partition: this measures what that is worth to
// the broker. Run as a single-file program with kafka-clients on the class path:
//   java -cp 'kafka/libs/*' TxnFloor.java BOOTSTRAP ID_PREFIX PRODUCERS PER_TXN ROUNDS PACED VALUE < topics
// Prints one JSON line: changes, commit and round seconds, the producers' request counts,
// and whether the client ran transactions v2 (KIP-890: partitions join a transaction with
// their first produce request, no AddPartitionsToTxn; a Kafka 4 broker's transaction.version
// 2 and a 4.x client), read from the producer's private state, as the client says it nowhere.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnFloor {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], idPrefix = args[1];
        int producers = Integer.parseInt(args[2]), perTxn = Integer.parseInt(args[3]);
        int rounds = Integer.parseInt(args[4]);
        boolean paced = args[5].equals("1");
        byte[] value = args[6].getBytes();  // the librdkafka loop's own value
        List<String> topics = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.isBlank()) topics.add(line.trim());
        }
        List<KafkaProducer<byte[], byte[]>> txns = new ArrayList<>();
        for (int raw = 0; raw < producers; raw++) {
            Properties conf = new Properties();
            conf.put("bootstrap.servers", bootstrap);
            conf.put("transactional.id", idPrefix + "-" + raw);
            conf.put("transaction.timeout.ms", "300000");
            conf.put("enable.idempotence", "true");
            conf.put("acks", "all");
            conf.put("linger.ms", "30000");
            conf.put("batch.size", "1000000");
            conf.put("buffer.memory", String.valueOf(128L * 1024 * 1024));
            conf.put("max.request.size", String.valueOf(16 * 1024 * 1024));
            conf.put("compression.type", "lz4");
            conf.put("key.serializer", ByteArraySerializer.class.getName());
            conf.put("value.serializer", ByteArraySerializer.class.getName());
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(conf);
            producer.initTransactions();
            txns.add(producer);
        }
        Random rng = new Random(7);
        long written = 0;
        List<Double> commits = new ArrayList<>(), roundSeconds = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            long started = System.nanoTime();
            for (KafkaProducer<byte[], byte[]> producer : txns) {
                producer.beginTransaction();
                for (int n = 0; n < perTxn; n++) {
                    String topic = topics.get((int) (written % topics.size()));
                    byte[] key = String.valueOf(rng.nextInt(1_000_000_000)).getBytes();
                    producer.send(new ProducerRecord<>(topic, key, value));
                    written++;
                }
                long commit = System.nanoTime();
                producer.commitTransaction();
                commits.add((System.nanoTime() - commit) / 1e9);
            }
            double took = (System.nanoTime() - started) / 1e9;
            roundSeconds.add(took);
            if (paced && took < 1) Thread.sleep((long) ((1 - took) * 1000));
        }
        double requests = 0, produceRequests = 0;
        boolean v2 = true;
        for (KafkaProducer<byte[], byte[]> producer : txns) {
            v2 &= transactionV2(producer);
            for (Map.Entry<MetricName, ? extends Metric> m : producer.metrics().entrySet()) {
                MetricName name = m.getKey();
                if (!name.group().equals("producer-metrics")) continue;
                if (name.name().equals("request-total")) {
                    requests += ((Number) m.getValue().metricValue()).doubleValue();
                }
            }
            // the sender's produce requests: records sent over records a request
            double records = metric(producer, "record-send-total");
            double perRequest = metric(producer, "records-per-request-avg");
            if (perRequest > 0) produceRequests += records / perRequest;
            producer.close();
        }
        System.out.println("{\"written\": " + written + ", \"commits\": " + commits
                + ", \"rounds\": " + roundSeconds + ", \"requests\": " + (long) requests
                + ", \"produce_requests\": " + Math.round(produceRequests)
                + ", \"transaction_v2\": " + v2 + "}");
    }

    private static boolean transactionV2(KafkaProducer<byte[], byte[]> producer)
            throws ReflectiveOperationException {
        Field field = KafkaProducer.class.getDeclaredField("transactionManager");
        field.setAccessible(true);
        Object manager = field.get(producer);
        return (boolean) manager.getClass().getMethod("isTransactionV2Enabled").invoke(manager);
    }

    private static double metric(KafkaProducer<byte[], byte[]> producer, String wanted) {
        for (Map.Entry<MetricName, ? extends Metric> m : producer.metrics().entrySet()) {
            MetricName name = m.getKey();
            if (name.group().equals("producer-metrics") && name.name().equals(wanted)) {
                Object v = m.getValue().metricValue();
                return v instanceof Number ? ((Number) v).doubleValue() : 0;
            }
        }
        return 0;
    }
}
