"""Command-line client of an AutoExperiment site (standard library only: no Django, no site code).

    autoexperiment submit RESULTS [--no-reexecute] [--no-wait]
    autoexperiment status ID
    autoexperiment download tasks --suite S --n N --context C [--output DIR]
    autoexperiment leaderboard [--suite S] [--format table|json|csv]

The token comes from AUTOEXPERIMENT_TOKEN or the config file (autoexperiment_client.config), never
from the command line, where other users' `ps` and the shell's history would see it.
"""

__version__ = "0.1.0"
