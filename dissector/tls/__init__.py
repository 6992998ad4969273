"""TLS between TCP reassembly and Kafka framing: recognise TLS connections, decrypt them with a key
log, and hand the plaintext to the framer as if it had been on the wire.

Using it (the API the commands and `analysis` build on):

    from dissector.pipeline import Dissector, dissect
    from dissector.tls.keylog import KeyLog, default_paths

    run = dissect(paths, ports, keylog=["keys.txt"])     # paths, a path, or a KeyLog; None: no keys
    d = Dissector(ports, level="bodies", keylog=KeyLog())  # push-style, as live and Spark drive it

- `keylog=` accepts None, a `KeyLog`, a file path or a list of paths (read at once: OSError for
  a file that cannot be read). `default_paths()` is the SSLKEYLOGFILE default the commands use
  when no --keylog is given. Decryption needs the `cryptography` package (the `tls` extra); it
  is imported only when a TLS session has keys (`tls.no_crypto` issue when it is missing).
- pcapng Decryption Secrets Blocks (`editcap --inject-secrets tls,KEYS`) are added to the
  dissector's key log as the file is read (`Dissector.add_secrets`), before the packets after them.
- Live: keep the KeyLog passed to the Dissector, `follower = keylog.follow(path)` once, and call
  `follower.poll()` before feeding each batch of packets: new lines are read as clients append
  them; a session whose keys arrive late is decrypted from its next record (TLS 1.2: exactly;
  TLS 1.3: by finding its sequence number), records waiting for a ServerHello are held (bounded).
- After a run: `Dissector.tls.connections` (TLS connections recognised), `.tls.undecrypted`
  (those with nothing decrypted: the commands print `layer.undecrypted_note`), and per connection `Connection.tls` (None for plaintext) with `version_name`,
  `cipher_name`, `sni`, `alpn`, `decrypted`, `handshake_ms` (ClientHello to the first
  application data); `dissector.tables` turns these into the `tls_*` columns of exchanges and
  connections.

Issue codes: tls.no_keys (one per connection, SNI and cipher in its detail), tls.bad_record (a
record that does not authenticate), tls.resync (bytes skipped to the next record header after a
hole or a mid-stream start), tls.seq_window (no sequence number in the window opens the record
after a hole), tls.bad_record_header, tls.bad_handshake, tls.unsupported (version or suite),
tls.alert, tls.midstream (a TLS 1.3 stream joined after its handshake, or a connection whose
ClientHello or TLS 1.3 ServerHello the capture lacks, opened with a key log secret by trial), and
the limits: tls.secrets_limit (unmatched secrets tried), tls.buffer_limit (records waiting for
keys), tls.handshake_limit (handshake messages too large to read), tls.keylog_limit (sessions in
the key log); tls.keylog_malformed, tls.no_crypto.

Modules, one job each: keylog (NSS key log files), suites (cipher suite facts), crypto (the
`cryptography` primitives, imported lazily), kdf (TLS 1.2 PRF and TLS 1.3 HKDF-Expand-Label),
ciphers (opening one record), handshake (hello parsing), records (record headers), stream (one
direction's record layer), connection (what both directions share, the keys), sniff (TLS or
plaintext, decided per direction), layer (the Dissector's TLS state).
"""
