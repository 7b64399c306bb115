"""spark-submit entry point: `casscade materializer run` with the submit script's arguments."""

import sys

from materializer.cli import materializer

if __name__ == "__main__":
    materializer(["run", *sys.argv[1:]], prog_name="casscade materializer")
