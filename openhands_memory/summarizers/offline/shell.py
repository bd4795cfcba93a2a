"""Files named in shell commands.

Only commands whose file use is plain are read, and only arguments that look like paths are
kept. Globs, variables and options are skipped. Paths are kept as written; they are not
resolved against ``cd``. So a guess is left out rather than reported wrongly.
"""

from __future__ import annotations

import re
import shlex

_READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "wc", "bat"})
_WRITERS = frozenset({"touch", "rm", "mv", "tee"})
_PREFIXES = frozenset({"sudo", "env", "time", "nohup", "command", "exec"})
_PATHLIKE = re.compile(r"^[\w./~@+-]+$")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "|&", ";;"})
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})


def _pathlike(token: str) -> bool:
    return (
        bool(_PATHLIKE.match(token))
        and not token.startswith("-")
        and any(c.isalpha() for c in token)
        and token != "/dev/null"
    )


def _segments(line: str) -> tuple[list[list[str]], bool]:
    """Split one command line into simple commands. Returns (segments, heredoc_seen)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    try:
        for tok in lexer:
            if tok.startswith("<<"):
                return segments, True  # the rest is a heredoc body, not commands
            if tok in _SEPARATORS:
                segments.append([])
            else:
                segments[-1].append(tok)
    except ValueError:  # unbalanced quotes: keep what was read so far
        pass
    return segments, False


def _segment_files(tokens: list[str], read: list[str], changed: list[str]) -> None:
    words: list[str] = []
    i = 0
    while i < len(tokens):  # take redirections out first; they apply to any command
        tok = tokens[i]
        if tok in _WRITE_REDIRECTS or tok == "<":
            if i + 1 < len(tokens) and _pathlike(tokens[i + 1]):
                (changed if tok != "<" else read).append(tokens[i + 1])
            i += 2
            continue
        if tok.startswith((">", "<")):  # >&, <> and other fd plumbing
            i += 2
            continue
        words.append(tok)
        i += 1
    while words and ("=" in words[0] and not words[0].startswith("=") or words[0] in _PREFIXES):
        words = words[1:]
    if not words:
        return
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if re.fullmatch(r"python[\d.]*", name):
        if len(args) >= 2 and args[0] == "-m" and args[1] == "pytest":
            name, args = "pytest", args[2:]
        else:
            for a in args:
                if a in ("-c", "-m"):
                    return  # inline code or a module, not a file
                if a.endswith(".py") and _pathlike(a):
                    read.append(a)
                    return
            return
    operands = _operands(args, _VALUED_OPTIONS.get(name, frozenset()))
    plain = [a for a in operands if _pathlike(a)]
    if name == "pytest":
        # Test ids such as tests/test_a.py::test_b name their file before the "::".
        files = [a.split("::", 1)[0] for a in operands]
        read.extend(f for f in files if ("/" in f or f.endswith(".py")) and _pathlike(f))
    elif name in _READERS:
        read.extend(plain)
    elif name in _WRITERS:
        changed.extend(plain)
    elif name == "cp":
        if len(plain) >= 2:
            read.extend(plain[:-1])
            changed.append(plain[-1])
    elif name == "sed":
        in_place = any(a == "--in-place" or (a.startswith("-i") and not a.startswith("--")) for a in args)
        if not any(a in _VALUED_OPTIONS["sed"] for a in args):
            plain = [a for a in operands[1:] if _pathlike(a)]  # the first operand is the script
        (changed if in_place else read).extend(plain)


# Options whose value is the next word, so that the value is not taken for a file name.
_VALUED_OPTIONS: dict[str, frozenset[str]] = {
    "head": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "tail": frozenset({"-n", "-c", "--lines", "--bytes"}),
    "sed": frozenset({"-e", "-f", "--expression", "--file"}),
    "pytest": frozenset({"-k", "-m", "-p", "-c", "-o", "--rootdir", "--maxfail", "--tb"}),
}


def _operands(args: list[str], valued: frozenset[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in valued:
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out


def shell_files(command: str) -> tuple[list[str], list[str]]:
    """(read, changed) paths that a shell command plainly reads or writes. See the note above."""
    read: list[str] = []
    changed: list[str] = []
    for line in command.splitlines():
        segments, heredoc = _segments(line)
        for seg in segments:
            _segment_files(seg, read, changed)
        if heredoc:
            break
    return read, changed
