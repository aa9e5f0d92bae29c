from rlvr.inputs import cli
from rlvr.planning.cli import main

cli(main)
