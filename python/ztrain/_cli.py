"""The `ztrain` command of a wheel that carries ztrain's binaries
(`make wheel`): it runs the bundled CLI, ztrain/_dist/bin/ztrain, with the
same arguments (exec: the same process, its signals and exit status). The
role binaries sit beside it, where the CLI finds them."""
import os
import sys

DIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_dist")


def main():
    cli = os.path.join(DIST, "bin", "ztrain")
    if not os.access(cli, os.X_OK):
        sys.exit("ztrain: this install of the ztrain package carries no binaries (pip install ./python builds "
                 "the Python library only): install a wheel made by `make wheel`, or run a build's "
                 "build/bin/ztrain")
    os.execv(cli, [cli] + sys.argv[1:])


if __name__ == "__main__":
    main()
