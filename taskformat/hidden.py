"""Hidden workloads: a task declares how they are drawn; a deployment's secret draws them.

A task package never holds a hidden workload's parameters. Its task.toml
declares, per mode, the rules each hidden workload's parameters are drawn by
(`[[hidden.cuda]]`, `[[hidden.interpret]]`: ranges, awkward sizes, choices;
docs/task-format.md). `hidden_draw` turns a declaration, a deployment's secret
and the task's slug into concrete workloads, the same ones every time for the
same three, and different ones for another secret. Only the evaluator's
trusted parent draws: the sandboxed child is told one workload's parameters
when it runs it, and never sees the secret.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import hmac
import math
from collections.abc import Mapping
from typing import Any

from .formula import FormulaError, evaluate_formula
from .spec import (
    HiddenDeclaration,
    HiddenDraw,
    Mode,
    ParamRule,
    TaskSpec,
    WorkloadRole,
    WorkloadSpec,
)

# The environment variable a deployment's secret travels in (docs/settings.md).
SECRET_ENV = "D2K_HIDDEN_SEED"
RANGE_KEYS = frozenset({"min", "max", "multiple_of", "not_multiple_of", "odd", "prime"})
DRAW_KEYS = frozenset({"params", "count"})
# Tries at a value that satisfies a range's conditions before the declaration is
# judged impossible: a prime below 2**31 is one number in 22, so a satisfiable
# range never gets near it.
MAX_TRIES = 2000
# Secrets the loader draws a declaration with, so a declaration that cannot be
# drawn (an empty range, no prime in it) fails when the package is read.
CHECK_SECRETS = ("check-1", "check-2", "check-3", "check-4")
MAX_WORKLOADS_PER_MODE = 32


class HiddenDeclarationError(ValueError):
    """A hidden-workload declaration that is malformed or cannot be drawn."""


# --- reading a declaration ---------------------------------------------------


def hidden_declaration_parse(raw: Any) -> HiddenDeclaration:
    """The declaration of task.toml's `hidden` table (or a stored copy of it).

    Raises HiddenDeclarationError naming the mode, the draw and the parameter at fault.
    """
    if raw in (None, {}):
        return HiddenDeclaration()
    if isinstance(raw, list):
        raise HiddenDeclarationError(
            "concrete hidden workloads (a list of `hidden` tables with params) are not part "
            "of a package: "
            "declare how they are drawn in [[hidden.cuda]] and [[hidden.interpret]] "
            "(docs/task-format.md)"
        )
    if not isinstance(raw, Mapping):
        raise HiddenDeclarationError(f"hidden must be a table, not {type(raw).__name__}")
    unknown = set(raw) - {str(m) for m in Mode}
    if unknown:
        raise HiddenDeclarationError(
            f"hidden has unknown keys {sorted(unknown)}: only 'cuda' and 'interpret'"
        )
    declaration = HiddenDeclaration(
        cuda=_draws(raw.get("cuda", []), Mode.CUDA),
        interpret=_draws(raw.get("interpret", []), Mode.INTERPRET),
    )
    for secret in CHECK_SECRETS:
        hidden_draw(declaration, secret=secret, slug="check")
    return declaration


def hidden_declaration_dict(declaration: HiddenDeclaration) -> dict[str, Any]:
    """The declaration in task.toml's form, as stored and hashed ({} when there is none)."""
    out: dict[str, Any] = {}
    for mode in Mode:
        draws = declaration.draws_for(mode)
        if draws:
            out[str(mode)] = [
                {"count": d.count, "params": {r.name: _rule_dict(r) for r in d.params}}
                for d in draws
            ]
    return out


def _draws(raw: Any, mode: Mode) -> tuple[HiddenDraw, ...]:
    if not isinstance(raw, list):
        raise HiddenDeclarationError(f"hidden.{mode} must be a list of tables ([[hidden.{mode}]])")
    draws = tuple(_draw(entry, f"hidden.{mode}[{i}]") for i, entry in enumerate(raw))
    total = sum(d.count for d in draws)
    if total > MAX_WORKLOADS_PER_MODE:
        raise HiddenDeclarationError(
            f"hidden.{mode} draws {total} workloads; at most {MAX_WORKLOADS_PER_MODE}"
        )
    return draws


def _draw(raw: Any, where: str) -> HiddenDraw:
    if not isinstance(raw, Mapping):
        raise HiddenDeclarationError(f"{where} must be a table")
    unknown = set(raw) - DRAW_KEYS
    if unknown:
        raise HiddenDeclarationError(f"{where} has unknown keys {sorted(unknown)}")
    count = raw.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise HiddenDeclarationError(f"{where}: count must be a positive integer, not {count!r}")
    params = raw.get("params")
    if not isinstance(params, Mapping) or not params:
        raise HiddenDeclarationError(f"{where} needs a params table")
    # By name: a declaration is the same whatever order its table's keys come in (a TOML
    # writer or a JSON database may not keep it).
    rules = tuple(
        sorted(
            (_rule(str(name), value, f"{where}.params.{name}") for name, value in params.items()),
            key=lambda rule: rule.name,
        )
    )
    _dependency_order(rules, where)
    return HiddenDraw(params=rules, count=count)


def _rule(name: str, raw: Any, where: str) -> ParamRule:
    if _is_scalar(raw):
        return ParamRule(name=name, value=raw)
    if not isinstance(raw, Mapping):
        raise HiddenDeclarationError(
            f"{where}: a parameter is a number, string or bool, {{ choice = [...] }} or "
            f"{{ min = ..., max = ... }}, not {raw!r}"
        )
    if "choice" in raw:
        choice = raw["choice"]
        if set(raw) != {"choice"}:
            raise HiddenDeclarationError(f"{where}: choice takes no other keys, got {sorted(raw)}")
        if not isinstance(choice, list) or not choice or not all(map(_is_scalar, choice)):
            raise HiddenDeclarationError(f"{where}: choice must be a non-empty list of values")
        return ParamRule(name=name, choice=tuple(choice))
    unknown = set(raw) - RANGE_KEYS
    if unknown:
        raise HiddenDeclarationError(
            f"{where}: unknown keys {sorted(unknown)} (a range takes {sorted(RANGE_KEYS)})"
        )
    if "min" not in raw or "max" not in raw:
        raise HiddenDeclarationError(f"{where}: a range needs both min and max")
    low, high, multiple_of = (
        _bound(raw.get(k), f"{where}.{k}") for k in ("min", "max", "multiple_of")
    )
    not_multiple_of = raw.get("not_multiple_of")
    if not_multiple_of is not None and (not _is_int(not_multiple_of) or not_multiple_of < 2):
        raise HiddenDeclarationError(f"{where}: not_multiple_of must be an integer of at least 2")
    flags = {k: raw.get(k, False) for k in ("odd", "prime")}
    for key, flag in flags.items():
        if not isinstance(flag, bool):
            raise HiddenDeclarationError(f"{where}: {key} must be true or false")
    return ParamRule(
        name=name,
        low=low,
        high=high,
        multiple_of=multiple_of,
        not_multiple_of=not_multiple_of,
        odd=flags["odd"],
        prime=flags["prime"],
    )


def _bound(raw: Any, where: str) -> int | str | None:
    if raw is None or _is_int(raw):
        return raw
    if isinstance(raw, str):
        try:
            ast.parse(raw, mode="eval")
        except SyntaxError as exc:
            raise HiddenDeclarationError(f"{where}: {raw!r} is not a formula") from exc
        return raw
    raise HiddenDeclarationError(f"{where} must be an integer or a formula, not {raw!r}")


def _rule_dict(rule: ParamRule) -> Any:
    if rule.choice:
        return {"choice": list(rule.choice)}
    if not rule.is_range:
        return rule.value
    out: dict[str, Any] = {"min": rule.low, "max": rule.high}
    if rule.multiple_of is not None:
        out["multiple_of"] = rule.multiple_of
    if rule.not_multiple_of is not None:
        out["not_multiple_of"] = rule.not_multiple_of
    for key in ("odd", "prime"):
        if getattr(rule, key):
            out[key] = True
    return out


def _is_scalar(value: Any) -> bool:
    return isinstance(value, bool | int | float | str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refs(rule: ParamRule) -> set[str]:
    """The parameters a range's formulas name."""
    names: set[str] = set()
    for bound in (rule.low, rule.high, rule.multiple_of):
        if isinstance(bound, str):
            tree = ast.parse(bound, mode="eval")
            calls = {
                n.func.id
                for n in ast.walk(tree)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            }
            names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - calls
    return names - {"esize"}


def _dependency_order(rules: tuple[ParamRule, ...], where: str) -> tuple[ParamRule, ...]:
    """The rules in an order where each range follows the parameters its formulas name.

    Ties go by name: the order of a table's keys (which a JSON database may not
    keep) never changes what is drawn.
    """
    by_name = {r.name: r for r in rules}
    pending = dict(sorted(by_name.items()))
    order: list[ParamRule] = []
    while pending:
        ready = [n for n, r in pending.items() if not (_refs(r) & set(pending))]
        if not ready:
            raise HiddenDeclarationError(
                f"{where}: the formulas of {sorted(pending)} name each other (a cycle)"
            )
        for name in ready:
            order.append(pending.pop(name))
    for rule in order:
        unknown = _refs(rule) - set(by_name)
        if unknown:
            raise HiddenDeclarationError(
                f"{where}.params.{rule.name}: its formulas name unknown parameters "
                f"{sorted(unknown)}"
            )
    return tuple(order)


# --- drawing -------------------------------------------------------------------


def hidden_draw(
    declaration: HiddenDeclaration, *, secret: str, slug: str
) -> tuple[WorkloadSpec, ...]:
    """The concrete hidden workloads of both modes: `hidden_N` (cuda, role untimed) and
    `check_hidden_N` (interpret, hidden check workloads), N counting from one.

    A pure function of its arguments. Raises HiddenDeclarationError if a draw cannot
    satisfy its rules.
    """
    if not secret:
        raise HiddenDeclarationError("drawing hidden workloads needs a secret")
    out: list[WorkloadSpec] = []
    for mode, role, prefix in (
        (Mode.CUDA, WorkloadRole.UNTIMED, "hidden"),
        (Mode.INTERPRET, WorkloadRole.CHECK, "check_hidden"),
    ):
        index = 0
        for d, draw in enumerate(declaration.draws_for(mode)):
            for _ in range(draw.count):
                index += 1
                where = f"hidden.{mode}[{d}]"
                stream = _Stream(secret, f"{slug}\0{mode}\0{index}")
                params = _draw_params(draw, stream, where)
                out.append(
                    WorkloadSpec(name=f"{prefix}_{index}", role=role, params=params, hidden=True)
                )
    return tuple(out)


def task_with_hidden(task: TaskSpec, *, secret: str) -> TaskSpec:
    """`task` with its hidden workloads drawn from `secret` after its public ones."""
    public = tuple(w for w in task.workloads if not w.hidden)
    drawn = hidden_draw(task.hidden, secret=secret, slug=task.slug)
    return dataclasses.replace(task, workloads=(*public, *drawn))


class _Stream:
    """Numbers from HMAC-SHA256 of the secret: the same secret and labels give the same ones."""

    def __init__(self, secret: str, label: str) -> None:
        self._key = secret.encode()
        self._label = label

    def below(self, n: int, what: str, attempt: int) -> int:
        message = f"{self._label}\0{what}\0{attempt}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return int.from_bytes(digest, "big") % n


def _draw_params(draw: HiddenDraw, stream: _Stream, where: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for rule in _dependency_order(draw.params, where):
        values[rule.name] = _draw_one(rule, values, stream, f"{where}.params.{rule.name}")
    return {r.name: values[r.name] for r in draw.params}


def _draw_one(rule: ParamRule, known: dict[str, Any], stream: _Stream, where: str) -> Any:
    if rule.choice:
        return rule.choice[stream.below(len(rule.choice), rule.name, 0)]
    if not rule.is_range:
        return rule.value
    low = math.ceil(_number(rule.low, known, where))
    high = math.floor(_number(rule.high, known, where))
    step = 1 if rule.multiple_of is None else round(_number(rule.multiple_of, known, where))
    if step < 1:
        raise HiddenDeclarationError(f"{where}: multiple_of is {step}, not a positive integer")
    first, last = -(-low // step), high // step
    if first > last:
        raise HiddenDeclarationError(f"{where}: no multiple of {step} between {low} and {high}")
    for attempt in range(MAX_TRIES):
        value = step * (first + stream.below(last - first + 1, rule.name, attempt))
        if _satisfies(rule, value):
            return value
    raise HiddenDeclarationError(
        f"{where}: no value between {low} and {high} satisfies {_rule_dict(rule)}"
    )


def _number(bound: int | str | None, known: Mapping[str, Any], where: str) -> float:
    try:
        value = evaluate_formula(bound if bound is not None else 0, known)
    except FormulaError as exc:
        raise HiddenDeclarationError(f"{where}: {exc}") from exc
    except (TypeError, ValueError, ArithmeticError) as exc:  # a string in arithmetic, 1 / 0
        raise HiddenDeclarationError(f"{where}: formula {bound!r} fails: {exc}") from exc
    if not math.isfinite(value):
        raise HiddenDeclarationError(f"{where}: formula {bound!r} is not a finite number")
    return value


def _satisfies(rule: ParamRule, value: int) -> bool:
    if rule.not_multiple_of is not None and value % rule.not_multiple_of == 0:
        return False
    if rule.odd and value % 2 == 0:
        return False
    return not rule.prime or _is_prime(value)


# Deterministic Miller-Rabin bases for every n below 3.3 * 10**24.
_WITNESSES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in _WITNESSES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _WITNESSES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True
