package casscade.bench;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;

import org.apache.spark.api.java.function.FlatMapGroupsWithStateFunction;
import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.GroupState;
import org.apache.spark.sql.streaming.GroupStateTimeout;
import org.apache.spark.sql.streaming.OutputMode;

import scala.Tuple2;
import scala.Tuple3;

/**
 * The least a JVM-side merge must do per change, for bench_jvm_floor: one group per
 * (raw topic, raw key: table id + partition key), its state (the last raw value) read once
 * and written once per micro-batch, and one output record per input record (the state's
 * bytes then the record's, about an event's size) to its table's floor topic. No decoding
 * and no merge: what is left is Spark's own cost (Kafka source, shuffle, state store, Kafka
 * sink), the floor under a merge on Spark's state.
 */
public final class CopyFloor {
    /** A raw key's leading table id (shared.topic_names.TABLE_ID_SIZE). */
    private static final int TABLE_ID_SIZE = 16;
    private static final String RAW_SUFFIX = ".raw";

    private CopyFloor() {
    }

    /** raw: columns topic STRING, key BINARY, value BINARY; the result: topic, key, value. */
    public static Dataset<Row> apply(Dataset<Row> raw) {
        Dataset<Row> in = raw.select("topic", "key", "value");
        MapFunction<Row, Tuple2<String, byte[]>> keyOf =
            r -> new Tuple2<>(r.getString(0), (byte[]) r.get(1));
        FlatMapGroupsWithStateFunction<Tuple2<String, byte[]>, Row, byte[],
                Tuple3<String, byte[], byte[]>> merge = CopyFloor::merge;
        return in.groupByKey(keyOf, Encoders.tuple(Encoders.STRING(), Encoders.BINARY()))
            .flatMapGroupsWithState(merge, OutputMode.Append(), Encoders.BINARY(),
                Encoders.tuple(Encoders.STRING(), Encoders.BINARY(), Encoders.BINARY()),
                GroupStateTimeout.NoTimeout())
            .toDF("topic", "key", "value");
    }

    private static Iterator<Tuple3<String, byte[], byte[]>> merge(
            Tuple2<String, byte[]> key, Iterator<Row> rows, GroupState<byte[]> state) {
        String topic = floorTopic(key._1(), key._2());
        byte[] last = state.exists() ? state.get() : new byte[0];
        List<Tuple3<String, byte[], byte[]>> out = new ArrayList<>();
        while (rows.hasNext()) {
            byte[] value = (byte[]) rows.next().get(2);
            byte[] event = new byte[last.length + value.length];
            System.arraycopy(last, 0, event, 0, last.length);
            System.arraycopy(value, 0, event, last.length, value.length);
            out.add(new Tuple3<>(topic, key._2(), event));
            last = value;
        }
        state.update(last);
        return out.iterator();
    }

    /**
     * raw_workload.floor_topic: {@code <prefix>.floor.<lowercase hex of the key's first 16
     * bytes>}, the prefix being the raw topic's name without its ".raw" (the one raw topic
     * names no table; the key's table id does).
     */
    private static String floorTopic(String rawTopic, byte[] key) {
        String prefix = rawTopic.endsWith(RAW_SUFFIX)
            ? rawTopic.substring(0, rawTopic.length() - RAW_SUFFIX.length()) : rawTopic;
        return prefix + ".floor."
            + HexFormat.of().formatHex(key, 0, Math.min(key.length, TABLE_ID_SIZE));
    }
}
