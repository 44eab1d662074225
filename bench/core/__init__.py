"""The leaf of pebench: what every other layer may use and that imports nothing else of pebench.

* :mod:`.registry`: the one name -> class registry mechanism (PEs, models, datasets, tasks, analyses,
  perf suites), with lazy import by name and "did you mean" errors;
* :mod:`.io`: atomic file writes (temp file + ``os.replace``);
* :mod:`.errors`: user errors (one line, exit code 2 in the CLI);
* :mod:`.locks`: lock files that claim a run directory across processes and hosts;
* :mod:`.fingerprint`: configuration fingerprints (which runs are seeds of one experiment);
* :mod:`.child_pythonpath`: the `PYTHONPATH` of the Python children torch starts, without the repository root.
"""
