"""The README against the product, so that it cannot drift: its CLI
reference is `ztrain --help`'s synopsis, every option and knob --help names
is documented, every binary answers --help and --version, and every path of
the repository the README names exists."""
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


def section(text, heading):
    """The text under a heading, up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n")
    m = re.compile(r"^#{1,%d} " % level, re.M).search(text, start + len(heading) + 1)
    return text[start:m.start() if m else len(text)]


def help_synopsis(text):
    lines = text.split("Synopsis:\n", 1)[1].split("\n\n", 1)[0].split("\n")
    return [line[2:] for line in lines]


class Readme(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.readme = readme()
        cls.help = ztrain("--help").stdout

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
        missing = sorted(o for o in options if o not in self.readme)
        self.assertEqual(missing, [], "options --help names that the README does not")
        self.assertIn("--trial", cli)

    def test_every_knob_is_documented(self):
        knobs = set(re.findall(r"^  (ZT_[A-Z_]+)", self.help, re.M))
        for binary in BINARIES[2:6]:
            out = subprocess.run([os.path.join(BIN, binary), "--help"], capture_output=True, text=True).stdout
            knobs |= set(re.findall(r"^  (ZT_[A-Z_]+)", out, re.M))
        self.assertIn("ZT_SECURITY", knobs)
        documented = section(self.readme, "## Knobs")
        self.assertEqual(sorted(k for k in knobs if k not in documented), [])

    def test_every_binary_answers_help_and_version(self):
        for binary in BINARIES:
            path = os.path.join(BIN, binary)
            for flag in ("--help", "--version"):
                r = subprocess.run([path, flag], capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 0, "%s %s: %s" % (binary, flag, r.stderr))
                self.assertTrue(r.stdout.strip(), "%s %s printed nothing" % (binary, flag))
            self.assertIn(binary, self.readme)

    def test_every_path_named_exists(self):
        """In the README and every document under docs/."""
        texts = [self.readme]
        for p in glob.glob(os.path.join(ROOT, "docs", "*.md")):
            with open(p) as f:
                texts.append(f.read())
        named = set(re.findall(r"`((?:tests|bench|scripts|examples|docs|lib|coordinator|worker|python|cuda|include|"
                               r"model|paramserver|reducer|evaluator|mpi)/[\w./-]+)`(?! under the output folder)", "\n".join(texts)))
        self.assertGreater(len(named), 10)
        gone = sorted(p for p in named if not os.path.exists(os.path.join(ROOT, p.rstrip("/"))))
        self.assertEqual(gone, [])


if __name__ == "__main__":
    ztest.main()
