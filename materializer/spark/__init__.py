"""Everything that knows Spark: the session and the query, the query's tasks, running and
stopping it, its progress reports, checkpoint files through Hadoop, the driver JVM."""
