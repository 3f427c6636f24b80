"""The record formats and the query front end, one home each: a table's schema as a value (schema.py),
its records decoded into Arrow columns by format (records.py, by_name.py: json_format, csv_format, avro_format), the
SQL front end (sql.py) and the pipeline file (pipeline.py); the tick example's own format (ticks.py),
its predicate and query texts (predicate.py, query.py), and the control record (control.py)."""
