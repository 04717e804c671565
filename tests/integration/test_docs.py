"""The README and the guides under docs/ against the product, so that they
cannot drift: the README's CLI reference is `ztrain --help`'s synopsis,
every option and knob --help names is documented (the knobs in
docs/knobs.md), every binary answers --help and --version, every path of the
repository they name exists, the README stays a front door (under 400
lines) that links every guide, and the manual pages are --help's."""
import glob
import os
import re
import subprocess
import unittest

import ztest  # noqa: E402
from ztest import BIN, ztrain

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARIES = ("ztrain", "ztrain-coordinator", "ztrain-worker", "ztrain-paramserver", "ztrain-reducer",
            "ztrain-evaluator", "ztrain-mpi", "ztrain-hosts", "zt_selftest")


def readme():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def guides():
    """{name: text} of every document under docs/."""
    out = {}
    for p in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        with open(p) as f:
            out[os.path.basename(p)] = f.read()
    return out


def section(text, heading):
    """The text under a heading, up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    m = re.compile(r"^#{1,%d} " % level, re.M).search(text, start + len(heading) + 1)
    return text[start:m.start() if m else len(text)]


def help_synopsis(text):
    lines = text.split("Synopsis:\n", 1)[1].split("\n\n", 1)[0].split("\n")
    return [line[2:] for line in lines]


class ManPages(unittest.TestCase):
    """The manual pages the build writes (build/man/man1, from --help):
    one for ztrain, each of its commands and each binary; each page's
    synopsis is its --help synopsis, line for line; groff renders every
    page without a warning."""

    def test_a_page_for_everything_with_its_synopsis(self):
        man = os.path.join(BIN, "..", "man", "man1")
        top = ztrain("--help").stdout
        commands = sorted(set(re.findall(r"^  ztrain ([a-z]+)\b", top, re.M)))
        self.assertIn("run", commands)
        want = ["ztrain"] + ["ztrain-" + c for c in commands] + [b for b in BINARIES if b.startswith("ztrain-")]
        self.assertEqual(sorted(f[:-2] for f in os.listdir(man)), sorted(want))
        for name in want:
            with open(os.path.join(man, name + ".1")) as f:
                page = f.read()
            synopsis = page.split(".SH SYNOPSIS\n.nf\n", 1)[1].split("\n.fi", 1)[0].replace("\\-", "-")
            if name == "ztrain":
                self.assertEqual(synopsis.split("\n"), help_synopsis(top))
            elif name[7:] in commands:
                cmd = name[7:]
                lines = [l for l in help_synopsis(top)]
                mine = []
                for l in lines:
                    if l.startswith("ztrain "):
                        on = l.startswith("ztrain %s " % cmd) or l == "ztrain " + cmd
                    if on:
                        mine.append(l)
                self.assertEqual(synopsis.split("\n"), mine, name)
            else:
                usage = subprocess.run([os.path.join(BIN, name), "--help"], capture_output=True,
                                       text=True).stdout.split("\n")[0]
                self.assertEqual(synopsis.split("\n")[0], usage[len("usage: "):], name)
            r = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(man, name + ".1")],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual((r.returncode, r.stderr), (0, ""), name)


class Readme(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.readme = readme()
        cls.guides = guides()
        cls.all = "\n".join([cls.readme] + list(cls.guides.values()))
        cls.help = ztrain("--help").stdout

    def test_a_front_door_that_links_every_guide(self):
        self.assertLess(self.readme.count("\n"), 400)
        for name in self.guides:
            self.assertIn("](docs/%s)" % name, self.readme, name)
        for name, text in self.guides.items():  # and every link between them leads somewhere
            for target in re.findall(r"\]\(([\w.-]+\.md)(?:#[\w-]*)?\)", text):
                self.assertIn(target, self.guides, "%s links %s" % (name, target))

    def test_cli_reference_is_the_help_synopsis(self):
        cli = section(self.readme, "## CLI reference: `ztrain`")
        block = cli.split("```\n", 2)[1].rstrip("\n").split("\n")
        self.assertEqual(block, help_synopsis(self.help))

    def test_the_comparison_sees_a_difference(self):
        text = "usage\n\nSynopsis:\n  ztrain run FILE\n  ztrain list\n\nCommands:\n"
        self.assertEqual(help_synopsis(text), ["ztrain run FILE", "ztrain list"])
        self.assertNotEqual(help_synopsis(text), ["ztrain run FILE [--trial ID]", "ztrain list"])

    def test_every_option_of_help_is_documented(self):
        options = set(re.findall(r"^  (--[a-z][a-z-]+)", self.help.split("Options:\n", 1)[1], re.M))
        options |= set(re.findall(r"(--[a-z][a-z-]+)", "\n".join(help_synopsis(self.help))))
        self.assertIn("--metrics-port", options)
        cli = section(self.readme, "## CLI reference: `ztrain`")
        missing = sorted(o for o in options if o not in self.all)
        self.assertEqual(missing, [], "options --help names that neither the README nor a guide does")
        self.assertIn("--trial", cli)

    def test_every_knob_is_documented(self):
        knobs = set(re.findall(r"^  (ZT_[A-Z_]+)", self.help, re.M))
        for binary in BINARIES[2:6]:
            out = subprocess.run([os.path.join(BIN, binary), "--help"], capture_output=True, text=True).stdout
            knobs |= set(re.findall(r"^  (ZT_[A-Z_]+)", out, re.M))
        self.assertIn("ZT_SECURITY", knobs)
        documented = self.guides["knobs.md"]
        self.assertEqual(sorted(k for k in knobs if k not in documented), [])

    def test_every_binary_answers_help_and_version(self):
        for binary in BINARIES:
            path = os.path.join(BIN, binary)
            for flag in ("--help", "--version"):
                r = subprocess.run([path, flag], capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 0, "%s %s: %s" % (binary, flag, r.stderr))
                self.assertTrue(r.stdout.strip(), "%s %s printed nothing" % (binary, flag))
            self.assertIn(binary, self.all)

    def test_every_path_named_exists(self):
        """In the README and every document under docs/."""
        texts = [self.all]
        named = set(re.findall(r"`((?:tests|bench|scripts|examples|docs|lib|coordinator|worker|python|cuda|include|"
                               r"model|paramserver|reducer|evaluator|mpi|hosts)/[\w./-]+)`(?! under the output folder)", "\n".join(texts)))
        self.assertGreater(len(named), 10)
        gone = sorted(p for p in named if not os.path.exists(os.path.join(ROOT, p.rstrip("/"))))
        self.assertEqual(gone, [])


if __name__ == "__main__":
    ztest.main()
