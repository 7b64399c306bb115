#!/usr/bin/env bash
# Build casscade's two container images with Debian's buildah, from a base made here.
#
#   deploy/images/build.sh [--only publisher|materializer] [--wheel FILE] [--force] [--refresh-base]
#
# casscade-publisher:<version>     the publisher sidecar (deploy/k8s/publisher-sidecar.yaml):
#                                  Debian's python3 and a venv with casscade's wheel, no
#                                  materializer extra; runs as uid/gid 999
# casscade-materializer:<version>  the Spark job: Spark on its own layout (/opt/spark, from the
#                                  pyspark wheel), Debian's Java 17, casscade[materializer], the
#                                  Kafka connector in /opt/spark/jars, deploy/spark/ scripts
# Both are also tagged :latest; <version> is pyproject.toml's.
#
# No image registry is needed: the base, localhost/casscade-base:bookworm, is a Debian
# bookworm minbase root file system that mmdebstrap makes from Debian's packages, cached in
# <images dir>/base/ and imported once (--refresh-base makes it anew: security updates). The
# Containerfiles' RUN steps reach Debian's mirror through the host's network; Python packages
# come from a wheelhouse filled on this machine (pip's cache, else PyPI) and the connector jars
# from the dev stack's lib dir (fetched from Maven Central if missing), so nothing else is
# downloaded inside a build.
#
# The wheel is built from this checkout with a fixed SOURCE_DATE_EPOCH, so the same sources
# give the same wheel; an image whose inputs (that wheel, its Containerfile, this script, the
# base, the connector jars) are unchanged is kept, not rebuilt (--force rebuilds it). Its
# labels casscade.wheel.sha256 and casscade.inputs.sha256 say what it was built from.
#
# --only NAME    build one image; --wheel FILE  use this casscade wheel (e.g. `make dist`'s)
# --force        rebuild even if the inputs are unchanged; --refresh-base  remake the base
#
# Needs (Debian): apt-get install podman buildah mmdebstrap runc. As root.
# Environment: PYTHON (default: the checkout's .venv/bin/python, else python3; Python 3.11,
# as Debian bookworm's, since the wheelhouse is filled for it), CASSCADE_IMAGES_DIR (default
# .casscade/images of the checkout), CASSCADE_OCI_RUNTIME (default runc: Debian bookworm's crun
# 1.8 refuses a host whose cgroups are in hybrid mode).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/deploy/images"
only="" wheel="" force=false refresh_base=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) only="$2"; shift 2 ;;
    --wheel) wheel=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    --force) force=true; shift ;;
    --refresh-base) refresh_base=true; shift ;;
    -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$only" in
  "") images=(publisher materializer) ;;
  publisher|materializer) images=("$only") ;;
  *) echo "build.sh: --only takes publisher or materializer, not $only" >&2; exit 2 ;;
esac

missing=()
for tool in mmdebstrap buildah podman "${CASSCADE_OCI_RUNTIME:-runc}"; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "build.sh: missing ${missing[*]}: apt-get install -y podman buildah mmdebstrap runc" >&2
  exit 3
fi
runtime=$(command -v "${CASSCADE_OCI_RUNTIME:-runc}")

if [[ -z "${PYTHON:-}" && -x "$root/.venv/bin/python" ]]; then
  python="$root/.venv/bin/python"
else
  python=${PYTHON:-python3}
fi
version=$(cd "$root" && "$python" -c \
  'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
cache=${CASSCADE_IMAGES_DIR:-$root/.casscade/images}
mkdir -p "$cache"
# one build at a time per images dir (a test and `make images` may meet)
exec 9>"$cache/.lock"
flock 9

log() { echo "build.sh: $*" >&2; }
seconds() { echo $(( $(date +%s) - $1 )); }
sha() { sha256sum "$@" | cut -d' ' -f1; }

# --- the base: Debian bookworm minbase from Debian's packages, no registry -----------------
base_tar="$cache/base/bookworm-minbase.tar"
base_image=localhost/casscade-base:bookworm
if $refresh_base || [[ ! -s "$base_tar" ]]; then
  mkdir -p "$cache/base"
  started=$(date +%s)
  log "making the base root file system with mmdebstrap (bookworm, minbase)"
  # docs, manuals and translations are left out of every package installed later too (the
  # dpkg options stay in the image's /etc/dpkg/dpkg.cfg.d); licences are kept
  mmdebstrap --quiet --variant=minbase --format=tar \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    bookworm "$base_tar.tmp"
  mv -f "$base_tar.tmp" "$base_tar"
  sha "$base_tar" > "$base_tar.sha256"
  log "base made in $(seconds "$started") s ($(du -h "$base_tar" | cut -f1))"
fi
[[ -s "$base_tar.sha256" ]] || sha "$base_tar" > "$base_tar.sha256"
base_sha=$(cat "$base_tar.sha256")
label() {  # $1 image, $2 label: its value, empty when the image or the label is missing
  podman image inspect --format "{{ index .Labels \"$2\" }}" "$1" 2>/dev/null || true
}
if [[ "$(label "$base_image" casscade.base.sha256)" != "$base_sha" ]]; then
  log "importing the base as $base_image"
  old=$(podman image inspect --format '{{.Id}}' "$base_image" 2>/dev/null || true)
  podman import --quiet --change "LABEL casscade.base.sha256=$base_sha" \
    --change 'CMD ["/bin/bash"]' "$base_tar" "$base_image" >/dev/null
  [[ -n "$old" ]] && podman rmi "$old" >/dev/null 2>&1 || true  # unless a build still uses it
fi

# --- the wheel ---------------------------------------------------------------------------
if [[ -z "$wheel" ]]; then
  started=$(date +%s)
  rm -rf "$cache/dist"
  # a fixed timestamp for the wheel's entries: the same sources make the same wheel
  (cd "$root" && SOURCE_DATE_EPOCH=315532800 "$python" -m build --wheel \
     --outdir "$cache/dist" . >"$cache/wheel.log" 2>&1) \
    || { tail -40 "$cache/wheel.log" >&2; log "building the wheel failed"; exit 1; }
  wheel=$(ls "$cache"/dist/casscade-"$version"-*.whl)
  log "built $(basename "$wheel") in $(seconds "$started") s"
fi
[[ -f "$wheel" ]] || { log "no wheel at $wheel"; exit 1; }
wheel_sha=$(sha "$wheel")

connector_jars() {  # the Kafka connector's jars the pyspark wheel lacks, one a line
  (cd "$root" && PYTHONPATH="$root/deploy/local:$root" "$python" -c '
from devstack.settings import StackSettings
from devstack.spark import kafka_connector_jars
print("\n".join(str(j) for j in kafka_connector_jars(StackSettings.from_env())))')
}

# --- each image --------------------------------------------------------------------------
for name in "${images[@]}"; do
  started=$(date +%s)
  containerfile="$here/$name.Containerfile"
  image="localhost/casscade-$name"
  ctx="$cache/context/$name"
  jars=()
  if [[ $name == materializer ]]; then
    mapfile -t jars < <(connector_jars)
  fi
  inputs=$( { echo "$wheel_sha $base_sha"; sha "$containerfile" "$0";
              [[ ${#jars[@]} -eq 0 ]] || sha "${jars[@]}"; } | sha256sum | cut -d' ' -f1)
  if ! $force && [[ "$(label "$image:$version" casscade.inputs.sha256)" == "$inputs" ]]; then
    podman tag "$image:$version" "$image:latest"
    log "$image:$version is up to date (inputs $inputs), kept"
    continue
  fi

  # the build context: the wheelhouse (casscade's wheel and its dependencies' for Python 3.11),
  # and the job's jars and Spark scripts
  rm -rf "$ctx" && mkdir -p "$ctx/wheels"
  requirement="$wheel"
  [[ $name == materializer ]] && requirement="$wheel[materializer]"
  "$python" -m pip wheel --quiet --disable-pip-version-check --prefer-binary \
    --wheel-dir "$ctx/wheels" "$requirement"
  if [[ $name == materializer ]]; then
    mkdir -p "$ctx/jars" "$ctx/spark"
    cp "${jars[@]}" "$ctx/jars/"
    cp "$root/deploy/spark/submit.sh" "$root/deploy/spark/casscade_materializer.py" "$ctx/spark/"
  fi

  build_args=(--build-arg "BASE=$base_image" --build-arg "CASSCADE_VERSION=$version")
  if [[ $name == materializer ]]; then  # where the connector's jars are in the image
    in_image=$(printf '/opt/spark/jars/%s,' "${jars[@]##*/}")
    build_args+=(--build-arg "CONNECTOR_JARS=${in_image%,}")
  fi
  old=$(podman image inspect --format '{{.Id}}' "$image:$version" 2>/dev/null || true)
  log "building $image:$version ($(du -sh "$ctx" | cut -f1) of context)"
  # host network: the RUN steps reach Debian's mirror without a bridge or NAT rules here
  buildah bud --quiet --runtime "$runtime" --network host --pull-never --no-cache --force-rm \
    "${build_args[@]}" \
    --label "casscade.wheel.sha256=$wheel_sha" --label "casscade.inputs.sha256=$inputs" \
    --label "org.opencontainers.image.version=$version" \
    -f "$containerfile" -t "$image:$version" -t "$image:latest" "$ctx" >/dev/null
  new=$(podman image inspect --format '{{.Id}}' "$image:$version")
  # the image this one replaces, unless a container or another tag still holds it
  [[ -n "$old" && "$old" != "$new" ]] && podman rmi "$old" >/dev/null 2>&1 || true
  rm -rf "$ctx"
  log "built $image:$version in $(seconds "$started") s" \
      "($(podman image inspect --format '{{.Size}}' "$new" | awk '{printf "%.0f MB", $1/1e6}'))"
done
