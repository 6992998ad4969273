"""Input files: directories, globs and single files on any filesystem Spark reads.

Cluster URIs (hdfs://, s3a://, ...) are listed through Spark's binaryFile source with only the
path and length selected (the content is not read); local paths, globs and directories are
listed the same way by Python, without a Spark job. As everywhere in Hadoop, names starting with
"." or "_" are skipped inside directories (recursively). Tasks read local files in place (the decode stage reads payloads
at their offsets); other files are copied to a local temporary file for the extract stage, which
then carries their payloads in its rows.
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
    """(URI or local path, size) of every file under `inputs` (files, directories, globs),
    sorted."""
    found = []
    for item in inputs:
        path = str(item)
        if "://" not in path and not path.startswith("file:"):
            local = _list_local(os.path.abspath(path))
            if not local:
                raise InputError(f"{item}: no files")
            found.extend(local)
            continue
        try:
            rows = (spark.read.format("binaryFile").option("recursiveFileLookup", "true")
                    .load(path).select("path", "length").collect())
        except Exception as exc:   # Spark's AnalysisException: path does not exist
            raise InputError(f"{item}: {_first_line(exc)}") from None
        if not rows:
            raise InputError(f"{item}: no files")
        found.extend((r.path, r.length) for r in rows)
    return sorted(set(found))


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _list_local(path: str) -> list[tuple[str, int]]:
    """What Spark lists for a local path or glob, without a Spark job: files as given,
    directories recursively without hidden names."""
    out = []
    for match in sorted(glob.glob(path)) if glob.has_magic(path) else [path]:
        if not os.path.isdir(match):
            out.append((match, os.path.getsize(match)))
            continue
        for root, dirs, names in os.walk(match):
            dirs[:] = [d for d in dirs if not _hidden(d)]
            out.extend((os.path.join(root, n), os.path.getsize(os.path.join(root, n)))
                       for n in names if not _hidden(n))
    return out


def _first_line(exc) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def basename(uri: str) -> str:
    return unquote(urlparse(uri).path.rsplit("/", 1)[-1]) if ":" in uri else os.path.basename(uri)


def local_path(uri: str):
    """The local path of `uri` when it names a local file (a path or file: URI), else None."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return uri if parsed.scheme == "" else None


@contextmanager
def local_copy(uri: str):
    """A temporary local copy of the file at `uri` (a URI Python cannot open: hdfs://, ...)."""
    from pyarrow import fs
    filesystem, path = fs.FileSystem.from_uri(uri)
    with tempfile.NamedTemporaryFile(prefix="kafka-dissect-", suffix=".cap") as tmp:
        with filesystem.open_input_stream(path) as src:
            shutil.copyfileobj(src, tmp, 4 << 20)
        tmp.flush()
        yield tmp.name
