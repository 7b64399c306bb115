"""The checkpoint beside Spark's own files: casscade's records in it, and how they are read
and written (no Spark: `materializer.spark.hadoop_files` reaches a checkpoint URI)."""
