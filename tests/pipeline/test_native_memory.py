"""The allocator settings the CDC apply runs with give freed arrays back to the system (glibc)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pipeline.native_memory import _libc

# A fold-like pattern in a worker thread: one large array freed (glibc then raises its mmap
# threshold past the arrays that follow), then many 2 MB arrays of which every tenth stays alive.
# The freed ones sit between the live ones, so no trim of the heap's top can give them back.
PATTERN = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import psutil
    from pipeline.native_memory import keep_resident_small, give_back_freed

    if sys.argv[1] == "tuned":
        assert keep_resident_small()

    kept = []
    def work():
        big = np.ones(30 << 20, dtype=np.uint8); del big
        arrays = [np.ones(2 << 20, dtype=np.uint8) for _ in range(200)]
        kept.extend(arrays[::10])
        del arrays
        if sys.argv[1] == "tuned":
            give_back_freed()
    before = psutil.Process().memory_info().rss
    thread = threading.Thread(target=work); thread.start(); thread.join()
    print((psutil.Process().memory_info().rss - before) >> 20)
""")


def _growth_mib(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


@pytest.mark.skipif(_libc() is None, reason="the settings are glibc's")
def test_freed_arrays_leave_the_process_with_the_settings_and_stay_without():
    kept_mib = 20 * 2  # the twenty arrays still alive
    default, tuned = _growth_mib("default"), _growth_mib("tuned")
    assert default > kept_mib + 200, f"the default allocator kept only {default} MiB: the pattern no longer shows it"
    assert tuned < kept_mib + 40, f"{tuned} MiB resident for {kept_mib} MiB of live arrays"
