#!/usr/bin/env bash
# The compiled extensions under AddressSanitizer and UndefinedBehaviorSanitizer:  make fuzz-asan
#
# Builds every dissector/**/_NAME.c with -fsanitize=address,undefined in a tree of its own
# (FUZZ_DIR/asan-tree; the working tree's builds are left alone: tests/fuzz/sanitized.py) and runs
# there, with libasan preloaded into the venv's python:
# 1. the fuzz suite (tests/fuzz) with FUZZ_EXAMPLES times the CI examples (default 5);
# 2. a mutation campaign over captures/ (tests/fuzz/mutate.py): FUZZ_MUTANTS mutants (default
#    3000) dissected at every level and written in every format, then FUZZ_CALLS direct calls
#    (default 300000) with random arguments into the compiled entry points.
# A sanitizer finding stops the run with its report (exit status 99 ASan, 98 UBSan).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"   # absolute, the venv's (not resolved)
OUT=${FUZZ_DIR:-/tmp/kafka-dissector-fuzz}
TREE="$OUT/asan-tree"
mkdir -p "$TREE"
echo "== building the sanitized extensions in $TREE"
eval "$("$PY" -m tests.fuzz.sanitized "$TREE")"
export LD_PRELOAD PYTHONMALLOC PYTHONPATH ASAN_OPTIONS UBSAN_OPTIONS KAFKA_DISSECTOR_SANITIZED
cd "$TREE"
"$PY" -m tests.fuzz.sanitized --check
export FUZZ_EXAMPLES=${FUZZ_EXAMPLES:-5}
status=0
echo "== fuzz suite under the sanitizers (FUZZ_EXAMPLES=$FUZZ_EXAMPLES)"
# (a sanitizer finding ends pytest itself with 99 or 98. The tests that measure memory (RSS,
# tracemalloc bounds) are left out: ASan's allocator and shadow memory are not Python's.)
"$PY" -m pytest tests/fuzz -q -p no:cacheprovider -p no:randomly \
    --ignore=tests/fuzz/test_sanitizers.py -k "${FUZZ_ASAN_K:-not budget and not bomb and \
not bounded and not rss and not syn_flood and not write_only}" || status=$?
case $status in 98|99) exit $status ;; esac
echo "== mutation campaign under the sanitizers"
"$PY" -m tests.fuzz.mutate --count "${FUZZ_MUTANTS:-3000}" --calls "${FUZZ_CALLS:-300000}" \
    --seed "${FUZZ_SEED:-0}" --out "$OUT/mutants" || exit $?
exit $status
