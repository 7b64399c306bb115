"""The container images of deploy/images: built (or kept, same inputs) by build.sh, and run
with podman the way this machine allows (test code only)."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence

from support.builds import Build
from support.paths import ROOT

BUILD_SCRIPT = ROOT / "deploy" / "images" / "build.sh"
NAMES = ("publisher", "materializer")
# buildah builds, mmdebstrap makes the base, podman runs; runc is the runtime (below)
TOOLS = ("podman", "buildah", "mmdebstrap", "runc")
INSTALL = "apt-get install -y podman buildah mmdebstrap runc"


def version() -> str:
    """casscade's version, pyproject.toml's: the images' tag."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def image(name: str) -> str:
    """The full name of casscade's `name` image (publisher, materializer) at this version."""
    return f"localhost/casscade-{name}:{version()}"


def require_tools() -> None:
    """Fail (never skip) when a tool the images need is missing, saying how to install it."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    assert not missing, f"missing {', '.join(missing)}: {INSTALL}"


def start_build(nice: int = 10) -> Build:
    """deploy/images/build.sh started in the background (support.builds.Build)."""
    require_tools()
    # the wheelhouse is filled for this interpreter, the project's 3.11 (Debian's is too)
    return Build.start([str(BUILD_SCRIPT)], {"PYTHON": sys.executable}, nice)


def build_images(build: Build | None = None, timeout_s: float = 3600) -> dict[str, str]:
    """Both images, built by deploy/images/build.sh (`build`: one already started by
    start_build), or kept when built from the same wheel and recipe; returns {name: image}."""
    code, out = (build or start_build(nice=0)).wait(timeout_s)
    print(out[-5000:])  # its timings, or why it kept an image
    assert code == 0, out[-8000:]
    return {name: image(name) for name in NAMES}


def inspect(name_or_id: str) -> dict:
    """`podman image inspect` of one image."""
    out = subprocess.run(["podman", "image", "inspect", name_or_id], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)[0]


def _limit(kind: int, cap: int) -> int:
    """This process's hard limit of `kind`, at most `cap`."""
    hard = resource.getrlimit(kind)[1]
    return cap if hard == resource.RLIM_INFINITY else min(hard, cap)


def podman_run(image_name: str, args: Sequence[str] = (), options: Sequence[str] = ()
               ) -> list[str]:
    """The `podman run --rm` command line of `image_name` (its CMD when `args` is empty) with
    what this machine needs to run a container at all.

    `--runtime runc`: Debian bookworm's crun (1.8.1, podman's default) refuses this host,
    whose cgroups are v1 with a v2 hierarchy beside them: "Error: OCI runtime error: crun:
    cgroups in hybrid mode not supported, drop all controllers from cgroupv2" (and with
    --cgroups=disabled runc is refused: "requested OCI runtime runc is not compatible with
    NoCgroups"). `--ulimit`: podman asks for 1,048,576 open files by default and root here
    lacks CAP_SYS_RESOURCE to raise its hard limit (20,000): "Error: crun: setrlimit
    `RLIMIT_NOFILE`: Operation not permitted: OCI permission denied", with runc "error
    setting rlimit type 7: operation not permitted"; the process limit likewise ("type 6")
    unless at most the 32,768 the runtime itself runs with."""
    return ["podman", "run", "--rm", "--runtime", "runc",
            "--ulimit", "nofile={0}:{0}".format(_limit(resource.RLIMIT_NOFILE, 1_048_576)),
            "--ulimit", "nproc={0}:{0}".format(_limit(resource.RLIMIT_NPROC, 32_768)),
            *options, image_name, *args]
