"""glibc's malloc, told to keep the memory a CPU learner frees (Linux only).

On CPU every tensor is a malloc. By default glibc hands each large block back to the kernel when it is freed
(blocks over its mmap threshold are unmapped; a heap whose free top passes its trim threshold is trimmed), and the
next allocation of that size takes fresh pages, each a page fault and a page of zeros. A learner frees and allocates
the same sizes every micro-batch: measured on SmolLM2-135M's single-turn benchmark update (32 episodes, 2 cores),
1.6 million page faults an update by default, 0.5 million with a raised mmap threshold and no trimming, and 8.4 s
against 7.3 s. The threshold cannot be raised past 32 MiB, and a step still makes larger tensors (the output head's
weight gradient: 49,152 x 576 entries), so the main thread's blocks are never mapped on their own at all: they come
from the heap, which then serves them again (0-20,000 faults an update after the first). The price is that the
process keeps its peak heap instead of giving it back, as PyTorch's CUDA caching allocator does on GPUs.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt's parameter numbers (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
# The largest mmap threshold glibc accepts on 64-bit machines (half its 64 MiB heap size): blocks up to this come
# from the heap and go back to it.
LARGEST_MMAP_THRESHOLD = 32 << 20
# Never trim the heap's free top (mallopt takes an int).
NEVER_TRIM = (1 << 31) - 1
# No block is mapped on its own: the main thread's come from the heap (other threads' arenas still map what does
# not fit their 64 MiB heaps; glibc does that whatever this says).
NO_MMAPPED_BLOCKS = 0


def keep_freed_memory() -> bool:
    """Set the thresholds for this process; False where the C library is not glibc (nothing is changed)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # no C library to load, or not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = (
        (M_MMAP_THRESHOLD, LARGEST_MMAP_THRESHOLD),
        (M_TRIM_THRESHOLD, NEVER_TRIM),
        (M_MMAP_MAX, NO_MMAPPED_BLOCKS),
    )
    return all([bool(mallopt(parameter, value)) for parameter, value in settings])


def peak_resident_bytes() -> int:
    """This process's peak resident memory: its own address space's high-water mark (VmHWM in /proc/self/status,
    Linux). Not getrusage's ru_maxrss, which Linux carries over from the parent through fork and exec: a run or a
    check started by a large process (a server, a test session of gigabytes) would report the parent's peak.
    Elsewhere (no /proc) ru_maxrss is what there is."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # in kB
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS counts bytes, Linux KiB
