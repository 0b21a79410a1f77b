"""The package as a user gets it: ``pip wheel --no-build-isolation`` builds it offline with the
system's setuptools (no index is consulted), the wheel carries ``py.typed`` and the ``pytest11`` entry
point, and pytest loads the fixtures from the installed wheel by itself. The sources stay Python 3.9
syntax and import nothing outside the standard library."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Set

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
SOURCES = sorted((PACKAGE / "src" / "ephemail").glob("*.py"))


def _missing(*modules: str) -> str:
    return ", ".join(m for m in modules if importlib.util.find_spec(m) is None)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = _missing("pip", "setuptools", "wheel")
    if missing:
        pytest.skip(f"building the wheel needs {missing} (Debian: python3-pip python3-setuptools python3-wheel)")
    tmp = tmp_path_factory.mktemp("wheel")
    # a copy, so that the build's build/ and *.egg-info stay out of the repository
    source = tmp / "python"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info", ".pytest_cache"))
    out = tmp / "dist"
    env = {"PATH": "/usr/bin:/bin", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1", "HOME": str(tmp)}
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", str(source), "-w", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"pip wheel failed:\n{run.stdout}\n{run.stderr}"
    (built,) = out.glob("ephemail-*.whl")
    return built


def test_the_wheel_builds_offline_with_py_typed_and_the_pytest_entry_point(wheel: Path) -> None:
    assert wheel.name == "ephemail-0.2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert {"ephemail/__init__.py", "ephemail/client.py", "ephemail/models.py", "ephemail/errors.py", "ephemail/pytest_plugin.py", "ephemail/py.typed"} <= names
        assert not any(n.startswith("tests/") for n in names)
        entry_points = z.read("ephemail-0.2.0.dist-info/entry_points.txt").decode()
        metadata = z.read("ephemail-0.2.0.dist-info/METADATA").decode()
    assert "[pytest11]\nephemail.pytest_plugin = ephemail.pytest_plugin" in entry_points
    assert "Requires-Python: >=3.9" in metadata
    assert not [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line], "no dependencies"
    assert "## pytest" in metadata, "the README is the long description"


def test_pytest_loads_the_fixtures_from_the_installed_wheel(wheel: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, service: Any) -> None:
    site = pytester.path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)  # what pip install does for a pure-Python wheel
    pytester.makepyfile(
        test_installed="""
        import ephemail

        def test_fixture(ephemail_inbox):
            assert ephemail.__file__.startswith(%r)
            assert ephemail_inbox.address.endswith("@ephemail.test")
        """
        % str(site)
    )
    # the wheel first (no conftest names the plugin), then whatever this run has (pytest itself)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("EPHEMAIL_URL", service.http)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=1)
    # and naming it again in a conftest (as for an uninstalled copy) does not load it twice
    pytester.makeconftest('pytest_plugins = ["ephemail.pytest_plugin"]')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("source", SOURCES, ids=[p.name for p in SOURCES])
def test_python_3_9_syntax_and_the_standard_library_only(source: Path) -> None:
    tree = ast.parse(source.read_text(encoding="utf-8"), str(source), feature_version=(3, 9))
    imported: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    stdlib = getattr(sys, "stdlib_module_names", None)  # Python 3.10+
    if stdlib is None:
        return
    allowed = set(stdlib) | {"pytest"} if source.name == "pytest_plugin.py" else set(stdlib)
    assert imported <= allowed, f"{source.name} imports {sorted(imported - allowed)}"
