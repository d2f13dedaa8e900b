"""Django's sessions on webtier (``SESSION_ENGINE =
"webtier.web.sessions.django"``), proven by Django's own tests of a session
backend: every test of ``SessionTestsMixin`` (sync and async), from the
source distribution of the Django installed here, downloaded at test time
into .cache/ (ignored by git); then a Django project's login, logout,
messages and parallel requests. On a standalone server and on Cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE_TESTS = 65  # in SessionTestsMixin, Django 4.2 to 5.2


def django_tests_dir() -> Path:
    """The ``tests/`` folder of the installed Django's source distribution,
    downloaded (once) into .cache/django/: its sessions_tests alone."""
    import django

    version = django.get_version()
    cache = ROOT / ".cache" / "django"
    tests = cache / f"django-{version}" / "tests"
    if (tests / "sessions_tests" / "tests.py").exists():
        return tests
    cache.mkdir(parents=True, exist_ok=True)
    download = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    download += ["--no-binary", ":all:", f"django=={version}", "--dest", str(cache)]
    done = subprocess.run(download, capture_output=True, text=True, timeout=300, check=False)
    archive = cache / f"django-{version}.tar.gz"
    if done.returncode != 0 or not archive.exists():
        pytest.skip(f"Django {version}'s source distribution did not download: {done.stderr}")
    wanted = f"django-{version}/tests/sessions_tests/"
    with tarfile.open(archive) as sdist:
        members = [m for m in sdist.getmembers() if m.name.startswith(wanted)]
        sdist.extractall(cache, members=members, filter="data")
    return tests


@pytest.mark.slow
@pytest.mark.parametrize("target", ["standalone", "cluster"], indirect=True)
def test_djangos_session_suite_and_a_project_pass_on_webtier(redis_url: str, prefix: str) -> None:
    tests = django_tests_dir()
    command = [sys.executable, "-m", "tests.helpers.django_suite", redis_url, prefix, str(tests)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    django_run, project = results["django"], results["project"]
    assert django_run["failed"] == {}, "\n".join(django_run["failed"].values())
    assert django_run["skipped"] == {}
    assert django_run["run"] == SUITE_TESTS
    assert project["failed"] == {}, "\n".join(project["failed"].values())
    assert project["skipped"] == {}
    assert project["run"] == 5
    # 2 x 200 parallel requests, each setting a key of its own in one session.
    assert results["lost"]["webtier"] == 0
    print(f"Django's cache backend lost {results['lost']['django-cache']} of 400 updates")
