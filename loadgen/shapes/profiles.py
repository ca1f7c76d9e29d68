"""The rate profiles as plain functions (no Locust import: the CLI uses them too).

Each maps (seconds since start, target events/s, run duration) to events/s.
"""

from __future__ import annotations


def constant(seconds: float, target: float, duration: float) -> float:
    return target


def step(seconds: float, target: float, duration: float) -> float:
    """Four equal steps up to the target: 25 %, 50 %, 75 %, 100 %."""
    return target * (min(3, int(4 * seconds / max(duration, 1e-9))) + 1) / 4


def ramp(seconds: float, target: float, duration: float) -> float:
    """Linear from 10 % to 100 % of the target over the run."""
    return target * (0.1 + 0.9 * min(1.0, seconds / max(duration, 1e-9)))


def spike(seconds: float, target: float, duration: float) -> float:
    """30 % of the target, with the full target for the middle fifth of the run."""
    return target if 0.4 * duration <= seconds < 0.6 * duration else 0.3 * target


PROFILES = {"constant": constant, "step": step, "ramp": ramp, "spike": spike}
