"""analysis.load(CAPTURE, PORT, records=True), as a user's script runs it, in one process
(jobs=1: against tshark, which has one) or, with --default-jobs, with the workers it takes by
default (jobs=None); prints the records table's rows, the bytes of the DataFrame's own buffers
(memory_usage(deep=True): the Arrow buffers behind its columns) and the processes used as JSON,
for benchmarks/records_table.py.

    python benchmarks/load_records.py CAPTURE PORT [--default-jobs]
"""
import json
import sys

import analysis

if __name__ == "__main__":
    from dissector.parallel import jobs_for
    jobs = None if sys.argv[3:] == ["--default-jobs"] else 1
    tables = analysis.load(sys.argv[1], int(sys.argv[2]), records=True, jobs=jobs)
    frame = tables.records
    print(json.dumps({"rows": len(frame), "frame_bytes": int(frame.memory_usage(deep=True).sum()),
                      "values": int(frame["value"].notna().sum()),
                      "jobs": jobs_for(jobs, [sys.argv[1]])}))
