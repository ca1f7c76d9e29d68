"""Spike: 30 % of the target, with the full target for the middle fifth of the run."""

from loadgen.shapes import profiles
from loadgen.shapes.base import RateShape


class SpikeRate(RateShape):
    abstract = False
    profile = staticmethod(profiles.spike)
