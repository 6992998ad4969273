"""Numbers for people: short enough for a narrow table column, precise enough to compare."""
from __future__ import annotations

import math


def sig3(v: float) -> str:
    """Three significant figures, but never fewer digits than the integer part has (3003 ms stays
    3003); millions and up as 12.3M, 4.56G; NaN as ""."""
    if math.isnan(v):
        return ""
    if v == 0:
        return "0"
    a = abs(v)
    for suffix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if a >= scale:
            x = v / scale
            return f"{x:.0f}{suffix}" if abs(x) >= 99.95 else f"{x:.3g}{suffix}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.{min(2 - math.floor(math.log10(a)), 3)}f}"
