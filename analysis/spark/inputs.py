"""Input files: directories, globs and single files on any filesystem Spark reads.

Listing goes through Spark's binaryFile source with only the path and length selected (the
content is not read), so local paths, globs, directories (recursively) and cluster URIs (hdfs://,
s3a://, ...) all work the same. As everywhere in Hadoop, names starting with "." or "_" are
skipped inside directories. Tasks then read local files in place and copy other files to a
local temporary file first: the capture readers stream from a local file.
"""
from __future__ import annotations

import glob
import os
import shutil
import tempfile
from contextlib import contextmanager
from urllib.parse import unquote, urlparse


class InputError(ValueError):
    """An input that names nothing readable: one line for the user."""


def check_local(inputs) -> None:
    """Fail early, before Spark starts, on a local path or glob that names nothing."""
    for item in inputs:
        path = str(item)
        if "://" in path or path.startswith("file:"):
            continue
        if not (glob.has_magic(path) and glob.glob(path)) and not os.path.exists(path):
            raise InputError(f"{item}: no such file or directory")


def list_files(spark, inputs) -> list[tuple[str, int]]:
    """(URI, size) of every file under `inputs` (files, directories, globs), sorted by URI."""
    found = []
    for item in inputs:
        path = str(item)
        if "://" not in path and not path.startswith("file:"):
            path = os.path.abspath(path)
        try:
            rows = (spark.read.format("binaryFile").option("recursiveFileLookup", "true")
                    .load(path).select("path", "length").collect())
        except Exception as exc:   # Spark's AnalysisException: path does not exist
            raise InputError(f"{item}: {_first_line(exc)}") from None
        if not rows:
            raise InputError(f"{item}: no files")
        found.extend((r.path, r.length) for r in rows)
    return sorted(set(found))


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def basename(uri: str) -> str:
    return unquote(urlparse(uri).path.rsplit("/", 1)[-1]) if ":" in uri else os.path.basename(uri)


@contextmanager
def local_copy(uri: str):
    """A local path for `uri`: the file itself when local, else a temporary copy."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        yield unquote(parsed.path) if parsed.scheme else uri
        return
    from pyarrow import fs
    filesystem, path = fs.FileSystem.from_uri(uri)
    with tempfile.NamedTemporaryFile(prefix="kafka-dissect-", suffix=".cap") as tmp:
        with filesystem.open_input_stream(path) as src:
            shutil.copyfileobj(src, tmp, 4 << 20)
        tmp.flush()
        yield tmp.name
