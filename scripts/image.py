"""Build Threadloom's container image (docs/deploy.md, "The container image").

    python scripts/image.py wheelhouse            # build/wheelhouse: pip wheel of the package
    python scripts/image.py build [--base IMAGE]  # the wheelhouse, then podman (docker) build
    python scripts/image.py debian-base           # a base image made with debootstrap

The image installs from a wheelhouse made here, outside the build, with `pip wheel`: the
build fetches nothing, so it works where the build cannot reach a package index, and the
image holds exactly the wheels that were checked. The wheelhouse is built by the Python that
runs this script, so the image's base must have the same minor version of Python (the
default base, python:3.11-slim-bookworm, has 3.11; `debian-base` picks the Debian release
whose python3 matches).

`debian-base` makes a base image from Debian's packages alone (debootstrap, as root, with
the mirror apt uses on this machine) and imports it into podman: the tests use it where no
registry can be reached. It is kept under a tag derived from its inputs, and made again
only when they change.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / "build" / "wheelhouse"
CONTAINERFILE = ROOT / "Containerfile"
DEFAULT_BASE = "docker.io/library/python:3.11-slim-bookworm"
DEFAULT_EXTRAS = "postgres,agui,mcp"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Debian releases by the minor version of their python3
SUITES = {(3, 11): "bookworm", (3, 13): "trixie"}
# what a base needs: python3 with its venv module (ensurepip); minbase has the rest
BASE_PACKAGES = ("python3", "python3-venv")


def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def build_wheelhouse(
    out: Path = WHEELHOUSE, extras: str = DEFAULT_EXTRAS, packages: tuple[str, ...] = ()
) -> Path:
    """``out`` holds the threadloom wheel and a wheel of every runtime dependency (and of
    ``packages``, requirement specifiers, with theirs)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    spec = f"{ROOT}[{extras}]" if extras else str(ROOT)
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(out)]
    run([*pip, spec, *packages])
    if not list(out.glob("threadloom-*.whl")):
        raise SystemExit(f"pip wheel made no threadloom wheel in {out}")
    return out


def build_image(
    *,
    base: str = DEFAULT_BASE,
    tag: str = "localhost/threadloom:latest",
    extras: str = DEFAULT_EXTRAS,
    packages: tuple[str, ...] = (),
    engine: str = "podman",
    isolation: str | None = "chroot",
) -> str:
    """The wheelhouse, then the image from ``Containerfile``; returns ``tag``."""
    build_wheelhouse(extras=extras, packages=packages)
    cmd = [engine, "build", "--file", str(CONTAINERFILE), "--tag", tag]
    cmd += ["--build-arg", f"BASE={base}", "--build-arg", f"EXTRAS={extras}"]
    cmd += ["--build-arg", f"PACKAGES={' '.join(packages)}"]
    if Path(engine).name == "podman":
        # HEALTHCHECK is kept by the docker image format only (OCI has no such field);
        # no image per step: every step after the wheelhouse changes with each build
        cmd += ["--format", "docker", "--layers=false"]
        if isolation:
            cmd += [f"--isolation={isolation}"]
    run([*cmd, str(ROOT)])
    return tag


def apt_mirror(suite: str) -> str:
    """The Debian mirror apt uses on this machine for ``suite`` (deb.debian.org when none)."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.suffix == ".sources":  # deb822: paragraphs of Field: value
            for para in re.split(r"\n\s*\n", text):
                lines = (ln.partition(":") for ln in para.splitlines())
                fields: dict[str, str] = {
                    k.strip().lower(): v.strip()
                    for k, _, v in lines
                    if not k.lstrip().startswith("#") and v
                }
                if (
                    suite in fields.get("suites", "").split()
                    and "deb" in fields.get("types", "").split()
                ):
                    return fields["uris"].split()[0]
        elif path.suffix == ".list" or path.name == "sources.list":
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line).split()
                if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                    return words[1]
    return DEFAULT_MIRROR


def debian_base(suite: str | None = None, mirror: str | None = None) -> str:
    """A base image tag in podman's store, made with debootstrap unless it is there."""
    suite = suite or SUITES.get(sys.version_info[:2], "")
    if not suite:
        raise SystemExit(
            f"no Debian release has Python {sys.version_info[0]}.{sys.version_info[1]}:"
            f" run this with Python {' or '.join(f'{a}.{b}' for a, b in SUITES)}"
        )
    mirror = mirror or apt_mirror(suite)
    key = hashlib.sha256(repr((suite, mirror, BASE_PACKAGES, "minbase")).encode()).hexdigest()
    tag = f"localhost/threadloom-debian-base:{suite}-{key[:12]}"
    if subprocess.run(["podman", "image", "exists", tag]).returncode == 0:
        print(f"{tag} is there already", flush=True)
        return tag
    with tempfile.TemporaryDirectory(prefix="threadloom-base-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                suite,
                str(rootfs),
                mirror,
            ],
            stdout=subprocess.DEVNULL,
        )
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (rootfs / cache).glob("*"):
                if item.is_file():
                    item.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        run(["podman", "import", "-", tag], stdin=tar.stdout, stdout=subprocess.DEVNULL)
        if tar.wait() != 0:
            raise SystemExit("tar of the debootstrap tree failed")
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    wheels = sub.add_parser("wheelhouse", help="pip wheel the package into build/wheelhouse")
    wheels.add_argument("--extras", default=DEFAULT_EXTRAS)
    wheels.add_argument("--packages", default="", help="more requirements, space-separated")
    build = sub.add_parser("build", help="the wheelhouse, then the image")
    build.add_argument("--base", default=DEFAULT_BASE)
    build.add_argument("--tag", default="localhost/threadloom:latest")
    build.add_argument("--extras", default=DEFAULT_EXTRAS)
    build.add_argument("--packages", default="", help="more requirements, space-separated")
    build.add_argument("--engine", default="podman", help="podman (default) or docker")
    build.add_argument("--isolation", default="chroot", help="podman's --isolation ('' for none)")
    base = sub.add_parser("debian-base", help="a base image from Debian's packages (root)")
    base.add_argument("--suite", help="Debian release (default: the one of this Python)")
    base.add_argument("--mirror", help="Debian mirror (default: the one apt uses here)")
    args = parser.parse_args(argv)
    if args.command == "wheelhouse":
        print(build_wheelhouse(extras=args.extras, packages=tuple(args.packages.split())))
    elif args.command == "build":
        tag = build_image(
            base=args.base,
            tag=args.tag,
            extras=args.extras,
            packages=tuple(args.packages.split()),
            engine=args.engine,
            isolation=args.isolation or None,
        )
        print(tag)
    else:
        print(debian_base(args.suite, args.mirror))
    return 0


if __name__ == "__main__":
    sys.exit(main())
