"""Kafka traffic analysis in pandas: tables from captures, latency, errors, consumers, producers,
terminal and HTML reports. `load()` and `load_parquet()` are the entry points."""
import sys
import types
from importlib import import_module

__all__ = ["TABLES", "Tables", "load", "load_parquet"]


class _Package(types.ModuleType):
    """The entry points (analysis.load's) loaded on first use, so that the commands here that
    need no tables (`records` as CSV or JSON lines) start without pyarrow, about 0.2 s.

    The submodule analysis.load shares its name with the function: importing it sets the
    package's `load` to the module, which would hide the function from `from analysis import
    load`; the entry points are bound in its place."""

    def __getattr__(self, name):
        if name in __all__:
            import_module(".load", __name__)   # binds the entry points (__setattr__)
            return self.__dict__[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name == "load" and isinstance(value, types.ModuleType):
            for entry in __all__:
                super().__setattr__(entry, getattr(value, entry))
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
