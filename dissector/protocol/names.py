"""Names for the raw integers kept in decoded objects (api keys, error codes): used at the edges
(CLI, tree view, tables), never inside the decoders."""
from __future__ import annotations

from .generated.apis import APIS
from .generated.errors import ERRORS


def api_name(key) -> str:
    """"Produce" for 0; "Unknown(123)" for a key no spec defines."""
    entry = APIS.get(key)
    return entry[0] if entry else f"Unknown({key})"


def error_name(code) -> str:
    """"NONE" for 0, "UNKNOWN_TOPIC_OR_PARTITION" for 3; "Unknown(123)" for an unknown code."""
    entry = ERRORS.get(code)
    return entry[0] if entry else f"Unknown({code})"


def is_retriable(code) -> bool:
    """Whether Kafka clients retry on this error code (False for unknown codes, as Kafka's own
    clients map them to the non-retriable UnknownServerException)."""
    entry = ERRORS.get(code)
    return bool(entry and entry[1])
