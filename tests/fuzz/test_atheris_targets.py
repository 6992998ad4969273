"""The atheris targets (tests/fuzz/atheris_targets.py, run coverage-guided by `make fuzz`) hold
on their seed corpus and on random inputs: a target that fails on them would only report
itself. Each compiled entry point's target compares it with its Python twin."""
import base64
import random

import pytest

from tests.fuzz import atheris_targets


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    atheris_targets.main(["corpus", str(root)])
    return root


@pytest.mark.parametrize("name", ["reader", "summarize", "walkset", "columns", "csvrow",
                                  "framebuf", "handler", "pairing", "decoder", "tablerow", "partitions",
                                  "decode", "records", "packet", "tls"])
def test_target_on_seeds_and_random_inputs(corpus, name):
    one = atheris_targets.TARGETS[name]()
    seeds = sorted((corpus / name).iterdir())[:60]
    rnd = random.Random(name)
    inputs = [f.read_bytes() for f in seeds]
    for data in list(inputs):   # and damaged copies of each
        b = bytearray(data)
        for _ in range(3):
            if b:
                b[rnd.randrange(len(b))] = rnd.getrandbits(8)
        inputs.append(bytes(b))
    inputs += [rnd.randbytes(rnd.randrange(200)) for _ in range(100)]
    for data in inputs:
        one(data)


# inputs a coverage-guided campaign found, each of which failed its target (2026-11-29): the
# compiled reader refused an empty array under a budget below zero; the csvrow target did not
# allow a timestamp past 64 bits to take the slow path
FOUND = {"reader": "ACoALk4AAQAAAQA=", "csvrow": "AGoBAAAAKgDR92itAQA="}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_target_on_what_the_campaign_found(name):
    atheris_targets.TARGETS[name]()(base64.b64decode(FOUND[name]))


def test_the_campaign_runs_every_target():
    """scripts/fuzz.sh (`make fuzz`) names its targets in a list of its own: one left out there
    would never be fuzzed coverage-guided."""
    import re
    from pathlib import Path
    script = (Path(__file__).parents[2] / "scripts" / "fuzz.sh").read_text()
    listed = re.search(r'FUZZ_TARGETS:-"([^"]*)"', script).group(1).split()
    assert sorted(listed) == sorted(atheris_targets.TARGETS)
