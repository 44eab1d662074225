"""Grids of runs (``bench sweep``): the local scheduler (:mod:`.local`), the in-process preloaded runner
(:mod:`.preload`) and the SLURM launcher through submitit (:mod:`.slurm`).

Import the modules directly; this package imports nothing so that ``bench --help`` stays fast.
"""
