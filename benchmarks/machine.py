"""What every benchmark reports about the machine, and its memory probes.

Imported by the scripts of this directory (run as `python benchmarks/X.py`,
so this directory is on `sys.path`). Linux `/proc` files; elsewhere each
function falls back to what the standard library knows.
"""

import os
import platform


def _proc_field(path, prefix):
    """The text after `:` of the first line of `path` starting with `prefix`."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model():
    """The CPU model from /proc/cpuinfo, else the architecture."""
    model = _proc_field("/proc/cpuinfo", "model name")
    return model or platform.processor() or f"{platform.machine()} CPU"


def cpu_flags(wanted=("avx512_bf16", "amx_bf16", "amx_tile", "amx_int8")):
    """Which of the `wanted` CPU flags /proc/cpuinfo lists (bfloat16 and AMX)."""
    flags = set((_proc_field("/proc/cpuinfo", "flags") or "").split())
    return [flag for flag in wanted if flag in flags]


def load_average():
    """The 1, 5 and 15 minute load averages, as `"0.30 1.73 2.31"`."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def describe():
    """One line: CPU model, logical cores and load average."""
    return (
        f"CPU: {cpu_model()} ({os.cpu_count()} logical cores); "
        f"load average: {load_average()}"
    )


def status_kib(field):
    """A `kB` field of `/proc/self/status`, such as `VmRSS` or `VmHWM`."""
    value = _proc_field("/proc/self/status", field + ":")
    if value is None:
        raise KeyError(field)
    return int(value.split()[0])


def reset_peak():
    """Resets VmHWM to VmRSS; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def available_gib():
    """MemAvailable from /proc/meminfo in GiB, or None where it cannot be read."""
    value = _proc_field("/proc/meminfo", "MemAvailable:")
    return None if value is None else int(value.split()[0]) / 2**20


def printer(path=None):
    """`say(text="")`: prints a line and, given `path`, writes it there too.

    The log file is written line by line (flushed), so a run cut short
    keeps what it printed.
    """
    log = open(path, "w", encoding="utf-8") if path else None

    def say(text=""):
        print(text, flush=True)
        if log:
            log.write(text + "\n")
            log.flush()

    return say
