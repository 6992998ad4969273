"""A UserWarning that names the user's own line: the first caller outside this project's
packages (and the decorators they wrap functions in), however deep the call that warns."""
from __future__ import annotations

import contextlib
import sys
import warnings
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
_OURS = (str(_ROOT / "analysis"), str(_ROOT / "dissector"), contextlib.__file__)


def warn_user(message: str) -> None:
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_OURS):
        frame = frame.f_back
        level += 1
    warnings.warn(message, UserWarning, stacklevel=level)
