"""What the code digests need from one Python file, parsed once and kept by its content.

Per file: the modules it imports (the import closure's edges), the architectures it builds by a literal
name (`build_model("attn_only", ...)`), and the sha256 of its code without docstrings, comments, layout
and messages (`parse`). Parsing the ~140 project files takes ~1 s, and the params_check stage, every
Snakemake start and every stage's exit check need them, so they are kept under `.code-facts/` in the
checkout (EMERGENCE_CODE_FACTS names another folder), one JSON file per key. The key is the sha256 of the
file's bytes, this Python's version and this module's own source: the facts are a pure function of the
three, so an edit to any of them is a new key, never a stale value.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

FOLDER = ".code-facts"  # git-ignored; in no stage's deps or outs
ENV = "EMERGENCE_CODE_FACTS"
MESSAGE_CALLS = {"print", "warn", "warning", "info", "debug", "error", "exception", "critical"}
MESSAGE_KEYWORDS = {"help", "description", "epilog", "desc", "metavar"}


@dataclass(frozen=True)
class Facts:
    imports: tuple[tuple[int, str, tuple[str, ...]], ...]  # (level, module, names) of every import, lazy ones too
    archs: frozenset[str]  # architectures built by a literal name
    digest: str  # sha256 of the normalized code


def facts(path: Path, root: Path) -> Facts:
    """The facts of `path`, a file of the checkout at `root`."""
    stat = path.stat()
    return _kept(path, stat.st_mtime_ns, stat.st_size, Path(os.environ.get(ENV) or root / FOLDER))


@cache  # one process asks for the same unchanged file many times (each stage's closure walks core/)
def _kept(path: Path, mtime_ns: int, size: int, folder: Path) -> Facts:
    data = path.read_bytes()
    entry = folder / f"{hashlib.sha256(_salt() + data).hexdigest()}.json"
    try:
        kept = json.loads(entry.read_text(encoding="utf-8"))
        imports = tuple((level, base, tuple(names)) for level, base, names in kept["imports"])
        return Facts(imports, frozenset(kept["archs"]), kept["digest"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not kept yet, or unreadable: computed again and rewritten
    found = parse(data.decode("utf-8"), str(path))
    out = None
    try:  # written whole (a temporary file renamed), so two stages at once never read half an entry
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False, encoding="utf-8") as out:
            json.dump({"imports": found.imports, "archs": sorted(found.archs), "digest": found.digest}, out)
        os.replace(out.name, entry)
    except OSError:  # a read-only checkout or a full disk: the facts still hold, they are only not kept
        if out is not None:
            Path(out.name).unlink(missing_ok=True)
    return found


@cache
def _salt() -> bytes:
    return f"{sys.version_info[0]}.{sys.version_info[1]}\n".encode() + Path(__file__).read_bytes() + b"\0"


def parse(text: str, where: str) -> Facts:
    """The facts of one file's source (`where` names it in a syntax error)."""
    tree = ast.parse(text, where)
    imports: list[tuple[int, str, tuple[str, ...]]] = []
    archs: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [(0, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports.append((node.level, node.module or "", tuple(alias.name for alias in node.names)))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "build_model"
            and node.args
            and _is_text(node.args[0])
        ):
            archs.add(node.args[0].value)
    digest = hashlib.sha256(_canonical(_Messages().visit(tree)).encode()).hexdigest()  # last: it edits the tree
    return Facts(tuple(imports), frozenset(archs), digest)


def imported_modules(found: Facts, module: str, package: bool) -> set[str]:
    """Every module the imports of `module` (a package's __init__ when `package`) name: `from pkg import x`
    names both pkg and pkg.x, which may be a module."""
    where = module if package else module.rpartition(".")[0]
    names: set[str] = set()
    for level, base, aliases in found.imports:
        if level:  # relative: from .x import y
            parent = where.split(".")[: len(where.split(".")) - level + 1]
            base = ".".join(filter(None, [*parent, base]))
        names.add(base)
        names.update(f"{base}.{alias}" for alias in aliases)
    return names


# ---- one file's code, messages left out -----------------------------------------------------------


class _Messages(ast.NodeTransformer):
    """Blanks the text of messages and drops docstrings; what is left decides the bytes."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
        return super().generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> ast.AST:
        return _blank(node)

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        node.msg = _blank(node.msg) if node.msg is not None else None
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        # print(..., file=handle) may write an artifact; to stderr (or stdout) it is a message
        to_artifact = any(k.arg == "file" and ast.unparse(k.value) != "sys.stderr" for k in node.keywords)
        if name in MESSAGE_CALLS and not to_artifact:
            node.args = [_blank(a) for a in node.args]
        for k in node.keywords:
            if k.arg in MESSAGE_KEYWORDS:
                k.value = _blank(k.value)
        return self.generic_visit(node)


def _blank(node: ast.AST) -> ast.AST:
    """Every string literal and f-string under `node` made empty (what the message says, not that it is)."""
    for child in ast.walk(node):
        for name, value in ast.iter_fields(child):
            if isinstance(value, ast.JoinedStr) or _is_text(value):
                setattr(child, name, ast.Constant(""))
            elif isinstance(value, list):
                setattr(
                    child, name, [ast.Constant("") if isinstance(v, ast.JoinedStr) or _is_text(v) else v for v in value]
                )
    return ast.Constant("") if isinstance(node, ast.JoinedStr) or _is_text(node) else node


def _is_text(node: Any) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _canonical(node: Any) -> str:
    """The tree as text, fields that are None or empty left out: the same across Python versions that add
    fields with empty defaults (3.12's type_params), unlike ast.dump."""
    if isinstance(node, ast.AST):
        fields = [(n, _canonical(v)) for n, v in ast.iter_fields(node) if v is not None and v != []]
        return f"{type(node).__name__}(" + ",".join(f"{n}={v}" for n, v in fields) + ")"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(v) for v in node) + "]"
    return repr(node)
