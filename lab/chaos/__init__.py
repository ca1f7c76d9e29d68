"""The chaos suite: faults injected one at a time into a loaded local stack, and the proof afterwards.

``fleet`` runs and supervises the pipeline's processes, ``faults`` knows how to break
each part of the system, ``checks`` measures recovery and exactly-once, ``suite`` runs
the whole sequence and returns the table of results.
"""
