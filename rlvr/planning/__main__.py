from rlvr.cli import cli
from rlvr.planning.cli import main

cli(main)
