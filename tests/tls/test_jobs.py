"""TLS with --jobs: worker processes decrypt their connections and hand the TLS columns over."""
import pickle

import pyarrow.parquet as pq

from dissector.pipeline import dissect

from tests.support import require_module
from tests.tls.conftest import TLS_PORT


def test_connections_pickle_with_their_tls_columns(make_tls):
    cap, keys = make_tls("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    run = dissect(cap, (TLS_PORT,), keylog=keys)
    list(run)
    from dissector.tables import connection_tls_row
    for c in run.connections:
        copy = pickle.loads(pickle.dumps(c))
        assert connection_tls_row(copy) == connection_tls_row(c)
        assert connection_tls_row(c)[:2] == ("TLS 1.2", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")


def test_export_with_jobs_matches_one_process(make_tls, tmp_path):
    require_module("pyarrow")
    from analysis.load import export
    cap, keys = make_tls("1.3")
    one, two = tmp_path / "one", tmp_path / "two"
    export([cap], one, TLS_PORT, keylog=keys)
    export([cap], two, TLS_PORT, keylog=keys, jobs=2)
    for name in ("exchanges", "connections", "issues"):
        a, b = pq.read_table(one / f"{name}.parquet"), pq.read_table(two / f"{name}.parquet")
        assert a.equals(b) and (a.num_rows or name == "issues"), name
    conns = pq.read_table(two / "connections.parquet").to_pylist()
    assert all(c["tls_decrypted"] and c["tls_version"] == "TLS 1.3" for c in conns)
