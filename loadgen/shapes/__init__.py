"""Rate shapes for the load generator, as Locust LoadTestShape classes.

Pass one with the locustfile: ``locust -f loadgen/locustfile.py,loadgen/shapes/ramp.py``
(``lakehouse load clicks --shape ramp`` does this). A shape here shapes the *event rate*:
users stay constant and the pacer follows ``rate_at``; ``tick`` ends the run.
"""
