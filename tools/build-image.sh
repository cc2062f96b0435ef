#!/usr/bin/env bash
# Build the container images the real lab nodes run, without any registry:
#   sriov-dra     collection/image/Containerfile, built by Debian's buildah (daemonless) on a local base:
#                 a Debian bookworm root filesystem (python3 3.11 + python3-venv) made by mmdebstrap from
#                 Debian's archive and passed as --build-arg PYTHON_IMAGE (the same file builds on the
#                 public python image by default);
#   multus thin   sriov-dra.local/multus-cni:$MULTUS_VERSION        (ENTRYPOINT /thin_entrypoint)
#   multus thick  sriov-dra.local/multus-cni:$MULTUS_VERSION-thick  (ENTRYPOINT multus-daemon)
#                 assembled from scratch from the pinned binaries (tools/build-binaries.sh multus multus-tools)
#                 at upstream's paths: /usr/src/multus-cni/bin/<every binary>, /install_multus, /thin_entrypoint;
#                 named locally (not upstream's name:tag, whose digest differs: a copied reference would
#                 pull upstream's image, or nothing, anywhere else).
#
# Everything lives under ${SRIOV_DRA_CACHE:-~/.cache/sriov-dra}/image:
#   base/<key>.tar          the root filesystem, keyed on suite, variant, package list and recipe
#   storage/, runroot/      buildah's own store (overlay, vfs when overlay cannot mount)
#   out/<image>-<key>.oci.tar + .digest   OCI archives and their manifest digests
#   images.json             what the lab imports: name, manifest digest, archive, reference name@digest
# An image is rebuilt only when its key changes: the Containerfile and every file its COPY lines name
# (sriov-dra), the pinned binaries (multus). A warm run does no build.
# Usage: build-image.sh [--force] [--product]
#   --product  the sriov-dra image only (no Multus, no Go binaries needed; images.json is left as it is),
#              then print "<OCI archive> <manifest digest>" on stdout (tools/push-image.sh reads it)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${SRIOV_DRA_CACHE:-$HOME/.cache/sriov-dra}
top=$cache/image
recipe_rev=1   # bump when this recipe changes in a way that must rebuild

SUITE=bookworm
VARIANT=essential           # Essential: yes packages only (no apt): the image never installs packages
PACKAGES=python3,python3-venv,libstdc++6   # libstdc++6: grpcio's extension module links it
MMDEBSTRAP_OPTS=(
  --aptopt='APT::Install-Recommends "false"'
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
)
PRODUCT_NAME=sriov-dra.local/sriov-dra:$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/pyproject.toml" | head -1)
MULTUS_REPO=sriov-dra.local/multus-cni

log() { printf '[image] %s\n' "$*" >&2; }
die() { printf '[image] ERROR: %s\n' "$*" >&2; exit 1; }

force="" product_only=""
for arg in "$@"; do
  case $arg in
    --force) force=1 ;;
    --product) product_only=1 ;;
    *) die "unknown argument $arg (usage: build-image.sh [--force] [--product])" ;;
  esac
done

for tool in mmdebstrap buildah; do
  command -v "$tool" >/dev/null || die "$tool not found (Debian package $tool; tools/install-debian-deps.sh installs it)"
done
[ "$(id -u)" = 0 ] || die "building images needs root (mmdebstrap root mode, buildah chroot isolation)"

mkdir -p "$top/base" "$top/out"
driver_file=$top/storage-driver
if [ ! -s "$driver_file" ]; then
  # overlay needs a kernel overlayfs over the cache's filesystem; vfs always works (full copies).
  probe=$(mktemp -d "$top/probe.XXXXXX")
  mkdir -p "$probe"/{l,u,w,m}
  if mount -t overlay overlay -o "lowerdir=$probe/l,upperdir=$probe/u,workdir=$probe/w" "$probe/m" 2>/dev/null; then
    umount "$probe/m"; echo overlay > "$driver_file"
  else
    echo vfs > "$driver_file"
  fi
  rm -rf "$probe"
fi
bah() { buildah --root "$top/storage" --runroot "$top/runroot" --storage-driver "$(cat "$driver_file")" "$@"; }

sha() { sha256sum | cut -c1-64; }

# tree_hash PATH...: one hash over the contents and modes of the files under PATH (relative to the
# repository), symlinks followed (the manifests under runtime/ are links into roles/), __pycache__,
# *.pyc and *.egg-info (an editable install's metadata, not in git) left out, in a stable order.
tree_hash() {
  (cd "$repo" && find -L "$@" \( -name __pycache__ -o -name '*.pyc' -o -name '*.egg-info' \) -prune -o -type f -print \
    | LC_ALL=C sort | while IFS= read -r f; do
      printf '%s %s %s\n' "$f" "$(stat -L -c %a "$f")" "$(sha256sum < "$f" | cut -c1-64)"
    done) | sha
}

# copy_sources: the source paths of the Containerfile's COPY lines (not COPY --from) that decide what the
# image holds. Left out: README.md (only the wheel's long description) and roles/ (the wheel reads it
# only through runtime/'s manifest links, which tree_hash follows), so editing either does not rebuild.
copy_sources() {
  sed -n 's/^COPY \([^-].*\)$/\1/p' "$repo/collection/image/Containerfile" | while read -r -a words; do
    unset 'words[${#words[@]}-1]'; printf '%s\n' "${words[@]}"
  done | grep -vxE 'README\.md|roles' | sort -u
}

# ------------------------------------------------------------------ base root filesystem
base_key=$(printf 'suite=%s variant=%s packages=%s opts=%s recipe=%s\n' \
  "$SUITE" "$VARIANT" "$PACKAGES" "${MMDEBSTRAP_OPTS[*]}" "$recipe_rev" | sha | cut -c1-16)
base_tar=$top/base/$SUITE-$base_key.tar
base_image=localhost/sriov-dra-base:$SUITE-$base_key
if [ ! -s "$base_tar" ]; then
  started=$(date +%s)
  log "base: mmdebstrap --variant=$VARIANT $SUITE with $PACKAGES (about 40 s; Debian's archive)"
  mmdebstrap --variant="$VARIANT" --include="$PACKAGES" "${MMDEBSTRAP_OPTS[@]}" "$SUITE" "$base_tar.tmp" \
    > "$top/base/mmdebstrap.log" 2>&1 \
    || { tail -20 "$top/base/mmdebstrap.log" >&2; die "mmdebstrap $SUITE failed (is Debian's archive reachable?); log: $top/base/mmdebstrap.log"; }
  mv "$base_tar.tmp" "$base_tar"
  log "base: root filesystem made in $(( $(date +%s) - started ))s"
fi
if ! bah inspect --type image "$base_image" >/dev/null 2>&1; then
  log "base: importing $base_tar as $base_image"
  c=$(bah from --pull=never scratch)
  bah add --quiet "$c" "$base_tar" / >/dev/null
  bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/sh "$c"
  bah commit --quiet --rm --timestamp 0 "$c" "$base_image" >/dev/null
fi

# ------------------------------------------------------------------ helpers for the outputs
# push IMAGE NAME OUT: write OUT.oci.tar (ref NAME) and OUT.digest (the manifest digest).
push() {
  bah push --quiet --format oci --digestfile "$3.digest.tmp" "$1" "oci-archive:$3.oci.tar.tmp:$2" >/dev/null
  mv "$3.oci.tar.tmp" "$3.oci.tar"; mv "$3.digest.tmp" "$3.digest"
  bah rmi "$1" >/dev/null 2>&1 || true
}
fresh() { [ -z "$force" ] && [ -s "$1.oci.tar" ] && [ -s "$1.digest" ]; }
entries=()
record() { entries+=("$(printf '{"key": "%s", "name": "%s", "digest": "%s", "archive": "%s"}' "$1" "$2" "$(cat "$3.digest")" "$3.oci.tar")"); }

# ------------------------------------------------------------------ sriov-dra
mapfile -t sources < <(copy_sources)
[ ${#sources[@]} -gt 0 ] || die "no COPY sources found in collection/image/Containerfile"
product_key=$(printf '%s\n' "$base_key" "$PRODUCT_NAME" "$recipe_rev" "$(tree_hash collection/image "${sources[@]}")" | sha | cut -c1-16)
product_out=$top/out/sriov-dra-$product_key
if fresh "$product_out"; then
  log "sriov-dra: cached ($product_key)"
else
  log "sriov-dra: buildah build -f collection/image/Containerfile on $base_image (pip install from PyPI)"
  started=$(date +%s)
  # pip in the build stage trusts what this machine trusts (Debian's pip reads this bundle; an HTTPS proxy's
  # CA lives there): bound read-only into the RUN steps only, never into a layer.
  trust=()
  ca=/etc/ssl/certs/ca-certificates.crt
  [ -s "$ca" ] && trust=(--volume "$ca:$ca:ro")
  (cd "$repo" && bah build --quiet --pull=never --isolation chroot --layers=false --format oci "${trust[@]}" \
    --ignorefile collection/image/Containerfile.dockerignore \
    --build-arg "PYTHON_IMAGE=$base_image" -f collection/image/Containerfile \
    -t "localhost/sriov-dra:$product_key" .) >/dev/null || die "buildah build of collection/image/Containerfile failed"
  push "localhost/sriov-dra:$product_key" "$PRODUCT_NAME" "$product_out"
  log "sriov-dra: built in $(( $(date +%s) - started ))s"
fi
record sriov-dra "$PRODUCT_NAME" "$product_out"
if [ -n "$product_only" ]; then
  printf '%s %s\n' "$product_out.oci.tar" "$(cat "$product_out.digest")"
  exit 0
fi

# ------------------------------------------------------------------ multus thin and thick
mbin=$cache/multus/$MULTUS_VERSION/bin
tbin=$cache/multus-tools/$MULTUS_VERSION/bin
for b in "$mbin/multus" "$mbin/multus-shim" "$mbin/multus-daemon" "$tbin/install_multus" "$tbin/thin_entrypoint" "$tbin/passthru"; do
  [ -x "$b" ] || die "$b missing: build it with 'bash tools/build-binaries.sh multus multus-tools'"
done
multus_key=$(for b in "$mbin"/multus "$mbin"/multus-shim "$mbin"/multus-daemon "$tbin"/install_multus "$tbin"/thin_entrypoint "$tbin"/passthru; do
  sha256sum < "$b"; done | { cat; echo "recipe=$recipe_rev"; echo "multus-layout=2"; echo "name=$MULTUS_REPO"; } \
  | sha | cut -c1-16)  # layout 2: /var/run -> /run; the name is in the archive's index
for flavour in thin thick; do
  if [ $flavour = thin ]; then name=$MULTUS_REPO:$MULTUS_VERSION; entry='["/thin_entrypoint"]'
  else name=$MULTUS_REPO:$MULTUS_VERSION-thick; entry='["/usr/src/multus-cni/bin/multus-daemon"]'; fi
  out=$top/out/multus-$flavour-$multus_key
  if fresh "$out"; then log "multus $flavour: cached ($multus_key)"; else
    log "multus $flavour: assembling $name from the pinned binaries"
    stage=$(mktemp -d "$top/stage.XXXXXX")
    mkdir -p "$stage/usr/src/multus-cni/bin" "$stage/tmp" "$stage/etc" "$stage/run" "$stage/var"
    chmod 1777 "$stage/tmp"
    # as in upstream's Debian-based images: the runtime's CNI_NETNS (/var/run/netns/...) resolves in the container
    ln -s ../run "$stage/var/run"
    cp "$mbin"/multus "$mbin"/multus-shim "$mbin"/multus-daemon "$tbin"/install_multus "$tbin"/thin_entrypoint "$tbin"/passthru \
      "$stage/usr/src/multus-cni/bin/"
    cp "$tbin/install_multus" "$tbin/thin_entrypoint" "$stage/"
    printf 'root:x:0:0:root:/:/sbin/nologin\n' > "$stage/etc/passwd"
    printf 'root:x:0:\n' > "$stage/etc/group"
    c=$(bah from --pull=never scratch)
    bah copy --quiet "$c" "$stage/." / >/dev/null
    bah config --entrypoint "$entry" --workingdir / \
      --label org.opencontainers.image.title=multus-cni --label "org.opencontainers.image.version=$MULTUS_VERSION" "$c"
    bah commit --quiet --rm --timestamp 0 "$c" "localhost/multus-$flavour:$multus_key" >/dev/null
    rm -rf "$stage"
    push "localhost/multus-$flavour:$multus_key" "$name" "$out"
  fi
  record "multus-$flavour" "$name" "$out"
done

# ------------------------------------------------------------------ index for the lab
{
  printf '{"images": [\n'
  for i in "${!entries[@]}"; do printf '  %s%s\n' "${entries[$i]}" "$([ "$i" -lt $(( ${#entries[@]} - 1 )) ] && echo ,)"; done
  printf ']}\n'
} > "$top/images.json.tmp"
mv "$top/images.json.tmp" "$top/images.json"
# Outputs of older keys are dropped, keeping the three newest of each image (each archive is tens of MB;
# another checkout or a test importing an archive at this moment may still use a recent one).
for prefix in sriov-dra multus-thin multus-thick; do
  ls -t "$top/out/$prefix"-*.oci.tar 2>/dev/null | tail -n +4 | while IFS= read -r old; do
    rm -f "$old" "${old%.oci.tar}.digest"
  done
done
find "$top/base" -maxdepth 1 -type f -name '*.tar' ! -name "$SUITE-$base_key.tar" -delete
log "images ready ($top/images.json): $PRODUCT_NAME@$(cat "$product_out.digest")"
