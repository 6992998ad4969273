#!/usr/bin/env bash
# Debian packages the test suite compares against or drives: tshark (oracle), tcpdump (captures
# real traffic), kcat (a real client), a Java runtime (PySpark), chromium (renders the HTML report),
# and a C compiler with Python's headers (the compiled hot loops; without them the pure-Python
# fallbacks run, and the tests that require the compiled ones fail in CI).
# Installs what is missing when run as root; otherwise says what to install.
set -euo pipefail
need=()
command -v tshark   >/dev/null || need+=(tshark)
command -v tcpdump  >/dev/null || need+=(tcpdump)
command -v kcat     >/dev/null || need+=(kcat)
command -v java     >/dev/null || need+=(default-jre-headless)
command -v chromium >/dev/null || need+=(chromium)
command -v cc       >/dev/null || need+=(gcc)
python3 -c 'import os, sysconfig; os.stat(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' \
  2>/dev/null || need+=(python3-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "system-deps: missing ${need[*]}; install them with: sudo apt-get install ${need[*]}" >&2
  exit 0
fi
echo "system-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
