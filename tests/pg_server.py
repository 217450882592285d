"""A real PostgreSQL server for the tests, started on 127.0.0.1 in a folder of its own (Debian's postgresql 15:
`initdb` and `pg_ctl`; as root they run as the `postgres` user, which PostgreSQL requires).

    with Postgres() as pg:          # initdb + start on a free port
        url = pg.url                # postgresql://gateway@127.0.0.1:PORT/postgres
        pg.stop(); pg.start()       # a restart keeps the data

`missing()` says why a server cannot be started here, after trying to install the package when it is missing
(tests/system_packages.py); the test then skips, naming the package (.ci/run installs it).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from system_packages import install

BIN = Path("/usr/lib/postgresql/15/bin")
USER = "gateway"


def _bin(name: str) -> str | None:
    if (BIN / name).exists():
        return str(BIN / name)
    return shutil.which(name)


def missing() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None."""
    if (_bin("initdb") is None or _bin("pg_ctl") is None) and install("postgresql") is not None:
        return "PostgreSQL is not installed (apt-get install postgresql; .ci/run does)"
    if _bin("initdb") is None or _bin("pg_ctl") is None:
        return "PostgreSQL is not installed (apt-get install postgresql; .ci/run does)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run PostgreSQL as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[test]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """One PostgreSQL server in a temporary folder (module docstring)."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="riskrank-pg-"))
        os.chmod(self.root, 0o755)
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.port = free_port()
        self.url = f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            import pwd

            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run([_bin("initdb"), "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync"])

    def _run(self, argv, check=True):
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}): {p.stdout}{p.stderr}"
                               + (self.log.read_text()[-2000:] if self.log.exists() else ""))
        return p

    def start(self) -> "Postgres":
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=200")
        self._run([_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60",
                   "start"])
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``mode``: smart, fast or immediate); its data stays for `start`."""
        self._run([_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"], check=False)

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Postgres":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
