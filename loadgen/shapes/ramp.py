"""Ramp: linearly from 10 % to 100 % of the target over the run."""

from loadgen.shapes import profiles
from loadgen.shapes.base import RateShape


class RampRate(RateShape):
    abstract = False
    profile = staticmethod(profiles.ramp)
