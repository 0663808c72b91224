import sys

from autoexperiment_client.cli import main

sys.exit(main())
