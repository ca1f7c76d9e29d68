"""The harness: benchmarks, the soak, the chaos suite, the demo and its reports.

Nothing here runs in production or ships in the image. It drives the product (loadgen,
pipeline, queries, deploy) from outside and measures it; the product never imports it.
"""
