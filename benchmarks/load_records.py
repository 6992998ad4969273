"""analysis.load(CAPTURE, PORT, records=True), as a user's script runs it, in one process
(jobs=1: against tshark, which has one); prints the records table's rows and the bytes of the
DataFrame's own buffers (memory_usage(deep=True): the Arrow buffers behind its columns) as
JSON, for benchmarks/records_table.py.

    python benchmarks/load_records.py CAPTURE PORT
"""
import json
import sys

import analysis

if __name__ == "__main__":
    tables = analysis.load(sys.argv[1], int(sys.argv[2]), records=True, jobs=1)
    frame = tables.records
    print(json.dumps({"rows": len(frame), "frame_bytes": int(frame.memory_usage(deep=True).sum()),
                      "values": int(frame["value"].notna().sum())}))
