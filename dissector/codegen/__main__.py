"""`python -m dissector.codegen [--check] [--specs DIR]`: regenerate dissector/protocol/generated/."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .generate import generate
from .loader import SpecError
from .union import default_specs_dir

OUT = Path(__file__).resolve().parent.parent / "protocol" / "generated"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m dissector.codegen", description=__doc__)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if the committed files differ from what would be generated")
    ap.add_argument("--specs", type=Path, default=None,
                    help="spec folder root (default: $KAFKA_SPECS or <repo>/kafka-specs)")
    ap.add_argument("--out", type=Path, default=OUT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    try:
        files = generate(args.specs or default_specs_dir())
    except (SpecError, OSError) as e:
        print(f"codegen: {e}", file=sys.stderr)
        return 2
    existing = {p.name for p in args.out.glob("*.py")} if args.out.is_dir() else set()
    stale = sorted(existing - set(files))
    changed = sorted(n for n, text in files.items()
                     if not (args.out / n).is_file() or (args.out / n).read_text(encoding="utf-8") != text)
    if args.check:
        for name in changed + stale:
            print(f"codegen: out of date: {args.out / name}", file=sys.stderr)
        return 1 if changed or stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in changed:
        (args.out / name).write_text(files[name], encoding="utf-8")
    for name in stale:
        (args.out / name).unlink()
    print(f"codegen: {len(files)} files, {len(changed)} written, {len(stale)} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
