"""`kafka-dissect apis`: the api keys and versions this build decodes."""
from __future__ import annotations

import json
import sys

from ..protocol.generated.apis import APIS, UNRELEASED


def versions_by_api() -> dict:
    """{"<api_key>": {"name": ..., "versions": [...], "unreleased": [...]}} in key order."""
    out = {}
    for key in sorted(APIS):
        name, lo, hi = APIS[key][:3]
        out[str(key)] = {"name": name, "versions": list(range(lo, hi + 1)),
                         "unreleased": sorted(v for k, v in UNRELEASED if k == key)}
    return out


def add_parser(sub) -> None:
    p = sub.add_parser("apis", help="list the api keys and versions this build decodes",
                       description="For each api key: its name and the versions decoded (request "
                                   "and response decoders exist for each).")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def run(args) -> int:
    table = versions_by_api()
    if args.json:
        json.dump(table, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    pairs = sum(len(v["versions"]) for v in table.values())
    for key, v in table.items():
        versions = v["versions"]
        span = f"v{versions[0]}-v{versions[-1]}" if len(versions) > 1 else f"v{versions[0]}"
        extra = f"  (unreleased: {', '.join(f'v{x}' for x in v['unreleased'])})" if v["unreleased"] else ""
        print(f"{int(key):3d}  {v['name']:<40} {span}{extra}")
    print(f"{len(table)} api keys, {pairs} (api, version) pairs, {2 * pairs} decoders")
    return 0
