from rlvr.errors import cli
from rlvr.planning.cli import main

cli(main)
