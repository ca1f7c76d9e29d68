"""The common part of the rate shapes: duration from --run-time, users held constant."""

from __future__ import annotations

from locust import LoadTestShape


class RateShape(LoadTestShape):
    abstract = True

    def options(self):
        return self.runner.environment.parsed_options

    #: one of loadgen.shapes.profiles: (seconds, target, duration) -> events/s
    profile = None

    def rate_at(self, seconds: float, target: float, duration: float) -> float:
        return self.profile(seconds, target, duration)

    def tick(self):
        opts = self.options()
        duration = float(opts.run_time or 60)
        if self.get_run_time() >= duration:
            return None
        return (opts.num_users or 1, opts.spawn_rate or 100)
