"""Record sets: MessageSet v0/v1, RecordBatch v2, their codecs and checksums."""
from .model import Batch, Record, RecordSet
from .record_set import decode_record_set

__all__ = ["Batch", "Record", "RecordSet", "decode_record_set"]
