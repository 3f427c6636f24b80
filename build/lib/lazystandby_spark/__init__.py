"""The Spark side of the pipeline: the Structured Streaming selection query (query.py), the node's feed
that the query reads and answers (feed.py, in the node's process), and the Python data source and sink
that Spark's Python workers load (source.py). The node's Operator adapter is operators/spark.py."""
