"""Step: four equal steps up to the target rate (25 %, 50 %, 75 %, 100 %)."""

from loadgen.shapes import profiles
from loadgen.shapes.base import RateShape


class StepRate(RateShape):
    abstract = False
    profile = staticmethod(profiles.step)
