"""The study scripts: they launch and summarise the committed studies under ``results/`` (one
``REPORT.md`` each, written whole by its script) and write the measured pages in ``docs/``.

Not part of the product: pebench never imports this package, and it is not installed. Run a script
from the repository root as a module, ``python -m benchmarks.<name>`` (e.g.
``python -m benchmarks.probe_recipe --results results/probe-recipe``);
the scripts import each other relatively (``from .reports import fill``). Tests of these scripts live
in ``tests/studies/`` (pytest marker ``studies``). Which script makes which study: ``benchmarks/README.md``.
"""
