import pytest

from dissector.capture import files


@pytest.fixture(params=["read", "mapped"])
def reading(request, monkeypatch):
    """Run a test with both file readers: chunks read into a buffer (chunks.Chunks) and every
    plain file mapped (mapped.MappedChunks, normally for files of a chunk or more)."""
    if request.param == "mapped":
        monkeypatch.setattr(files, "MAP_FROM", 1)
    return request.param
