"""A PEP 517 / PEP 660 build backend for the ward SDK, standard library
only: a wheel (zipfile, with a correct RECORD) and an sdist (tarfile) built
from pyproject.toml, so that `pip install ./clients/python` works with no
package index (pip's build isolation then installs nothing). It must never
need anything outside the standard library."""
import base64
import hashlib
import io
import os
import tarfile
import time
import tomllib
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
TAG = "py3-none-any"
# zip entries get a fixed date, so that two builds of one tree are identical
ZIP_DATE = (2020, 1, 1, 0, 0, 0)


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)
    p = data["project"]
    pkgs = data.get("tool", {}).get("ward-build", {}).get("packages", ["ward"])
    return p, pkgs


def _dist_name(p):
    return p["name"].replace("-", "_")


def _metadata(p):
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for c in p.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    for d in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {d}")
    text = "\n".join(lines) + "\n"
    readme = p.get("readme")
    if readme:
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            text += "Description-Content-Type: text/markdown\n\n" + f.read()
    return text


def _package_files(pkgs):
    """(archive name, absolute path) of every source file of the packages."""
    out = []
    for pkg in pkgs:
        root = os.path.join(HERE, pkg)
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for name in sorted(files):
                if name.endswith((".pyc", ".pyo")):
                    continue
                full = os.path.join(d, name)
                out.append((os.path.relpath(full, HERE).replace(os.sep, "/"), full))
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, files, p):
    """files: [(archive name, bytes)]; adds the dist-info and RECORD."""
    dist = _dist_name(p)
    info = f"{dist}-{p['version']}.dist-info"
    files = list(files) + [
        (f"{info}/METADATA", _metadata(p).encode()),
        (f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: ward_build\n"
                           f"Root-Is-Purelib: true\nTag: {TAG}\n").encode()),
    ]
    record = [_record_line(n, d) for n, d in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{dist}-{p['version']}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            zi = zipfile.ZipInfo(n, ZIP_DATE)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, d)
    return name


# --- PEP 517 hooks ------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p, _ = _project()
    info = f"{_dist_name(p)}-{p['version']}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(p))
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p, pkgs = _project()
    files = []
    for name, full in _package_files(pkgs):
        with open(full, "rb") as f:
            files.append((name, f.read()))
    return _write_wheel(wheel_directory, files, p)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel with a .pth that puts this directory on sys.path."""
    p, _ = _project()
    return _write_wheel(wheel_directory, [(f"_{_dist_name(p)}_editable.pth", (HERE + "\n").encode())], p)


def build_sdist(sdist_directory, config_settings=None):
    p, pkgs = _project()
    base = f"{_dist_name(p)}-{p['version']}"
    names = ["pyproject.toml", "ward_build.py", "README.md"]
    for extra in ("tests",):
        root = os.path.join(HERE, extra)
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            names += [os.path.relpath(os.path.join(d, f), HERE) for f in sorted(files)
                      if not f.endswith(".pyc")]
    members = [(n, os.path.join(HERE, n)) for n in names if os.path.exists(os.path.join(HERE, n))]
    members += _package_files(pkgs)
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        def add(arcname, data):
            ti = tarfile.TarInfo(f"{base}/{arcname}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, int(time.time())
            t.addfile(ti, io.BytesIO(data))
        add("PKG-INFO", _metadata(p).encode())
        for arc, full in members:
            with open(full, "rb") as f:
                add(arc.replace(os.sep, "/"), f.read())
    return name
