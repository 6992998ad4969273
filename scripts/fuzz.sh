#!/usr/bin/env bash
# A longer fuzz campaign in one command:  scripts/fuzz.sh
#
# 1. the hypothesis suite of tests/fuzz with FUZZ_EXAMPLES times the CI examples (default 25);
# 2. when atheris is installed (.venv/bin/pip install atheris), coverage-guided runs of each
#    target in tests/fuzz/atheris_targets.py for FUZZ_SECONDS each (default 300), seeded with the
#    real captures and valid messages, with per-input time and memory limits.
# Corpora and crash inputs go to FUZZ_DIR (default /tmp/kafka-dissector-fuzz), nowhere else.
# Every crash found must become a test in tests/fuzz/test_regressions.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export FUZZ_EXAMPLES=${FUZZ_EXAMPLES:-25}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-300}
OUT=${FUZZ_DIR:-/tmp/kafka-dissector-fuzz}
TARGETS=${FUZZ_TARGETS:-"packet decode records stream capture reader summarize walkset columns csvrow framebuf handler pairing decoder tablerow partitions tls"}

echo "== hypothesis: tests/fuzz with FUZZ_EXAMPLES=$FUZZ_EXAMPLES"
status=0
"$PY" -m pytest tests/fuzz -q -p no:cacheprovider || status=1

if "$PY" -c "import atheris" 2>/dev/null; then
    mkdir -p "$OUT"
    "$PY" -m tests.fuzz.atheris_targets corpus "$OUT/corpus"
    for t in $TARGETS; do
        echo "== atheris: $t for ${SECONDS_PER_TARGET}s"
        mkdir -p "$OUT/crashes/$t"
        "$PY" -m tests.fuzz.atheris_targets "$t" -max_total_time="$SECONDS_PER_TARGET" \
            -timeout=30 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
            -artifact_prefix="$OUT/crashes/$t/" "$OUT/corpus/$t" || status=1
    done
    if compgen -G "$OUT/crashes/*/*" >/dev/null; then
        echo "crash inputs (replay: $PY -m tests.fuzz.atheris_targets TARGET FILE):"
        ls -1 "$OUT"/crashes/*/*
        status=1
    fi
else
    echo "atheris is not installed: coverage-guided runs skipped (.venv/bin/pip install atheris)"
fi
exit $status
