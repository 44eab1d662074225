"""One run of ``bench run``: its configuration (:mod:`.config`), orchestration (:mod:`.run`), resume
(:mod:`.resume`), stopping (:mod:`.stopping`), integrity checks (:mod:`.integrity`), DDP samplers
(:mod:`.samplers`), DDP set-up (:mod:`.distributed`) and CPU numerics (:mod:`.numerics`).

Import the modules directly (``from pebench.runner.run import run``); this package imports nothing so that
``bench --help`` stays fast.
"""
