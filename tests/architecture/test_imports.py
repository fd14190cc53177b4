"""Imports follow the data flow: ingest -> bank -> grading -> API -> clients (docs/ARCHITECTURE.md).

Every import in the project's packages is read with `ast`, including imports inside functions
(an import hidden in a function to dodge a cycle is still a cycle), and checked against RULES.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "contracts", "grading_lab", "ingest", "worker")

CORE = ("app.config", "app.errors", "app.ids", "app.db", "app.models")
GRADING = ("app.grading",)
PLUMBING = tuple(
    f"app.serving.{m}"
    for m in (
        "accesslog", "admission", "aio", "batching", "cache", "coalesce", "encoders",
        "journal", "limits_mw", "logqueue", "memtrim", "writes",
    )
)
DOMAINS = (
    "app.bank", "app.answers", "app.learners", "app.quiz", "app.appeals", "app.ask",
    "app.grade_api", "app.keys", "app.chat", "app.demos", "app.slack", "app.web",
)
COMPOSITION = ("app.serving.runtime", "app.deps", "app.health", "app.main", "app.cli")
# The clients' HTTP entry modules: they take the runtime and hand their services what those need.
CLIENT_ENTRIES = ("app.chat.endpoints", "app.slack.routes")

# (who, may not import, why). A name covers the module and everything below it; "!name" in `who` leaves
# that module (and everything below it) out.
RULES: list[tuple[tuple[str, ...], tuple[str, ...], str]] = [
    (("contracts",), ("app", "ingest", "worker", "grading_lab"), "shared by the API and the worker; imports neither"),
    (("worker",), ("app", "ingest", "grading_lab"), "deployed on GPU hosts; reaches the API only over HTTP"),
    (("app",), ("worker", "grading_lab"), "the API reaches the worker over HTTP; offline work is never served"),
    (CORE, ("ingest", "grading_lab", *GRADING, *PLUMBING, *DOMAINS, *COMPOSITION), "the core imports nothing above it"),
    (("ingest",), ("grading_lab", *GRADING, *PLUMBING, *DOMAINS, *COMPOSITION), "documents -> rows; serves nothing"),
    (GRADING, ("grading_lab", *PLUMBING, *DOMAINS, *COMPOSITION), "the grading engine is pure domain code"),
    (PLUMBING, (*DOMAINS, *COMPOSITION), "serving plumbing knows no domain"),
    (("grading_lab",), (*PLUMBING, *COMPOSITION, "app.web", "app.chat", "app.slack"), "offline work needs no server"),
    # Between domains: bank < answers < learners < quiz < appeals, and the clients above them.
    (("app.bank",), tuple(d for d in DOMAINS if d not in ("app.bank", "app.keys")), "the bank is read by all"),
    (("app.learners",), ("app.quiz", "app.appeals", "app.chat", "app.slack"), "quiz and appeals build on learners"),
    (("app.quiz",), ("app.appeals", "app.chat", "app.slack", "app.web"), "appeals build on quiz attempts"),
    (("app.keys",), tuple(d for d in DOMAINS if d != "app.keys"), "who calls the API; below every route that checks"),
    (tuple(d for d in DOMAINS if d not in ("app.chat", "app.slack", "app.web")), ("app.chat", "app.slack", "app.web"),
     "clients sit on top of the domains"),
    # Routes may take the runtime; domain services receive what they need instead.
    (("app.grade_api.service", "app.answers", "app.quiz.service", "app.ask.service", "app.appeals.service",
      "app.learners.service", "app.keys.service", "app.bank.repository", "app.chat", "app.slack",
      *(f"!{m}" for m in CLIENT_ENTRIES)),
     ("app.serving.runtime", "app.deps"), "services receive what they need, not the runtime"),
]


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every absolute module name the file imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _covers(who: tuple[str, ...], module: str) -> bool:
    """Whether a rule's `who` names the module, and no "!name" in it leaves the module out."""
    left_out = tuple(w.removeprefix("!") for w in who if w.startswith("!"))
    return _under(module, tuple(w for w in who if not w.startswith("!"))) and not _under(module, left_out)


def violations(files: dict[str, set[str]]) -> list[str]:
    """`module -> imported name (why)` for every import a rule forbids; the CLI may import anything."""
    found = []
    for module, imported in sorted(files.items()):
        if _under(module, ("app.cli",)):
            continue  # the composition root: it starts the API, the worker and the offline commands
        for who, forbidden, why in RULES:
            if not _covers(who, module):
                continue
            found += [f"{module} -> {name} ({why})" for name in sorted(imported) if _under(name, forbidden)]
    return sorted(set(found))


def project_imports() -> dict[str, set[str]]:
    """Each project module and what it imports."""
    return {
        _module_of(path): _imports(path)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def test_imports_follow_the_data_flow() -> None:
    assert violations(project_imports()) == []


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("worker.api", "app.errors"),
        ("ingest.pipeline", "app.grading"),
        ("app.config", "ingest.embedder"),
        ("app.learners.progress", "app.quiz.scheduler"),
        ("app.quiz.endpoints", "app.appeals.service"),
        ("app.grade_api.service", "app.serving.runtime"),
        ("app.chat.service", "app.serving.runtime"),
        ("app.slack.listeners.common", "app.deps"),
        ("app.slack.bolt", "app.serving.runtime"),
        ("app.slack", "app.serving.runtime"),
        ("contracts.errors", "app.errors"),
        ("app.demos.client", "worker.errors"),
    ],
)
def test_a_forbidden_import_is_caught(module: str, imported: str) -> None:
    files = project_imports()
    files[module] = files.get(module, set()) | {imported}
    assert any(v.startswith(f"{module} -> {imported} ") for v in violations(files))


def test_the_command_line_may_import_anything() -> None:
    files = {"app.cli.main": {"worker.cli", "grading_lab.evaluation", "app.serving.runtime"}}
    assert violations(files) == []


def test_the_clients_http_entries_may_take_the_runtime() -> None:
    files = {"app.chat.endpoints": {"app.deps"}, "app.slack.routes": {"app.serving.runtime"}}
    assert violations(files) == []
