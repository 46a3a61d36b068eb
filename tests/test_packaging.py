"""The wheel and the sdist carry the LICENSE, the classifiers and the API table (built as a new user would)."""
from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds environments or wheels, or downloads: handed out first under xdist

ROOT = Path(__file__).resolve().parents[1]


def _build(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0 and ("Could not find a version" in proc.stderr or "No matching distribution"
                                 in proc.stderr or "NewConnectionError" in proc.stderr):
        pytest.skip("no package index for the build backend: " + proc.stderr.strip().splitlines()[-1][:200])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def test_license_file_is_apache_2():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text


def test_wheel_has_license_and_classifiers(tmp_path):
    _build(["wheel", "--no-deps", "-q", ".", "-w", str(tmp_path)], tmp_path)
    (whl,) = tmp_path.glob("tfpar_lint-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        lic = [n for n in names if n.endswith("/LICENSE") and ".dist-info/" in n]
        assert lic and "Apache License" in z.read(lic[0]).decode()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        assert any(n.startswith("tfpar_lint/rule_pages/TFP900.md") for n in names)
        assert "tfpar_lint/data/api_table.json.gz" in names  # the API table tfapi reads
    assert "Classifier: License :: OSI Approved :: Apache Software License" in meta
    assert "Classifier: Programming Language :: Python :: 3" in meta
    assert "License-File: LICENSE" in meta


def test_sdist_has_license(tmp_path):
    # hatchling's own sdist builder, installed into a throwaway folder (pip has no sdist command)
    _build(["install", "-q", "--target", str(tmp_path / "backend"), "hatchling>=1.21"], tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from hatchling.build import build_sdist; "
            "print(build_sdist(sys.argv[2]))")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "backend"), str(tmp_path / "dist")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (sdist,) = (tmp_path / "dist").glob("tfpar_lint-*.tar.gz")
    with tarfile.open(sdist) as t:
        names = t.getnames()
    assert any(n.endswith("/LICENSE") for n in names)
    assert any(n.endswith("/rules/TFP101.md") for n in names) and any(n.endswith("/src/tfpar_lint/fix.py") for n in names)
