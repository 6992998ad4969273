"""How often the cyclic garbage collector runs while captures are dissected.

Decoded bodies are many small container objects that live until their exchange is written or
added to a table. With Python's default thresholds (a young collection every 700 allocations,
a full one as the heap grows) the collector keeps re-scanning them: about 15% of a bodies run
through the CLI, and half of analysis.load's time on a capture of many short connections
(17,853 connections, 94,134 exchanges: 25 s against 13 s).
"""
from __future__ import annotations

import gc
from contextlib import contextmanager

# allocations between young collections: at 50,000, analysis.load of the dense benchmark corpus
# spent 0.8% of its instructions in 69 young and 7 middle collections that found no garbage
YOUNG = 200_000
OLDER = (20, 50)        # young collections per middle one, middle ones per full one


def pace_process():
    """For a process that only dissects (the CLI): these thresholds from now on."""
    gc.set_threshold(YOUNG, *OLDER)


@contextmanager
def paced():
    """For a library call (analysis.load, export): these thresholds while it runs, unless the
    caller's are already as sparse; the caller's back afterwards."""
    before = gc.get_threshold()
    if before[0] < YOUNG:
        gc.set_threshold(YOUNG, *OLDER)
    try:
        yield
    finally:
        gc.set_threshold(*before)
