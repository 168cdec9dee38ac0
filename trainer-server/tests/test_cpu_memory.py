import subprocess
import sys

import pytest

# Three 24 MiB tensors and one of 64 MiB made and freed, six times over, in a fresh process: glibc's own thresholds
# (mmap threshold raised to 24 MiB by the first free, trim threshold twice that) trim the 72 MiB free top every round,
# and a block over 32 MiB (the largest mmap threshold) is mapped and unmapped every time, so every round pays fresh
# pages again.
ROUNDS = """
import json, resource, sys
import torch
from agentrl.learning.cpu_memory import keep_freed_memory

kept = keep_freed_memory()
faults = []
for _ in range(6):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.ones(6 << 20) for _ in range(3)] + [torch.ones(16 << 20)]
    del blocks
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"kept": kept, "faults": faults}))
"""


def test_freed_tensors_come_back_from_the_heap_instead_of_fresh_pages():
    done = subprocess.run([sys.executable, "-c", ROUNDS], capture_output=True, text=True, check=True)
    result = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    if not result["kept"]:
        pytest.skip("the C library is not glibc: nothing to set")
    first, *later = result["faults"]
    assert first > 30_000  # 136 MiB of new pages: 34,816 faults of 4 KiB
    # By default each later round faults its 136 MiB again (about 5 x 34,816 in all); kept, they reuse the heap's
    # pages (a round may still land in another malloc arena once, when a thread holds the main one).
    assert sum(later) < 2 * first, result["faults"]


def test_a_child_reports_its_own_peak_not_its_parents():
    """Linux carries ru_maxrss over from the parent through fork and exec: a child of this (grown) process would
    report this process's peak as its own. peak_resident_bytes reads the child's own address space's."""
    grown = bytearray(768 << 20)  # touched: resident in this process
    grown[::4096] = b"x" * len(grown[::4096])
    child = (
        "import resource\n"
        "from agentrl.learning.cpu_memory import peak_resident_bytes\n"
        "print(peak_resident_bytes(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n"
    )
    own, inherited = map(int, subprocess.check_output([sys.executable, "-c", child], text=True).split())
    del grown
    assert inherited >= 768 << 20  # what getrusage says in the child: at least this process's peak
    assert own < 512 << 20  # a Python that imported agentrl's allocator settings: tens of MiB
