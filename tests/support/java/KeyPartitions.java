// The partition the Java producer gives each key (hex, one per line on stdin) of a topic of
// N partitions (the argument): BuiltInPartitioner.partitionForKey, which KafkaProducer calls
// for a keyed record without a partitioner of its own. Run as a single-file program with
// kafka-clients on the class path.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HexFormat;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

public class KeyPartitions {
    public static void main(String[] args) throws Exception {
        int partitions = Integer.parseInt(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            byte[] key = HexFormat.of().parseHex(line.trim());
            System.out.println(BuiltInPartitioner.partitionForKey(key, partitions));
        }
    }
}
