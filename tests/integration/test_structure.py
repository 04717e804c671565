"""The shape of the code, checked so that it cannot drift back: libztrain's
folders call each other in one direction only (read from the built objects'
symbols), and so do coordinator/'s (cli -> chief and tune -> formats ->
launch -> plan); no new circle of calls between files of any library; a job
format's name appears in its own folder only; wire/ includes nothing above
it; no source file or function grows past its bound without saying why; and
each decision that has one home (Slurm's job id, the final job states, the
exit status of a state) is made nowhere else."""
import ast
import collections
import functools
import glob
import os
import re
import subprocess
import unittest

import ztest  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ZT_BUILD", os.path.join(ROOT, "build"))
LIB_FOLDERS = ("base", "wire", "runtime", "ps", "allreduce", "state")
MAX_FILE_LINES = 700       # a C file of the product
MAX_TEST_FILE_LINES = 900  # a test's, and CUDA's
MAX_COORD_LINES = 600
MAX_FUNCTION_LINES = 100   # but a selftest's or a test's
MAX_TEST_FUNCTION_LINES = 120
EXPLAINED_FUNCTION_LINES = 80  # longer needs a "Long ..." comment saying why
FINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED", "STOPPED", "INFEASIBLE")


def lines_of(path):
    with open(os.path.join(ROOT, path), errors="replace") as f:
        return f.read().split("\n")


def sources(*patterns):
    """Tracked files of the project matching the patterns (git ls-files)."""
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [f for f in out if os.path.exists(os.path.join(ROOT, f))]


def functions(path):
    """(name, first line, body lines, comment above) of each function
    defined in a C file of the project's style: the body's braces at
    column 0."""
    with open(os.path.join(ROOT, path), errors="replace") as f:
        lines = f.read().split("\n")
    out, start = [], None
    for i, line in enumerate(lines):
        if line.startswith("{") and start is None:
            j = i - 1
            while j > 0 and lines[j][:1] in (" ", "\t"):
                j -= 1
            start = (j, i)
        elif line.startswith("}") and start is not None:
            sig = lines[start[0]]
            m = re.search(r"(\w+)\s*\(", sig)
            k, comment = start[0] - 1, []
            while k >= 0 and (lines[k].startswith("/*") or lines[k].startswith(" *")):
                comment.insert(0, lines[k])
                k -= 1
            out.append((m.group(1) if m else sig, start[0] + 1, i - start[1] - 1, "\n".join(comment)))
            start = None
    return out


def enclosing_function(path, lineno):
    for name, first, length, _ in functions(path):
        if first <= lineno <= first + length + 2:
            return name
    return None


def strongly_connected(graph):
    """Tarjan's components of {node: set(nodes)}, those of two nodes or more."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return comps


# The static libraries whose files are checked for circles of calls, by
# their objects' folder under the build.
OBJECT_DIRS = {"lib": "lib/CMakeFiles/ztrain_objs.dir", "coordinator": "coordinator/CMakeFiles/ztcoord.dir",
               "paramserver": "paramserver/CMakeFiles/ztps.dir", "reducer": "reducer/CMakeFiles/ztreducer.dir",
               "worker": "worker/CMakeFiles/ztworker.dir", "evaluator": "evaluator/CMakeFiles/zteval.dir",
               "model": "model/CMakeFiles/ztmodel.dir"}
# Circles of calls that are known and are to go, each with the work that
# removes it; the list only shrinks (an entry that no longer holds fails
# too, so that it is struck off).
KNOWN_FILE_CIRCLES = {
    # the log reads its knobs, the knobs log a bad value
    ("lib", frozenset({"base/zt_knobs.c", "base/zt_log.c"})),
    # the ZAP handler is started by the first socket made, and asks it back
    ("lib", frozenset({"wire/zt_auth.c", "wire/zt_transport.c"})),
    # the all-reduce's files share its state (zt_ar_internal.h) both ways
    ("lib", frozenset({"allreduce/zt_allreduce.c", "allreduce/zt_ar_idle.c", "allreduce/zt_ar_lanes.c",
                       "allreduce/zt_ar_reducers.c", "allreduce/zt_ar_ring.c"})),
    # the replica's link, its file server and the role process's refusals
    ("lib", frozenset({"runtime/zt_fileserver.c", "runtime/zt_process.c", "runtime/zt_replica.c"})),
}
# coordinator/'s folders, top down: each calls only folders below its own.
# The study runner (tune/) stands beside the chief: it runs each trial as a
# job of its own. A format's folder (formats/NAME) is formats/ here, and
# calls no other format's; formats/zt_formats.c registers them all.
COORDINATOR_ORDER = (("cli",), ("chief", "tune"), ("formats",), ("launch",), ("plan",))
# Each job format's names: they appear in code (comments and strings aside)
# only in its folder and in the registration file.
FORMAT_NAMES = {"vertex": ("vertex",), "legacy": ("legacy",),
                "sagemaker": ("sagemaker", "zt_sm_", "smdistributed", "smddp")}
FORMATS_REGISTRY = "coordinator/formats/zt_formats.c"
# The files that see the whole chief (zt_coord_t, in chief/zt_coord_int.h):
# to shrink as supervision and the job document come to own their state as
# the elastic controller and the record do (a new one fails, and so does one
# that no longer includes it, so that it is struck off).
CHIEF_INSIDERS = {"coordinator/chief/zt_coord.c", "coordinator/chief/zt_coord_ctl.c",
                  "coordinator/chief/zt_coord_doc.c", "coordinator/chief/zt_coord_elastic.c",
                  "coordinator/chief/zt_coord_supervise.c"}


@functools.lru_cache(maxsize=None)
def call_graph(objdir):
    """{file: {files it calls}} from the objects under objdir (names
    relative to it, as the sources'), and why each edge: a symbol."""
    defined, undefined = {}, {}
    for obj in glob.glob(os.path.join(objdir, "**", "*.o"), recursive=True):
        name = os.path.relpath(obj, objdir)[:-len(".o")]
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        undefined[name] = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                undefined[name].add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = name
    graph, why = collections.defaultdict(set), {}
    for f, syms in undefined.items():
        for sym in syms:
            g = defined.get(sym)
            if g and g != f:
                graph[f].add(g)
                why.setdefault((f, g), "%s calls %s (%s)" % (f, sym, g))
    return graph, why


def folder_graph(graph, why, folder_of):
    """The graph of the folders (folder_of a file) that graph's files lie in,
    and why each edge: one of its files' calls."""
    folders, fwhy = collections.defaultdict(set), {}
    for f, calls in graph.items():
        for g in calls:
            a, b = folder_of(f), folder_of(g)
            if a != b:
                folders[a].add(b)
                fwhy.setdefault((a, b), why[(f, g)])
    return folders, fwhy


def circle_report(found, known):
    """The circles found that are not known, and the known ones not found."""
    found = {frozenset(c) for c in found}
    return sorted(sorted(c) for c in found - known), sorted(sorted(c) for c in known - found)


def against_the_order(graph, why, order):
    """The calls of graph ({folder: folders it calls}) that go up or across
    order (a tuple of levels, top first, each a tuple of folders; formats/X
    is formats, and calls no other format), and the folders it does not
    place."""
    def level(f):
        top = f.split("/")[0]
        return next((i for i, names in enumerate(order) if top in names), None)
    bad = ["a folder the order does not place: %s" % f for f in sorted(set(graph) | {g for v in graph.values()
                                                                                    for g in v})
           if level(f) is None]
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if level(a) is None or level(b) is None:
                continue
            across = a.startswith("formats/") and b.startswith("formats/")
            if level(b) < level(a) or (level(b) == level(a) and (across or a.split("/")[0] != b.split("/")[0])):
                bad.append(why[(a, b)])
    return bad


def include_graph(texts):
    """{folder: folders it includes from} among coordinator/'s folders (a
    format's folder by its own name, formats/NAME), and why each edge: an
    include line, from {path: text}."""
    graph, why = collections.defaultdict(set), {}
    folders = {f for level in COORDINATOR_ORDER for f in level}
    for path, text in sorted(texts.items()):
        me = os.path.dirname(path)[len("coordinator/"):]
        for n, line in enumerate(text.split("\n"), 1):
            m = re.match(r'\s*#\s*include\s+"((\w+)(/\w+)?)/[\w.]+"', line)
            if m and m.group(2) in folders and m.group(1) != me:
                graph[me].add(m.group(1))
                why.setdefault((me, m.group(1)), "%s:%d: %s" % (path, n, line.strip()))
    return graph, why


def code_of(text):
    """C text with its comments and its string and character literals
    emptied, lines kept."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])'", "''", text)


def format_names_outside(path, text):
    """Each identifier of path's code that names a job format outside that
    format's folder (and the registration file)."""
    bad = []
    for n, line in enumerate(text.split("\n"), 1):  # a format's own headers, included elsewhere
        m = re.match(r'\s*#\s*include\s+"formats/(\w+)/', line)
        if m and path != FORMATS_REGISTRY and not path.startswith("coordinator/formats/%s/" % m.group(1)):
            bad.append("%s:%d: %s" % (path, n, line.strip()))
    for n, line in enumerate(code_of(text).split("\n"), 1):
        for ident in re.findall(r"[A-Za-z_]\w*", line):
            for fmt, names in FORMAT_NAMES.items():
                if (any(x in ident.lower() for x in names) and path != FORMATS_REGISTRY and
                        not path.startswith("coordinator/formats/%s/" % fmt)):
                    bad.append("%s:%d: %s (%s's)" % (path, n, ident, fmt))
    return bad


class Layers(unittest.TestCase):
    def objects(self):
        objs = glob.glob(os.path.join(BUILD, "lib", "CMakeFiles", "ztrain_objs.dir", "*", "*.o"))
        if not objs:
            self.fail("no libztrain objects under %s: build first" % BUILD)
        return objs

    def test_no_circle_of_calls_spans_two_lib_folders(self):
        self.objects()
        graph, why = folder_graph(*call_graph(os.path.join(BUILD, OBJECT_DIRS["lib"])), lambda f: f.split("/")[0])
        self.assertEqual(set(graph) - set(LIB_FOLDERS), set(), "a lib/ folder this test does not know")
        circles = strongly_connected(graph)
        detail = [why[(a, b)] for c in circles for a in c for b in c if (a, b) in why]
        self.assertEqual(circles, [], "folders of lib/ calling each other in a circle:\n  " + "\n  ".join(detail))
        # base/ is the floor: it calls no other folder of lib/
        self.assertEqual(graph.get("base", set()), set(), [v for k, v in why.items() if k[0] == "base"])

    @staticmethod
    def blas_in(path):
        """What of OpenBLAS the binary at path links or names: the libraries
        ldd lists and the symbols nm lists (undefined or defined)."""
        ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
        nm = subprocess.run(["nm", "-D", path], capture_output=True, text=True, check=True).stdout
        libs = [l.split()[0] for l in ldd.splitlines() if "blas" in l.lower()]
        syms = [l.split()[-1] for l in nm.splitlines() if re.search(r"\b(cblas_|openblas_)", l)]
        return libs + syms

    def test_the_library_links_no_blas(self):
        """The built-in model (model/) is the trainer's and evaluator's:
        libztrain, which every replica and the Python package load, carries
        no BLAS."""
        lib = os.path.join(BUILD, "lib", "libztrain.so")
        self.assertTrue(os.path.exists(lib), "build first")
        self.assertEqual(self.blas_in(lib), [])

    def test_the_blas_check_sees_blas(self):
        found = self.blas_in(os.path.join(BUILD, "bin", "ztrain-worker"))
        self.assertTrue(any("openblas" in f for f in found), found)
        self.assertTrue(any(f.startswith("cblas_") for f in found), found)

    def test_no_new_circle_of_calls_between_files(self):
        new, gone = [], []
        for lib, rel in OBJECT_DIRS.items():
            objdir = os.path.join(BUILD, rel)
            if not glob.glob(os.path.join(objdir, "**", "*.o"), recursive=True):
                self.fail("no objects under %s: build first" % objdir)
            graph, why = call_graph(objdir)
            circles = strongly_connected(graph)
            n, g = circle_report(circles, {c for l, c in KNOWN_FILE_CIRCLES if l == lib})
            new += ["%s: %s\n    %s" % (lib, c, "\n    ".join(why[(a, b)] for a in c for b in c if (a, b) in why))
                    for c in n]
            gone += ["%s: %s" % (lib, c) for c in g]
        self.assertEqual(new, [], "files calling each other in a circle (a new one)")
        self.assertEqual(gone, [], "known circles that are gone: strike them off KNOWN_FILE_CIRCLES")

    def test_coordinator_folders_call_down_only(self):
        folders, why = folder_graph(*call_graph(os.path.join(BUILD, OBJECT_DIRS["coordinator"])),
                                    lambda f: os.path.dirname(f) or ".")
        self.assertIn(("cli", "chief"), why, "the check reads no calls: build first")
        self.assertEqual(against_the_order(folders, why, COORDINATOR_ORDER), [])

    def test_coordinator_folders_include_down_only(self):
        """The includes follow the calls' order: a folder sees no header of a
        folder above it, nor a format another format's."""
        paths = sources("coordinator/*/*.c", "coordinator/*/*.h", "coordinator/*/*/*.c", "coordinator/*/*/*.h")
        graph, why = include_graph({p: "\n".join(lines_of(p)) for p in paths})
        self.assertIn("chief", graph, "the check reads no includes")
        self.assertEqual(against_the_order(graph, why, COORDINATOR_ORDER), [])

    def test_few_files_see_the_whole_chief(self):
        seen = {p for p in sources("coordinator/*.c", "coordinator/*.h", "coordinator/*/*.c", "coordinator/*/*.h",
                                    "coordinator/*/*/*.c", "coordinator/*/*/*.h", "tests/*.c", "tests/*/*.c")
                if re.search(r'#\s*include\s+"chief/zt_coord_int\.h"', "\n".join(lines_of(p)))}
        self.assertIn("coordinator/chief/zt_coord.c", seen, "the check reads no includes")
        self.assertEqual((sorted(seen - CHIEF_INSIDERS), sorted(CHIEF_INSIDERS - seen)), ([], []),
                         "files that include chief/zt_coord_int.h: new ones, and listed ones that no longer do")

    def test_the_include_check(self):
        graph, why = include_graph({"coordinator/launch/x.c": '#include "chief/zt_coord.h"\n#include "plan/a.h"\n',
                                    "coordinator/formats/a/y.h": '#include "formats/b/z.h"\n#include "base/q.h"\n'})
        self.assertEqual(against_the_order(graph, why, COORDINATOR_ORDER),
                         ['coordinator/formats/a/y.h:1: #include "formats/b/z.h"',
                          'coordinator/launch/x.c:1: #include "chief/zt_coord.h"'])

    def test_the_order_check(self):
        graph = {"cli": {"chief", "plan"}, "chief": {"formats"}, "formats/a": {"launch", "formats/b"},
                 "formats": {"formats/a"}, "launch": {"chief"}, "tune": {"chief"}, "misc": {"plan"}}
        why = {(a, b): "%s calls %s" % (a, b) for a, bs in graph.items() for b in bs}
        self.assertEqual(against_the_order(graph, why, COORDINATOR_ORDER),
                         ["a folder the order does not place: misc", "formats/a calls formats/b",
                          "launch calls chief", "tune calls chief"])

    def test_a_format_is_named_in_its_folder_only(self):
        bad = []
        for path in sources("coordinator/*.c", "coordinator/*.h"):
            bad += format_names_outside(path, "\n".join(lines_of(path)))
        self.assertEqual(bad, [], "a job format's names outside formats/NAME/ (reach it through zt_format_t)")

    def test_the_format_name_check(self):
        text = ('/* SageMaker, in a comment */\nstatic int s_x(void)\n{\n    puts("sagemaker");\n'
                '    return zt_sm_host(1) + s_vertex_keys;\n}\n')
        self.assertEqual(format_names_outside("coordinator/chief/x.c", text),
                         ["coordinator/chief/x.c:5: zt_sm_host (sagemaker's)",
                          "coordinator/chief/x.c:5: s_vertex_keys (vertex's)"])
        self.assertEqual(format_names_outside("coordinator/cli/x.c", '#include "formats/legacy/a.h"\n'),
                         ['coordinator/cli/x.c:1: #include "formats/legacy/a.h"'])
        self.assertEqual(format_names_outside("coordinator/formats/sagemaker/x.c", text),
                         ["coordinator/formats/sagemaker/x.c:5: s_vertex_keys (vertex's)"])
        self.assertEqual(format_names_outside(FORMATS_REGISTRY, text), [])

    def test_the_circle_report(self):
        graph = {"a.c": {"b.c"}, "b.c": {"a.c"}, "c.c": {"d.c"}, "d.c": {"c.c"}, "e.c": {"a.c"}}
        known = {frozenset({"a.c", "b.c"}), frozenset({"x.c", "y.c"})}
        self.assertEqual(circle_report(strongly_connected(graph), known), ([["c.c", "d.c"]], [["x.c", "y.c"]]))

    def test_the_circle_finder(self):
        graph = {"wire": {"runtime"}, "runtime": {"wire", "base"}, "allreduce": {"wire"}, "base": set()}
        self.assertEqual(strongly_connected(graph), [["runtime", "wire"]])
        self.assertEqual(strongly_connected({"a": {"b"}, "b": {"c"}}), [])

    def test_wire_and_base_include_nothing_above_them(self):
        above = {"base": LIB_FOLDERS[1:] + ("tboard",), "wire": LIB_FOLDERS[2:] + ("tboard",)}
        bad = []
        for folder, banned in above.items():
            for path in sources("lib/%s/*.c" % folder, "lib/%s/*.h" % folder):
                for n, line in enumerate(lines_of(path), 1):
                    m = re.match(r'\s*#\s*include\s+"(\w+)/', line)
                    if m and m.group(1) in banned:
                        bad.append("%s:%d: %s" % (path, n, line.strip()))
        self.assertEqual(bad, [], "lib/base and lib/wire include only their own folder and below")


class Sizes(unittest.TestCase):
    def test_source_files(self):
        big = []
        for path in sources("*.c", "*.cu"):
            with open(os.path.join(ROOT, path), errors="replace") as f:
                n = sum(1 for _ in f)
            limit = (MAX_COORD_LINES if path == "coordinator/chief/zt_coord.c"
                     else MAX_TEST_FILE_LINES if path.startswith("tests/") or path.endswith(".cu")
                     else MAX_FILE_LINES)
            if n > limit:
                big.append("%s: %d lines (at most %d)" % (path, n, limit))
        self.assertEqual(big, [])

    def test_functions(self):
        long_, unexplained = [], []
        for path in sources("*.c", "*.cu"):
            for name, first, length, comment in functions(path):
                where = "%s:%d %s: %d lines" % (path, first, name, length)
                test = path.startswith("tests/") or "selftest" in name
                if length > (MAX_TEST_FUNCTION_LINES if test else MAX_FUNCTION_LINES):
                    long_.append(where)
                elif length > EXPLAINED_FUNCTION_LINES and "Long" not in comment:
                    unexplained.append(where)
        self.assertEqual(long_, [], "functions over %d lines (a selftest's or a test's: %d)" %
                         (MAX_FUNCTION_LINES, MAX_TEST_FUNCTION_LINES))
        self.assertEqual(unexplained, [], "functions over %d lines without a comment above saying why "
                         "(\"Long ...\")" % EXPLAINED_FUNCTION_LINES)

    def test_the_checker_sees_a_long_function(self):
        # the measure itself, on a file made for it: it must be able to fail
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".c", dir=ROOT, delete=False) as f:
            f.write("/* short */\nint f(void)\n{\n" + "    x();\n" * 130 + "}\n")
        try:
            rel = os.path.relpath(f.name, ROOT)
            [(name, first, length, comment)] = functions(rel)
            self.assertEqual((name, first, length, comment), ("f", 2, 130, "/* short */"))
        finally:
            os.unlink(f.name)


class OneHome(unittest.TestCase):
    def product_c(self):
        return [p for p in sources("*.c", "*.h") if not p.startswith(("tests/", "bench/"))]

    def test_slurm_job_id_is_read_in_one_function(self):
        homes = set()
        for path in self.product_c():
            for n, line in enumerate(lines_of(path), 1):
                if '"SLURM_JOB_ID' in line or '"SLURM_JOBID' in line:
                    homes.add((path, enclosing_function(path, n)))
        self.assertEqual(len(homes), 1, sorted(homes))

    def test_final_states_and_exit_codes_are_decided_in_zt_state(self):
        bad = []
        for path in self.product_c():
            if path.startswith("coordinator/plan/zt_state."):
                continue
            for n, line in enumerate(lines_of(path), 1):
                named = [s for s in FINAL_STATES if re.search(r'strcmp\([^)]*"%s"\)' % s, line)]
                if len(named) >= 2:  # a final-state test, or a state's exit code, written again
                    bad.append("%s:%d: %s" % (path, n, line.strip()))
        self.assertEqual(bad, [], "compare states through zt_state_final / zt_state_exit_code")


class PythonTakesTheLibrarysTables(unittest.TestCase):
    """The Python package asks libztrain for its contracts (_native.ERRORS,
    OPTIMIZERS, env_name, knob_int) instead of copying them."""

    def names(self, path, pattern):
        return set(re.findall(pattern, "\n".join(lines_of(path))))

    def offences(self, tree, path, variables, optimizers):
        bad = []
        lookups = {"knob_int", "env_name", "env", "zt_knob_find", "zt_job_env_name"}
        allowed = set()  # string constants that are a lookup's key
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if fn in lookups:
                    allowed.update(id(a) for a in node.args)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in allowed:
                if node.value in variables:
                    bad.append("%s:%d: the variable name %r" % (path, node.lineno, node.value))
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.UnaryOp)):
                for target in node.targets:
                    if isinstance(target, ast.Name) and re.match(r"ZT_E[A-Z]+$", target.id):
                        bad.append("%s:%d: the error code %s" % (path, node.lineno, target.id))
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                named = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in optimizers]
                if len(named) >= 2:
                    bad.append("%s:%d: a table of optimizers %s" % (path, node.lineno, named))
        return bad

    def contracts(self):
        variables = self.names("lib/base/zt_env.h", r'X\(\w+,\s*"(\w+)"')
        variables |= self.names("include/ztrain/zt_knobs.h", r'X\(\w+,\s*"(ZT_\w+)"')
        optimizers = self.names("lib/state/zt_optim.h", r'X\(\w+,\s*"(\w+)"')
        self.assertIn("CLOUD_ML_HP_METRIC_FILE", variables)
        self.assertIn("ZT_PS_TIMEOUT_MS", variables)
        self.assertIn("adam", optimizers)
        return variables, optimizers

    def test_the_package_copies_no_contract(self):
        variables, optimizers = self.contracts()
        bad = []
        for path in sources("python/ztrain/*.py", "python/ztrain/**/*.py"):
            bad += self.offences(ast.parse("\n".join(lines_of(path))), path, variables, optimizers)
        self.assertEqual(bad, [])

    def test_the_check_sees_copies(self):
        variables, optimizers = self.contracts()
        copied = ast.parse('import os\nZT_ETIMEDOUT = -6\nOPT = ("sgd", "adam")\n'
                           'p = os.environ.get("CLOUD_ML_HP_METRIC_FILE")\nk = knob_int("ZT_PS_TIMEOUT_MS")\n')
        self.assertEqual(len(self.offences(copied, "x.py", variables, optimizers)), 3)


if __name__ == "__main__":
    ztest.main()
