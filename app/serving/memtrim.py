"""Hand freed heap memory back to the system (glibc's `malloc_trim`), for a long-running server.

A burst of large batches leaves the encoder threads' malloc arenas holding pages that are free
but still resident; glibc gives back only what sits at the top of a heap. `malloc_trim(0)` also
releases free pages inside the heaps. Measured on the served API after a 32- and 64-client load:
271-277 MB resident without it, 255-259 MB a few seconds later with it (`bench/bench_api.py`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def heap_trimmer() -> Callable[[], bool] | None:
    """A function that trims the C heap and says whether memory went back; None off glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: bool(trim(0))
