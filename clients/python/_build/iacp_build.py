"""A PEP 517 build backend for this package, in the standard library alone.

Why not setuptools: ``pip install ./clients/python`` then needs setuptools and wheel from
the package index (or installed, with --no-build-isolation), and a machine without the
index cannot install the package at all. This backend needs nothing: it builds a pure
Python wheel of ``iacp/`` (and an sdist, and an editable wheel for ``pip install -e``), with
the metadata of ``pyproject.toml``'s [project] table. It handles that table's string,
list-of-strings and inline-table values, which is all pyproject.toml uses.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "iacp"
# Files of the sdist besides the package: what builds it and what tests it.
SDIST_EXTRA = ["pyproject.toml", "README.md", "bench.py", "_build", "tests"]


def _project() -> Dict[str, Any]:
    """The [project] table of pyproject.toml."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        return _project_subset(text)
    return tomllib.loads(text)["project"]


def _project_subset(text: str) -> Dict[str, Any]:
    """Reads [project] for Python < 3.11: key = "string", key = [strings], key = {k = "v"}."""
    out: Dict[str, Any] = {}
    section = None
    for line in re.sub(r"\[\s*\n", "[", re.sub(r",\s*\n\s*", ", ", text)).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^\[([^\]]+)\]$", line)
        if m:
            section = m.group(1).strip()
            continue
        if section != "project" or "=" not in line:
            continue
        key, value = (s.strip() for s in line.split("=", 1))
        if value.startswith("["):
            out[key] = re.findall(r'"([^"]*)"', value)
        elif value.startswith("{"):
            out[key] = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', value))
        else:
            out[key] = value.strip('"')
    return out


def _name_version() -> Tuple[str, str]:
    p = _project()
    return p["name"], p["version"]


def _dist(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"]]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append("License: %s" % lic["text"])
    elif isinstance(lic, str):
        lines.append("License: %s" % lic)
    for kw in p.get("keywords", []):
        lines.append("Keywords: %s" % kw)
    for c in p.get("classifiers", []):
        lines.append("Classifier: %s" % c)
    for dep in p.get("dependencies", []):
        lines.append("Requires-Dist: %s" % dep)
    body = ""
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _package_files() -> List[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".py", ".typed")):
                out.append(os.path.relpath(os.path.join(dirpath, fn), ROOT))
    return out


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes]]) -> str:
    name, version = _name_version()
    dist = _dist(name)
    info = "%s-%s.dist-info" % (dist, version)
    filename = "%s-%s-py3-none-any.whl" % (dist, version)
    files = files + [
        ("%s/METADATA" % info, _metadata().encode("utf-8")),
        ("%s/WHEEL" % info, b"Wheel-Version: 1.0\nGenerator: iacp_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = [_record_line(p, d) for p, d in files] + ["%s/RECORD,," % info]
    files.append(("%s/RECORD" % info, ("\n".join(record) + "\n").encode("utf-8")))
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return filename


def _read(rel: str) -> bytes:
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


# --- PEP 517 / PEP 660 hooks ---


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    """The wheel of the package: iacp/*.py and py.typed."""
    return _write_wheel(wheel_directory, [(p.replace(os.sep, "/"), _read(p)) for p in _package_files()])


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """An editable wheel: a .pth file that puts this directory on sys.path."""
    name, _ = _name_version()
    return _write_wheel(wheel_directory, [("_%s_editable.pth" % _dist(name), (ROOT + "\n").encode("utf-8"))])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    """The source distribution: the package, its tests, benchmark and build files."""
    name, version = _name_version()
    base = "%s-%s" % (_dist(name), version)
    paths = list(_package_files())
    for extra in SDIST_EXTRA:
        full = os.path.join(ROOT, extra)
        if os.path.isdir(full):
            for dirpath, dirnames, filenames in os.walk(full):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                paths += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in sorted(filenames)]
        elif os.path.exists(full):
            paths.append(extra)
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        def add(arcname: str, data: bytes) -> None:
            ti = tarfile.TarInfo("%s/%s" % (base, arcname))
            ti.size, ti.mode, ti.mtime = len(data), 0o644, int(time.time())
            tar.addfile(ti, io.BytesIO(data))

        for p in paths:
            add(p.replace(os.sep, "/"), _read(p))
        add("PKG-INFO", _metadata().encode("utf-8"))
    return filename
