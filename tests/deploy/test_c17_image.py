"""The container image (spec 17 §17.6, C17-080 … C17-084), built and started on this machine.

No registry can be reached here and ``podman run`` cannot start containers (cgroups hybrid
mode), so the test does what a registry and a runtime would:

- the base is made from Debian's packages with debootstrap and imported into podman
  (``scripts/image.py debian-base``: kept under a tag derived from its inputs, so a second
  run reuses it; a fresh clone makes it, about a minute and a half);
- the wheelhouse is made outside the build with ``pip wheel`` and the image built with
  ``podman build --isolation=chroot`` (``scripts/image.py build``, what ``make image`` runs);
- a *container* is the image's root filesystem (``podman image mount``, read-only) under an
  overlay with a fresh writable layer, with ``/proc``, ``/dev`` and a volume directory on
  the image's ``VOLUME``, in new mount and network namespaces (``unshare``), entered with
  ``chroot --userspec`` as the image's ``USER``, with the image's ``Env``, ``WorkingDir``,
  ``Entrypoint`` and ``Cmd`` — all read from ``podman image inspect``, nothing restated.
  The test reaches the server inside the namespace with ``nsenter --net``.

What it does not do: cgroups, seccomp, capabilities, a pid namespace, port publishing — the
runtime's part, not the image's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from needs import cannot_run, free_port
from pg_support import create_schema, drop_schema, require_postgres, schema_url

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "image.py"
NETNS_HTTP = Path(__file__).with_name("netns_http.py")
TAG = "localhost/threadloom:deploy-test"
ADMIN_TOKEN = "deploy-test-admin-token-0123456789abcdef"
TOOLS = ("podman", "debootstrap", "unshare", "nsenter", "chroot", "ip", "mount")
# what only the tests and the tools use: none of it belongs in the image
DEV_ONLY = ("pip", "setuptools", "pytest", "mypy", "ruff", "hypothesis", "schemathesis",
            "playwright", "build", "twine")  # fmt: skip


def _cannot_build() -> str | None:
    if sys.platform != "linux":
        return "the image test needs Linux (namespaces, overlayfs, chroot)"
    if os.geteuid() != 0:
        return "the image test runs as root (debootstrap, podman's store, mounts, chroot)"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs it with apt-get as root)"
    if sys.version_info[:2] not in ((3, 11), (3, 13)):
        return "no Debian release has this Python's version, to build the wheelhouse for"
    return None


def _script(*args: str) -> str:
    """Runs scripts/image.py; its last line of output (a tag)."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    lines = [line for line in done.stdout.splitlines() if "is ignored: it is neither" not in line]
    if done.returncode != 0:
        pytest.fail(f"scripts/image.py {' '.join(args)} failed:\n" + "\n".join(lines[-40:]))
    return lines[-1].strip()


def _podman(*args: str) -> str:
    return subprocess.run(
        ["podman", *args], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()


@dataclass
class Image:
    tag: str
    inspect: dict[str, Any]
    rootfs: Path  # the image's root filesystem, mounted read-only
    base_size: int
    build_seconds: float

    @property
    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = self.inspect["Config"]
        return config

    def _table(self, name: str) -> dict[str, list[str]]:
        """The image's /etc/passwd or /etc/group, by name."""
        lines = (self.rootfs / "etc" / name).read_text().splitlines()
        return {fields[0]: fields for fields in (line.split(":") for line in lines if line)}

    def user_ids(self) -> tuple[int, int]:
        """The image's USER as numbers, from its own /etc/passwd and /etc/group."""
        user, _, group = self.config["User"].partition(":")
        passwd = self._table("passwd")
        uid = int(user) if user.isdigit() else int(passwd[user][2])
        if not group:
            gid = int(next(f for f in passwd.values() if int(f[2]) == uid)[3])
        else:
            gid = int(group) if group.isdigit() else int(self._table("group")[group][2])
        return uid, gid

    def home(self) -> str:
        uid, _ = self.user_ids()
        homes = [f[5] for f in self._table("passwd").values() if int(f[2]) == uid]
        return homes[0] if homes else "/"

    def volume(self) -> str:
        (volume,) = self.config["Volumes"]
        return str(volume)


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    reason = _cannot_build()
    if reason is not None:
        cannot_run(reason, "the container image test")
    started = time.monotonic()
    base = _script("debian-base")
    before = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", TAG],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    ).stdout.strip()  # fmt: skip
    tag = _script("build", "--base", base, "--tag", TAG)
    if before and before != _podman("image", "inspect", "--format", "{{.Id}}", tag):
        # the previous run's image, untagged now: not kept
        subprocess.run(
            ["podman", "rmi", before], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    seconds = time.monotonic() - started
    (inspect,) = json.loads(_podman("image", "inspect", tag))
    (base_inspect,) = json.loads(_podman("image", "inspect", base))
    rootfs = Path(_podman("image", "mount", tag))
    try:
        yield Image(tag, inspect, rootfs, int(base_inspect["Size"]), seconds)
    finally:
        subprocess.run(["podman", "image", "unmount", tag], stdout=subprocess.DEVNULL)


@dataclass
class Container:
    """The image started as a container would be (see the module's docstring)."""

    image: Image
    workdir: Path
    volume: Path
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    runs: list[Path] = field(default_factory=list)

    def _env(self, extra: dict[str, str]) -> list[str]:
        env = dict(item.split("=", 1) for item in self.image.config.get("Env") or [])
        env.setdefault("HOME", self.image.home())
        env.update(extra)
        return [f"{key}={value}" for key, value in env.items()]

    def _inside(self, root: Path, argv: list[str], env: dict[str, str]) -> list[str]:
        uid, gid = self.image.user_ids()
        workdir = self.image.config.get("WorkingDir") or "/"
        return [
            "chroot", f"--userspec={uid}:{gid}", str(root),
            "/usr/bin/env", "-i", *self._env(env),
            "/bin/sh", "-c", 'cd "$0" && exec "$@"', workdir, *argv,
        ]  # fmt: skip

    def _command(self, argv: list[str], env: dict[str, str], *, net: bool = True) -> list[str]:
        """``argv`` in a new container; ``net=False`` shares this machine's network (as
        ``--network host`` does)."""
        run = self.workdir / f"run-{len(self.runs)}"
        self.runs.append(run)
        upper, work, root = run / "upper", run / "work", run / "root"
        for folder in (upper, work, root):
            folder.mkdir(parents=True)
        setup = (
            'set -e; mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4"; '
            'mount -t proc proc "$4/proc"; mount --rbind /dev "$4/dev"; '
            'mount --bind "$5" "$4$6"; '
            + ("ip link set lo up; " if net else "")
            + 'shift 6; exec "$@"'
        )
        return [
            "unshare", "--mount", *(["--net"] if net else []), "--propagation", "private",
            "sh", "-c", setup, "sh",
            str(self.image.rootfs), str(upper), str(work), str(root), str(self.volume),
            self.image.volume(),
            *self._inside(root, argv, env),
        ]  # fmt: skip

    def entry(self, args: list[str] | None = None) -> list[str]:
        """The image's Entrypoint with its Cmd (or ``args`` in the Cmd's place)."""
        return [*self.image.config["Entrypoint"], *(args or self.image.config["Cmd"])]

    def once(self, argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[int, str]:
        """Runs ``argv`` in a new container on the volume (``podman run --rm -i``)."""
        done = subprocess.run(
            self._command(argv, env),
            input=stdin.encode(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=60,
        )
        return done.returncode, done.stdout.decode(errors="replace")

    def start(
        self, env: dict[str, str], args: list[str] | None = None, *, net: bool = True
    ) -> None:
        """Starts the image's entry point in a new container on the volume."""
        self.log = self.workdir / f"serve-{len(self.runs)}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                self._command(self.entry(args), env, net=net),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""

    def exec(self, argv: list[str]) -> tuple[int, str]:
        """``argv`` in the running container (``podman exec``): its mounts and network."""
        assert self.process is not None
        root = self.runs[-1] / "root"
        done = subprocess.run(
            ["nsenter", f"--target={self.process.pid}", "--mount", "--net", "--",
             *self._inside(root, argv, {})],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30,
        )  # fmt: skip
        return done.returncode, done.stdout.decode(errors="replace")

    def http(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        """One request to the image's port inside the container's network namespace."""
        assert self.process is not None
        port = next(iter(self.image.config["ExposedPorts"])).split("/")[0]
        cmd = ["nsenter", f"--target={self.process.pid}", "--net", "--", sys.executable,
               str(NETNS_HTTP), method, f"http://127.0.0.1:{port}{path}"]  # fmt: skip
        if token:
            cmd += ["--token", token]
        if body is not None:
            cmd += ["--json", json.dumps(body)]
        done = subprocess.run(cmd, capture_output=True, timeout=30)
        if done.returncode != 0:
            return {"status": None, "body": done.stderr.decode(errors="replace")}
        return json.loads(done.stdout)

    def wait_healthy(self, timeout: float = 60) -> dict[str, Any]:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        answer: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the container exited ({self.process.returncode}):\n{self.output()}")
            answer = self.http("GET", "/api/health")
            if answer["status"] == 200:
                return answer
            time.sleep(0.3)
        pytest.fail(f"no healthy answer within {timeout} s: {answer}\n{self.output()}")

    def stop(self) -> int | None:
        """SIGTERM, as ``podman stop`` sends; the exit status (None: killed after 30 s)."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.terminate()
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None


@pytest.fixture
def container(image: Image, tmp_path: Path) -> Iterator[Container]:
    volume = tmp_path / "volume"
    volume.mkdir()
    # a new named volume starts as a copy of the image's folder: its owner and mode
    st = (image.rootfs / image.volume().lstrip("/")).stat()
    os.chown(volume, st.st_uid, st.st_gid)
    volume.chmod(st.st_mode & 0o7777)
    box = Container(image, tmp_path, volume)
    try:
        yield box
    finally:
        box.stop()


def test_c17_080_image_config(image: Image) -> None:
    """C17-080: the image runs ``threadloom serve`` on the example project, on 0.0.0.0, as a
    user that is not root, with its SQLite store in a volume and a health check on
    ``/api/health`` that needs nothing but the image's Python."""
    config = image.config
    uid, gid = image.user_ids()
    assert uid != 0 and gid != 0
    assert config["Entrypoint"] == ["threadloom"]
    assert config["Cmd"][:2] == ["serve", "/srv/project"]
    assert config["Cmd"][config["Cmd"].index("--host") + 1] == "0.0.0.0"
    port = config["Cmd"][config["Cmd"].index("--port") + 1]
    assert list(config["ExposedPorts"]) == [f"{port}/tcp"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["THREADLOOM_DATABASE_URL"] == f"sqlite:///{image.volume()}/threadloom.db"
    volume = image.rootfs / image.volume().lstrip("/")
    assert (volume.stat().st_uid, volume.stat().st_gid) == (uid, gid)
    assert (image.rootfs / "srv/project/agents").is_dir()
    check = image.inspect["Healthcheck"]["Test"]
    assert check[0] == "CMD" and f"127.0.0.1:{port}/api/health" in " ".join(check)
    program = [image.rootfs / d.lstrip("/") / check[1] for d in env["PATH"].split(":")]
    assert any(os.path.lexists(path) for path in program), f"{check[1]} is not in the image"
    size = int(image.inspect["Size"])
    print(
        f"\nimage {image.tag}: {size / 1e6:.0f} MB ({(size - image.base_size) / 1e6:.0f} MB"
        f" over its {image.base_size / 1e6:.0f} MB Debian base); base and build took"
        f" {image.build_seconds:.0f} s"
    )


def test_c17_081_only_runtime_dependencies(image: Image) -> None:
    """C17-081: the image's environment holds Threadloom, its runtime dependencies and the
    extras it is built with (postgres, agui, mcp) — no pip, no setuptools, nothing of the
    dev extra — and the build stage's wheelhouse is not in the image."""
    (site,) = (image.rootfs / "opt/threadloom/lib").glob("python3.*/site-packages")
    installed = {
        path.name.split("-")[0].lower().replace("_", "-") for path in site.glob("*.dist-info")
    }
    assert {"threadloom", "pydantic", "fastapi", "uvicorn", "psycopg", "psycopg-binary",
            "ag-ui-protocol", "mcp"} <= installed  # fmt: skip
    assert installed.isdisjoint(DEV_ONLY), installed & set(DEV_ONLY)
    assert not (image.rootfs / "wheels").exists()
    assert not (image.rootfs / "opt/threadloom/bin/pip").exists()


def test_c17_082_no_credential_no_start(container: Container) -> None:
    """C17-082: without a credential the image refuses to listen on 0.0.0.0 (exit code 2)
    and says how to make one."""
    code, output = container.once(container.entry(), {})
    assert code == 2, output
    assert "refusing to listen on 0.0.0.0" in output
    assert "THREADLOOM_ADMIN_TOKEN" in output


def test_c17_083_serves_a_turn_as_its_user(image: Image, container: Container) -> None:
    """C17-083: with ``THREADLOOM_ADMIN_TOKEN`` from the environment the image serves: the
    health check answers 200 and the image's own HEALTHCHECK command passes, a turn of
    the example ``support`` agent completes on the demo model, the server process runs as
    the image's user (not root), and the store is written into the volume, as that user."""
    container.start({"THREADLOOM_ADMIN_TOKEN": ADMIN_TOKEN})
    health = container.wait_healthy()
    assert health["body"]["status"] == "ok" and health["body"]["store"] == "sqlite"
    code, output = container.exec(image.inspect["Healthcheck"]["Test"][1:])
    assert code == 0, output

    assert container.process is not None
    status = Path(f"/proc/{container.process.pid}/status").read_text()
    ids = {line.split(":")[0]: line.split()[1:] for line in status.splitlines()}
    uid, gid = image.user_ids()
    assert ids["Uid"] == [str(uid)] * 4 and ids["Gid"] == [str(gid)] * 4
    assert "0" not in ids["Groups"]  # no supplementary group of root's either
    cmdline = Path(f"/proc/{container.process.pid}/cmdline").read_bytes().split(b"\0")
    assert b"serve" in cmdline

    assert container.http("GET", "/api/threads")["status"] == 401
    created = container.http("POST", "/api/threads", {"agent_id": "support"}, ADMIN_TOKEN)
    assert created["status"] in (200, 201), created
    thread = created["body"]["threadId"]
    sent = container.http(
        "POST", f"/api/threads/{thread}/messages", {"content": "Where is order A-1001?"},
        ADMIN_TOKEN,
    )  # fmt: skip
    assert sent["status"] in (200, 202), sent
    deadline = time.monotonic() + 30
    messages: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        page = container.http("GET", f"/api/threads/{thread}/messages?order=asc", token=ADMIN_TOKEN)
        messages = page["body"]["messages"]
        # the answer streams (the demo model writes at a reader's pace): wait for its end
        if len(messages) == 4 and messages[-1]["status"] == "completed":
            break
        time.sleep(0.3)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert "Walnut desk" in (messages[-1]["content"] or "")
    print(
        f"\nhealth: {health['body']}\nprocess {container.process.pid}: Uid {ids['Uid']}"
        f" Gid {ids['Gid']} Groups {ids['Groups']}"
        f"\nthe turn in the image: {messages[-1]['content']!r}"
    )

    store = container.volume / "threadloom.db"
    assert store.is_file() and (store.stat().st_uid, store.stat().st_gid) == (uid, gid)
    assert container.stop() in (0, 143, -15), container.output()
    assert "Traceback" not in container.output()
    print(container.output())


def test_c17_084_first_start_with_a_bootstrap_admin(image: Image, container: Container) -> None:
    """C17-084: the other first-start recipe: ``threadloom users create`` and ``threadloom
    keys create`` run once in a container on the volume; the image then starts with no
    admin token, and the key is its credential."""
    code, output = container.once(
        container.entry(["users", "create", "admin", "--role", "admin", "--password-stdin"]),
        {},
        stdin="a long admin password for the image test\n",
    )
    assert code == 0, output
    code, output = container.once(
        container.entry(["keys", "create", "admin", "--name", "first-key"]), {}
    )
    assert code == 0, output
    (key,) = [word for word in output.split() if word.startswith("tlk_")]

    container.start({})
    container.wait_healthy()
    assert container.http("GET", "/api/threads")["status"] == 401
    listed = container.http("GET", "/api/threads", token=key)
    assert listed["status"] == 200, listed
    assert container.stop() in (0, 143, -15), container.output()


COMPOSE = ROOT / "compose.yaml"
NGINX_CONF = ROOT / "deploy" / "nginx.conf"


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", value)
    assert match and value, f"not a compose duration: {value!r}"
    return int(match.group(1) or 0) * 60 + int(match.group(2) or 0)


def test_c17_085_compose_two_nodes_behind_nginx(image: Image, tmp_path: Path) -> None:
    """C17-085: compose.yaml is a valid Compose file (the Compose specification's schema)
    with PostgreSQL, two nodes of the image and nginx with deploy/nginx.conf in front of
    them; its nodes require the admin token, wait for a healthy database and get more
    than the drain time to stop. Without a container runtime the same topology runs here:
    the two nodes from the image's root filesystem (on this machine's network and
    PostgreSQL, with the compose file's environment), nginx with deploy/nginx.conf (its
    upstream addresses and listen port changed, every other rule as it is): requests
    through the proxy reach both nodes, and a turn sent through it completes."""
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec",
         str(COMPOSE)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    nodes = {name: s for name, s in services.items() if "threadloom" in s.get("image", "")}
    assert len(nodes) == 2 and "postgres" in services and "proxy" in services
    conf = NGINX_CONF.read_text()
    upstream = re.findall(r"^\s*server\s+([\w.-]+):(\d+);", conf, re.M)
    port = image.config["Cmd"][image.config["Cmd"].index("--port") + 1]
    assert sorted(upstream) == sorted((name, port) for name in nodes)
    assert "./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro" in services["proxy"]["volumes"]
    (subnet,) = (c["subnet"] for c in compose["networks"]["threadloom"]["ipam"]["config"])
    for node in nodes.values():
        env = node["environment"]
        assert env["THREADLOOM_DATABASE_URL"].startswith("postgresql://")
        assert "@postgres:5432/" in env["THREADLOOM_DATABASE_URL"]
        assert env["THREADLOOM_ADMIN_TOKEN"].startswith("${THREADLOOM_ADMIN_TOKEN:?")
        assert env["THREADLOOM_TRUSTED_PROXIES"] == subnet
        assert node["depends_on"]["postgres"]["condition"] == "service_healthy"
        drain = float(env["THREADLOOM_DRAIN_SECONDS"])
        assert node["stop_signal"] == "SIGTERM"
        assert _seconds(node["stop_grace_period"]) > drain + 35

    require_postgres()
    if shutil.which("nginx") is None:
        cannot_run("nginx is not installed (make test installs it as root)", "the compose run")
    schema = f"tl_compose_{os.getpid()}"
    create_schema(schema)
    boxes: list[Container] = []
    proxy: subprocess.Popen[bytes] | None = None
    try:
        ports = []
        for name, node in nodes.items():
            volume = tmp_path / name / "volume"
            volume.mkdir(parents=True)
            st = (image.rootfs / image.volume().lstrip("/")).stat()
            os.chown(volume, st.st_uid, st.st_gid)
            box = Container(image, tmp_path / name, volume)
            env = {k: str(v) for k, v in node["environment"].items()}
            env["THREADLOOM_DATABASE_URL"] = schema_url(schema)
            env["THREADLOOM_ADMIN_TOKEN"] = ADMIN_TOKEN
            ports.append(free_port())
            cmd = list(image.config["Cmd"])
            cmd[cmd.index("--port") + 1] = str(ports[-1])
            box.start(env, cmd, net=False)
            boxes.append(box)
        for box, node_port in zip(boxes, ports, strict=True):
            deadline = time.monotonic() + 60
            while True:
                assert box.process is not None and box.process.poll() is None, box.output()
                try:
                    if httpx.get(f"http://127.0.0.1:{node_port}/api/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, box.output()
                time.sleep(0.3)

        proxy_port = free_port()
        servers = iter(ports)
        local = re.sub(
            r"^(\s*server\s+)[\w.-]+:\d+;",
            lambda m: f"{m.group(1)}127.0.0.1:{next(servers)};",
            conf,
            flags=re.M,
        )
        local = local.replace("listen 80;", f"listen 127.0.0.1:{proxy_port};")
        assert local.count("127.0.0.1") == 3
        nginx_dir = tmp_path / "nginx"
        nginx_dir.mkdir()
        (nginx_dir / "default.conf").write_text(local)
        temp = "".join(
            f"{kind}_temp_path {nginx_dir}/{kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (nginx_dir / "nginx.conf").write_text(
            f"daemon off; pid {nginx_dir}/nginx.pid; error_log {nginx_dir}/error.log;"
            f" events {{}} http {{ access_log off; {temp} include {nginx_dir}/default.conf; }}"
        )
        proxy = subprocess.Popen(
            ["nginx", "-p", str(nginx_dir), "-c", str(nginx_dir / "nginx.conf")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        base = f"http://127.0.0.1:{proxy_port}"
        deadline = time.monotonic() + 15
        while True:
            assert proxy.poll() is None, proxy.stdout.read() if proxy.stdout else ""
            try:
                httpx.get(f"{base}/api/health")
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)

        with httpx.Client(base_url=base, timeout=10) as client:
            seen = {client.get("/api/health").headers["x-threadloom-node"] for _ in range(8)}
            assert len(seen) == 2, seen
            auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            thread = client.post("/api/threads", json={"agent_id": "support"}, headers=auth)
            assert thread.status_code in (200, 201), thread.text
            url = f"/api/threads/{thread.json()['threadId']}/messages"
            sent = client.post(url, json={"content": "Where is order A-1001?"}, headers=auth)
            assert sent.status_code in (200, 202), sent.text
            messages: list[dict[str, Any]] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                messages = client.get(f"{url}?order=asc", headers=auth).json()["messages"]
                if len(messages) == 4 and messages[-1]["status"] == "completed":
                    break
                time.sleep(0.3)
            assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
            assert "Walnut desk" in (messages[-1]["content"] or "")
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=10)
        for box in boxes:
            box.stop()
        drop_schema(schema)
    for box in boxes:
        assert "Traceback" not in box.output(), box.output()
