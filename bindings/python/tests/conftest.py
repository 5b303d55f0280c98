"""Shared fixtures: the backends under test and unique lease names.

SIMBA_PY_BACKENDS (comma list, default "memory") picks the backends; a server
backend whose SIMBA_TEST_*_URL is unset is skipped, as in the other bindings.
"""

import os
import time
import uuid

import pytest

import simba

LEASE = 0.9  # seconds: short, so that the tests are fast (renew = lease / 3)
LONG = 15.0  # a generous bound for what should happen "soon"
ENV = {"redis": "SIMBA_TEST_REDIS_URL", "postgres": "SIMBA_TEST_POSTGRES_URL",
       "zookeeper": "SIMBA_TEST_ZOOKEEPER_URL"}
RUN = f"py{os.getpid()}{uuid.uuid4().hex[:6]}"


def backend_url(backend):
    if backend == "memory":
        return f"memory://{RUN}"
    url = os.environ.get(ENV[backend], "")
    if not url:
        pytest.skip(f"{ENV[backend]} is unset: {backend} skipped")
    return url


def pytest_generate_tests(metafunc):
    if "url" in metafunc.fixturenames:
        backends = [b for b in os.environ.get("SIMBA_PY_BACKENDS", "memory").split(",") if b]
        metafunc.parametrize("backend", backends)


@pytest.fixture
def url(backend):
    return backend_url(backend)


@pytest.fixture
def name(request):
    # A lease name no other test (or run on a shared server) uses.
    return f"{RUN}.{request.node.name.split('[')[0][5:][:40]}.{uuid.uuid4().hex[:6]}"


@pytest.fixture
def clients():
    opened = []

    def make(url, **kw):
        kw.setdefault("lease_duration", LEASE)
        c = simba.Client(url, **kw)
        opened.append(c)
        c.wait_live(LONG)
        return c
    yield make
    for c in opened:
        c.close()


def eventually(pred, timeout=LONG, step=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()
