"""The soak's CPU accounting counts a process's descendants, and only them when asked to."""

import socket
import subprocess
import sys
import time

from lab.bench.process_cpu import CpuMeter, listening_pid, process_cpu_seconds, tree_cpu_seconds

BURN = "import time\nend = time.process_time() + 0.8\nwhile time.process_time() < end: pass\ntime.sleep(60)"


def test_a_grandchild_burning_cpu_counts_for_the_tree_not_for_its_idle_parent():
    parent = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "$BURN" & wait'], env={"BURN": BURN})
    try:
        deadline = time.monotonic() + 20
        while tree_cpu_seconds(parent.pid) < 0.8 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert tree_cpu_seconds(parent.pid) >= 0.8
        assert process_cpu_seconds(parent.pid) < 0.2  # the shell only waits
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)], check=False)
        parent.wait(10)
    assert tree_cpu_seconds(parent.pid) == 0.0  # gone: nothing to count, no error


def test_this_process_is_the_default():
    before = process_cpu_seconds()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    assert process_cpu_seconds() - before >= 0.25


LISTEN = ("import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n"
          "print(s.getsockname()[1], flush=True)\ntime.sleep(60)")


def test_the_process_listening_on_a_port_is_found_by_it():
    """How the soak finds the broker's process, whether the soak or the stack started it."""
    server = subprocess.Popen([sys.executable, "-c", LISTEN], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        assert listening_pid(port) == server.pid
    finally:
        server.kill()
        server.wait(10)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        assert listening_pid(probe.getsockname()[1]) is None


def test_a_meter_reports_what_each_part_used_between_start_and_stop_only():
    """How the ingest benchmark reports CPU per part: work before ``start`` is not counted."""

    def burn(seconds: float) -> None:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    burn(0.3)  # before the meter starts: not counted
    meter = CpuMeter({"this process": process_cpu_seconds, "a process that is not there":
                      lambda: tree_cpu_seconds(2 ** 22 + 17)})
    meter.start()
    burn(0.4)
    used = meter.stop()
    assert 0.35 <= used["this process"] < 1.0
    assert used["a process that is not there"] == 0.0  # nothing, no error
