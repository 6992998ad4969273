"""The analysis layer's `kafka-dissect` subcommands (registered as entry points)."""
