"""The union of all spec folders: which folder's definition each (spec, version) comes from.

Folders are ordered oldest to newest; where several define the same version, the newest wins,
except that the 2024-10 trunk snapshot only supplies versions no other folder has: versions that
Kafka 4.0 removed come from the 3.9 release, not from the pre-4.0 trunk.
`latest/` holds only the files changed since `trunk-2024-10/`, so its full set is trunk-2024-10
minus the files renamed upstream, overlaid with latest/. Versions that no release folder defines
(trunk-only) are marked unreleased.
"""
from __future__ import annotations

import os
from pathlib import Path

from .loader import load_spec, SpecError

FOLDERS = ["kafka-3.9", "trunk-2024-10", "kafka-4.0", "kafka-4.1", "kafka-4.2", "kafka-4.3", "latest"]
RELEASED = {"kafka-3.9", "kafka-4.0", "kafka-4.1", "kafka-4.2", "kafka-4.3"}
LATEST_BASE = "trunk-2024-10"
# Renamed upstream after 2024-10 (same api key 74, now ListConfigResources*): not part of latest.
LATEST_DROPPED = {"ListClientMetricsResourcesRequest.json", "ListClientMetricsResourcesResponse.json"}


def default_specs_dir() -> Path:
    env = os.environ.get("KAFKA_SPECS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "kafka-specs"


def folder_files(specs: Path, folder: str) -> dict:
    """file name -> path of every spec file in a folder's full (overlaid) set."""
    if folder == "latest":
        files = {p.name: p for p in (specs / LATEST_BASE).glob("*.json") if p.name not in LATEST_DROPPED}
        files.update({p.name: p for p in (specs / "latest").glob("*.json")})
        return files
    return {p.name: p for p in (specs / folder).glob("*.json")}


def identity(spec):
    """Requests/responses are identified by api key (names change: key 74 was renamed)."""
    if spec["type"] in ("request", "response"):
        return (spec["type"], spec["api_key"])
    return (spec["type"], spec["name"])


class Union:
    """specs[identity][folder] = loaded spec; owner[identity][version] = folder that wins."""

    def __init__(self, specs_dir: Path):
        specs_dir = Path(specs_dir)
        missing = [f for f in FOLDERS if not (specs_dir / f).is_dir()]
        if missing:
            raise SpecError(f"{specs_dir}: missing spec folders {missing}")
        self.specs: dict = {}
        cache: dict = {}
        for folder in FOLDERS:
            for name, path in sorted(folder_files(specs_dir, folder).items()):
                spec = cache.get(path)
                if spec is None:
                    spec = cache[path] = load_spec(path)
                per = self.specs.setdefault(identity(spec), {})
                if folder in per:
                    raise SpecError(f"{folder}: two files define {identity(spec)}")
                per[folder] = spec
        self.owner = {}
        for ident, per in self.specs.items():
            owners = {}
            for folder in FOLDERS:
                spec = per.get(folder)
                if spec is None or spec["valid"].empty:
                    continue
                v = spec["valid"].lo
                while v in spec["valid"]:
                    if folder != LATEST_BASE or v not in owners:
                        owners[v] = folder
                    v += 1
            self.owner[ident] = owners

    def released(self, ident, version):
        return any(version in spec["valid"] for folder, spec in self.specs[ident].items()
                   if folder in RELEASED)

    def spec_for(self, ident, version):
        return self.specs[ident][self.owner[ident][version]]

    def newest(self, ident):
        per = self.specs[ident]
        return per[[f for f in FOLDERS if f in per][-1]]
