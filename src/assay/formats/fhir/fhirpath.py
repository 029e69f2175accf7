"""FHIRPath through fhirpathpy: strict compile, cached, errors translated once.

fhirpathpy's parser lets ANTLR recover silently from syntax errors (`Patient.name.where(`
compiles) and reports unknown functions only when they run. `compile_fhirpath` parses with a
listener that raises, checks every function name and arity against fhirpathpy's invocation table,
and caches the compiled expression, so a bad expression is a 422 when an assertion is created
(docs/assertions.md) and each expression is compiled once per process.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from antlr4 import CommonTokenStream, InputStream  # type: ignore[import-untyped]
from antlr4.error.ErrorListener import ErrorListener  # type: ignore[import-untyped]
from antlr4.tree.Tree import ParseTreeWalker  # type: ignore[import-untyped]
from fhirpathpy import apply_parsed_path
from fhirpathpy.engine import base_invocation_registry
from fhirpathpy.engine.nodes import ResourceNode
from fhirpathpy.engine.util import set_paths
from fhirpathpy.models import models
from fhirpathpy.parser.ASTPathListener import ASTPathListener
from fhirpathpy.parser.generated.FHIRPathLexer import FHIRPathLexer
from fhirpathpy.parser.generated.FHIRPathParser import FHIRPathParser

from assay.formats.fhir.errors import FhirPathError

__all__ = ["CompiledFhirPath", "compile_fhirpath", "evaluate_fhirpath", "locate_fhirpath"]

CompiledFhirPath = Callable[[Any], list[Any]]

_R4 = models["r4"]


class _Raising(ErrorListener):  # type: ignore[misc]
    def syntaxError(self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any) -> None:
        short = msg.split(" expecting ", 1)[0]
        raise FhirPathError(f"FHIRPath syntax error at column {column + 1}: {short}")


def _parse(expression: str) -> dict[str, Any]:
    lexer = FHIRPathLexer(InputStream(expression))
    lexer.removeErrorListeners()
    lexer.addErrorListener(_Raising())
    parser = FHIRPathParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser.addErrorListener(_Raising())
    tree = parser.expression()
    if parser.getCurrentToken().type != FHIRPathParser.EOF:
        token = parser.getCurrentToken()
        raise FhirPathError(f"FHIRPath syntax error at column {token.column + 1}: unexpected {token.text!r}")
    listener = ASTPathListener()
    ParseTreeWalker().walk(listener, tree)
    return listener.parentStack[0]  # type: ignore[no-any-return]


def _functions(node: dict[str, Any]) -> Iterator[tuple[str, int]]:
    if node.get("type") == "Functn":
        children = node.get("children", [])
        name = children[0].get("text", "") if children else ""
        params = children[1].get("children", []) if len(children) > 1 else []
        yield name, len(params)
    for child in node.get("children", []):
        if isinstance(child, dict):
            yield from _functions(child)


def _check_functions(ast: dict[str, Any]) -> None:
    for name, arity in _functions(ast):
        invocation: dict[str, Any] | None = base_invocation_registry.get(name)  # type: ignore[assignment]
        if invocation is None:
            raise FhirPathError(f"unknown FHIRPath function {name}()")
        if "variadic" in invocation:
            continue
        allowed = set(invocation.get("arity", {})) if "arity" in invocation else {0}
        if arity not in allowed:
            expected = " or ".join(str(n) for n in sorted(allowed)) or "0"
            raise FhirPathError(f"FHIRPath function {name}() takes {expected} argument(s), got {arity}")


_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'")
_LONG_NUMBER = re.compile(r"\d{31,}")


@lru_cache(maxsize=1024)
def _checked_ast(expression: str) -> dict[str, Any]:
    if not expression.strip():
        raise FhirPathError("empty FHIRPath expression")
    if _LONG_NUMBER.search(_STRING_LITERAL.sub("''", expression)):
        # Python refuses to print ints past 4,300 digits, so such a literal would only fail later,
        # when its result is written as evidence; no FHIR value needs more than 30 digits.
        raise FhirPathError("FHIRPath number literal longer than 30 digits")
    try:
        ast = _parse(expression)
    except FhirPathError:
        raise
    except Exception as exc:  # ANTLR and the AST builder raise assorted errors on bad input
        raise FhirPathError(f"FHIRPath syntax error: {exc}") from None
    _check_functions(ast)
    return ast


@lru_cache(maxsize=1024)
def compile_fhirpath(expression: str) -> CompiledFhirPath:
    """Compile once (cached); raise `FhirPathError` for a syntax error or an unknown function."""
    compiled = set_paths(apply_parsed_path, parsedPath=_checked_ast(expression), model=_R4)

    def run(resource: Any) -> list[Any]:
        try:
            result = compiled(resource)
        except RecursionError:
            raise FhirPathError("FHIRPath expression is too deeply nested") from None
        except Exception as exc:  # fhirpathpy raises bare Exception at run time
            raise FhirPathError(f"FHIRPath evaluation failed: {exc}") from None
        return result if isinstance(result, list) else [result]

    return run


def locate_fhirpath(expression: str, resource: dict[str, Any]) -> list[str | None]:
    """Where each item `expression` selects lives in `resource`: its concrete path from the root
    (`Patient.name[0].given[1]`; the resource itself is its type, `Patient`; a choice element is
    named without its type suffix, `Observation.value`), or None for an item that is no element
    of it (a literal, a computed value). What FHIRPath Patch needs to change the selected nodes.

    fhirpathpy's raw results are its `ResourceNode`s, which carry that path (`propName`)."""
    ast = _checked_ast(expression)
    try:
        found = apply_parsed_path(resource, parsedPath=ast, model=_R4, options={"returnRawData": True})
    except RecursionError:
        raise FhirPathError("FHIRPath expression is too deeply nested") from None
    except Exception as exc:  # fhirpathpy raises bare Exception at run time
        raise FhirPathError(f"FHIRPath evaluation failed: {exc}") from None
    located: list[str | None] = []
    for item in found if isinstance(found, list) else [found]:
        if isinstance(item, ResourceNode) and item.propName:
            located.append(item.propName)
        elif isinstance(item, ResourceNode) and item.data is resource:
            located.append(str(resource.get("resourceType")))
        else:
            located.append(None)
    return located


def evaluate_fhirpath(expression: str, resource: Any) -> list[Any]:
    """Evaluate `expression` on `resource`; raise `FhirPathError` on any failure."""
    return compile_fhirpath(expression)(resource)
