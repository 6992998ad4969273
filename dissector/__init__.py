"""kafka-dissector: a Wireshark-style dissector for the Apache Kafka wire protocol.

The core (this package) has no pandas, pyspark or I/O policy so that the CLI, notebooks and the
Spark job can all drive it.
"""
__version__ = "0.1.0"
