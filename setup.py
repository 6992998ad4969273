"""The compiled hot loops: every `dissector/**/_NAME.c` is the extension module `dissector...._NAME`.

Each has a Python twin that is its specification and runs where it cannot be built (optional), so
a new one needs only its source file. The headers they share (`dissector/_NAME.h`, included by
relative path) are every extension's `depends`: a change to one rebuilds them, and the source
distribution carries them. Declared here rather than in pyproject.toml, where
setuptools still calls the ext-modules table experimental and warns on every build.
"""
from pathlib import Path

from setuptools import Extension, setup


def extensions():
    headers = [h.as_posix() for h in sorted(Path("dissector").rglob("_*.h"))]
    for source in sorted(Path("dissector").rglob("_*.c")):
        name = ".".join(source.with_suffix("").parts)
        yield Extension(name, [source.as_posix()], depends=headers, optional=True,
                        extra_compile_args=["-O2"])


setup(ext_modules=list(extensions()))
