"""``shaberi sweep``: many models' runs from one plan, as Ray tasks on a cluster or one after another here.

``plan`` parses the TOML plan; ``runner`` is one model's work (serve, generate, stop, judge, passes) and the
two ways to run them all; ``slots`` shares each judge endpoint's slots cluster-wide; ``progress`` is the
live model × stage table and the summary written next to the results.
"""
