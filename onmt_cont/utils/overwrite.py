"""Guards against a script writing over what it reads: an output that is one of the inputs, or two
outputs that are one file, is refused before anything is read or written."""

import os
import re
import stat

from onmt_cont.utils.errors import UserError


class Prefix:
    """An output or input prefix (preprocess.py -save_data, train.py -save_model and -data): the
    files are PREFIX + a suffix that ``pattern`` (a regular expression) matches in full."""

    def __init__(self, path, pattern):
        self.path, self.pattern = path, re.compile(pattern)

    def matches(self, path):
        """Is ``path`` one of this prefix's files (by name, after resolving both)?"""
        directory, base = os.path.split(_resolved(self.path))
        other_dir, other = os.path.split(_resolved(path))
        return (
            other_dir == directory and other.startswith(base) and self.pattern.fullmatch(other[len(base) :]) is not None
        )

    def existing(self):
        """This prefix's files that exist now."""
        directory, base = os.path.split(os.path.abspath(self.path))
        try:
            names = os.listdir(directory or ".")
        except OSError:
            return []
        return [
            os.path.join(directory, n)
            for n in sorted(names)
            if n.startswith(base) and self.pattern.fullmatch(n[len(base) :])
        ]


def _resolved(path):
    return os.path.realpath(os.path.abspath(path))


def _identity(path):
    """(st_dev, st_ino) of an existing regular file or folder, else None (a pipe, /dev/stdin, none)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else None


def _entries(named):
    """{flag: path | [paths] | Prefix | None} -> [(flag, path or Prefix)], "-" (standard input) left out."""
    out = []
    for flag, value in named.items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v is not None and v != "-" and v != "":
                out.append((flag, v))
    return out


def refuse_output_over_inputs(outputs, inputs):
    """Raise a :class:`UserError` when a file a script would write is one of the files it reads,
    or two of its outputs are one file: a careless argument order must not replace a checkpoint
    or a corpus with text. Call it before anything is read or written.

    ``outputs`` and ``inputs`` map a flag (``"-output"``) to a path, a list of paths, a
    :class:`Prefix` or None. Paths are compared resolved (symbolic links followed) and by
    (st_dev, st_ino), so a hard link is caught too; a prefix clashes with a path that is the
    prefix itself or one of its files (by name, or an existing one by inode)."""
    outs = _entries(outputs)
    ins = [(flag, v, "reads") for flag, v in _entries(inputs)]
    for i, (oflag, out) in enumerate(outs):
        for iflag, other, role in ins + [(f, v, "writes too") for f, v in outs[i + 1 :]]:
            if _clash(out, other):
                if isinstance(out, Prefix):
                    what = f"{oflag} {out.path}: its files would replace {iflag} {_shown(other)}"
                elif isinstance(other, Prefix):
                    what = f"{oflag} {out} is one of the files of {iflag} {other.path}"
                else:
                    what = f"{oflag} {out} is {iflag} {other}"
                raise UserError(f"{what}, which this run {role}: give another {oflag} (nothing was written)")


def _shown(x):
    return x.path if isinstance(x, Prefix) else x


def _clash(a, b):
    """Do output ``a`` and ``b`` (an input, or another output) name one file?"""
    a_files = [a.path, *a.existing()] if isinstance(a, Prefix) else [a]
    b_files = [b.path, *b.existing()] if isinstance(b, Prefix) else [b]
    if any(_same(x, y) for x in a_files for y in b_files):
        return True
    return any(p.matches(x) for p, others in ((a, b_files), (b, a_files)) if isinstance(p, Prefix) for x in others)


def _same(a, b):
    if _resolved(a) == _resolved(b):
        return True
    ia = _identity(a)
    return ia is not None and ia == _identity(b)
