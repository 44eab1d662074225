"""``python -m pebench.cli`` = the ``bench`` console script (Lightning's DDP launcher re-executes this form)."""
import sys

from pebench.cli import main

sys.exit(main())
