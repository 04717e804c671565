"""Argument checks shared by the Python benchmarks: --help prints the
script's docstring; an unknown option, an option without its value or too
many positional arguments is an error (exit 2) before anything runs."""
import sys


def _fail(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(2)


def check(doc, valued=(), flags=(), positionals=1, argv=None):
    argv = sys.argv[1:] if argv is None else argv
    prog = sys.argv[0]
    if "-h" in argv or "--help" in argv:
        print(doc.strip())
        sys.exit(0)
    npos, i = 0, 0
    while i < len(argv):
        a = argv[i]
        if a in valued:
            if i + 1 >= len(argv):
                _fail("%s: %s needs a value (--help)" % (prog, a))
            i += 2
            continue
        if a in flags:
            i += 1
            continue
        if a.startswith("-"):
            _fail("%s: unknown option '%s' (--help lists them)" % (prog, a))
        npos += 1
        if npos > positionals:
            _fail("%s: unexpected argument '%s' (--help)" % (prog, a))
        i += 1
