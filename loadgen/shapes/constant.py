"""Constant: the target rate for the whole run."""

from loadgen.shapes import profiles
from loadgen.shapes.base import RateShape


class ConstantRate(RateShape):
    abstract = False
    profile = staticmethod(profiles.constant)
