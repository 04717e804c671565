#!/usr/bin/env python3
"""Writes ztrain's manual pages from the binaries' own --help, so that the
two cannot drift: ztrain(1), a page for each of its commands
(ztrain-run(1), ... read as `man ztrain run`), and one for each role
binary (ztrain-worker(1), ...).

    python3 scripts/man.py BIN_DIR OUT_DIR

BIN_DIR holds the built binaries; OUT_DIR gets the *.1 pages (the build
runs this into build/man/man1; `cmake --install` installs them under
share/man/man1). A page's SYNOPSIS is the --help synopsis as printed; its
other sections are the --help sections, as printed (no-fill)."""
import os
import re
import subprocess
import sys

BINARIES = ["ztrain-coordinator", "ztrain-worker", "ztrain-paramserver", "ztrain-reducer", "ztrain-evaluator",
            "ztrain-mpi", "ztrain-hosts"]
HEADING = re.compile(r"^([A-Z][^:]*):$")


def help_text(bin_dir, name):
    r = subprocess.run([os.path.join(bin_dir, name), "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        sys.exit("man.py: %s --help exited %d: %s" % (name, r.returncode, r.stderr))
    return r.stdout


def parse(text):
    """(usage lines, description paragraphs, [(heading, lines)]) of a --help text."""
    lines = text.rstrip("\n").split("\n")
    usage = [lines[0][len("usage: "):]] if lines[0].startswith("usage: ") else []
    i = 1
    while i < len(lines) and lines[i].startswith("       "):  # usage: continued
        usage.append(lines[i].strip())
        i += 1
    desc, sections, para = [], [], []
    for line in lines[i:]:
        m = HEADING.match(line)
        if m:
            sections.append((m.group(1), []))
        elif sections:
            sections[-1][1].append(line)
        elif line.strip():
            para.append(line.strip())
        elif para:
            desc.append(" ".join(para))
            para = []
    if para:
        desc.append(" ".join(para))
    return usage, desc, [(h, trim(body)) for h, body in sections]


def trim(body):
    while body and not body[-1].strip():
        body = body[:-1]
    while body and not body[0].strip():
        body = body[1:]
    return body


def esc(text):
    """Text for roff: backslashes and hyphens escaped, no line begins with a
    control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + l if l[:1] in (".", "'") else l) for l in text.split("\n"))


def section_name(heading):
    return re.sub(r"\s*\(.*\)$", "", heading).upper()


def page(name, summary, synopsis, desc, sections, see_also):
    out = ['.TH %s 1 "" "ztrain" "ztrain manual"' % name.upper().replace("-", "\\-"),
           ".SH NAME", "%s \\- %s" % (esc(name), esc(summary)), ".SH SYNOPSIS", ".nf"]
    out += [esc(l) for l in synopsis]
    out += [".fi", ".SH DESCRIPTION"]
    for p in desc:
        out += [esc(p), ".PP"]
    if out[-1] == ".PP":
        out.pop()
    for heading, body in sections:
        out += [".SH " + esc(section_name(heading)), ".nf"] + [esc(l) if l.strip() else "" for l in body] + [".fi"]
    out += [".SH SEE ALSO", ", ".join("\\fB%s\\fR(1)" % esc(s) for s in see_also)]
    return "\n".join(out) + "\n"


def first_sentence(paragraph):
    """A page's one-line summary: the description's first sentence, cut
    before its first parenthesis or comma when it is long."""
    s = re.split(r"(?<=[.:;])\s", paragraph, maxsplit=1)[0].rstrip(".:;")
    if len(s) > 70:
        s = re.sub(r" \([^)]*\)", "", s)
    if len(s) > 100 and ", " in s[20:100]:
        s = s[:s.rindex(", ", 20, 100)]
    first = s.split(" ", 1)[0]
    return s[0].lower() + s[1:] if first[:1].isupper() and first[1:] == first[1:].lower() else s


def entries(body):
    """The entries of an option list: [(names, lines)], an entry starting at
    a line indented two spaces whose text starts with '-'."""
    out = []
    for line in body:
        if re.match(r"^  -", line):
            head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            out.append((set(re.findall(r"--?[a-zA-Z][\w-]*", head)), [line]))
        elif out:
            out[-1][1].append(line)
    return out


def command_pages(text):
    """ztrain COMMAND's pages: {command: (synopsis, description, sections)}."""
    _, _, sections = parse(text)
    by = dict(sections)
    synopsis, cmds = {}, {}
    for line in by["Synopsis"]:
        m = re.match(r"^  ztrain ([a-z]+)\b", line)
        if m:
            cur = m.group(1)
            synopsis.setdefault(cur, []).append(line[2:])
        elif line.startswith("   ") and synopsis:
            synopsis[cur].append(line[2:])
    for line in by["Commands"]:
        m = re.match(r"^  ([a-z]+)\s+(.*)$", line)
        if m:
            cur = m.group(1)
            cmds[cur] = [m.group(2)]
        elif line.strip():
            cmds[cur].append(line.strip())
    pages = {}
    for cmd, syn in synopsis.items():
        named = set(re.findall(r"--?[a-zA-Z][\w-]*", " ".join(syn))) | {"--help"}
        opts = [l for names, ls in entries(by["Options"]) if names & named for l in ls]
        sections = [("Options", opts)]
        if "[overrides]" in " ".join(syn):
            sections.append(("Overrides (win over the file)", by["Overrides (win over the file)"]))
        if cmd == "run":
            sections.append(("Environment", by["Environment (knobs that apply here)"]))
        text = " ".join(cmds[cmd])
        pages[cmd] = (syn, [text[:1].upper() + text[1:]], sections)
    return pages


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    bin_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    written = {}
    top = help_text(bin_dir, "ztrain")
    usage, desc, sections = parse(top)
    cmds = command_pages(top)
    synopsis = next(body for h, body in sections if h == "Synopsis")
    written["ztrain"] = page("ztrain", first_sentence(desc[0]), [l[2:] for l in synopsis], desc,
                             [s for s in sections if s[0] != "Synopsis"],
                             ["ztrain-" + c for c in cmds] + BINARIES)
    for cmd, (syn, d, secs) in cmds.items():
        written["ztrain-" + cmd] = page("ztrain-" + cmd, first_sentence(d[0]), syn, d, secs, ["ztrain"])
    for b in BINARIES:
        usage, desc, sections = parse(help_text(bin_dir, b))
        written[b] = page(b, first_sentence(desc[0]) if desc else b, usage, desc, sections, ["ztrain"])
    for name, text in written.items():
        with open(os.path.join(out_dir, name + ".1"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
