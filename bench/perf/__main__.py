"""``python -m pebench.perf WHAT [options]`` = ``bench perf WHAT [options]``."""
from . import main

raise SystemExit(main())
