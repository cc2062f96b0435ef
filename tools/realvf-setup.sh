#!/usr/bin/env bash
# Set up the realvf test tier (tests/realvf/): real kernel SR-IOV VFs of emulated igb NICs in a QEMU
# guest. Everything comes from Debian's archive:
#   - host packages: qemu-system-x86 (pinned, bookworm-backports, --no-install-recommends), seabios,
#     busybox-static, kmod, cpio, xz-utils, zstd, squashfs-tools, pci.ids (the PCI ID database upstream
#     dra-driver-sriov reads in the guest);
#   - the guest kernel: linux-image-$REALVF_KERNEL_ABI (pinned, bookworm-backports), downloaded with
#     apt-get download (never installed), unpacked with dpkg -x into
#       ${SRIOV_DRA_CACHE:-~/.cache/sriov-dra}/realvf/<kernel abi>/
#     then depmod -b and the modules the guest loads decompressed (busybox insmod cannot read .ko.xz).
# The kernel cache is keyed on the package version and the module list; a second run prints "cached"
# and does nothing; a changed module list alone is resolved again in the unpacked tree (no download).
# Nothing is written into the repository.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${SRIOV_DRA_CACHE:-$HOME/.cache/sriov-dra}
kdir="$cache/realvf/$REALVF_KERNEL_ABI"
recipe_rev=1   # bump when the kernel unpacking recipe changes in a way that must redo it

# The modules the guest's init loads (with their dependencies, resolved by modprobe on the host), in
# this order: the igb PFs probe before virtio_net, so the guest's management NIC (tests/realvf/vm.py,
# QEMU user networking to the host's API server) is named after them.
modules=(igb igbvf vfio vfio_pci vfio_iommu_type1 veth squashfs overlay virtio_blk virtio_pci virtio_net)

log() { printf '[realvf-setup] %s\n' "$*" >&2; }
die() { printf '[realvf-setup] ERROR: %s\n' "$*" >&2; exit 1; }

apt_updated=""
apt_update() {
  [ -n "$apt_updated" ] && return 0
  log "apt-get update"
  apt-get update -qq
  apt_updated=1
}

# --- bookworm-backports apt source ---------------------------------------------------------------
ensure_backports_source() {
  if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    return 0
  fi
  log "adding the bookworm-backports apt source (/etc/apt/sources.list.d/bookworm-backports.sources)"
  cat > /etc/apt/sources.list.d/bookworm-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt_updated=""
}

installed_version() { dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' "$1" 2>/dev/null | awk '$1=="ii"{print $2}'; }

# --- host packages --------------------------------------------------------------------------------
install_packages() {
  local need=() p
  for p in seabios busybox-static kmod cpio xz-utils zstd squashfs-tools pci.ids; do
    [ -n "$(installed_version "$p")" ] || need+=("$p")
  done
  local qemu_spec=""
  if [ "$(installed_version qemu-system-x86)" != "$REALVF_QEMU_VERSION" ]; then
    qemu_spec="qemu-system-x86=$REALVF_QEMU_VERSION"
  fi
  if [ ${#need[@]} -eq 0 ] && [ -z "$qemu_spec" ]; then
    log "host packages: cached (qemu-system-x86 $REALVF_QEMU_VERSION, seabios, busybox-static, kmod, cpio, xz-utils, zstd, squashfs-tools, pci.ids)"
    return 0
  fi
  [ "$(id -u)" = 0 ] || die "missing Debian packages (${need[*]} $qemu_spec); install them as root (see tools/realvf-setup.sh)"
  ensure_backports_source
  apt_update
  if [ ${#need[@]} -gt 0 ]; then
    log "installing: ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
      || die "apt-get install failed for ${need[*]}"
  fi
  if [ -n "$qemu_spec" ]; then
    # -t: QEMU's own dependencies (qemu-system-common, -data, ...) come from backports too.
    log "installing: $qemu_spec from bookworm-backports"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -t bookworm-backports "$qemu_spec" >/dev/null \
      || die "apt-get install $qemu_spec failed (apt-cache policy qemu-system-x86 lists what bookworm-backports has; update REALVF_QEMU_VERSION in tools/versions.env)"
  fi
}

# --- guest kernel ---------------------------------------------------------------------------------
kernel_key() {
  printf 'linux-image-%s=%s recipe=%s modules=%s\n' \
    "$REALVF_KERNEL_ABI" "$REALVF_KERNEL_VERSION" "$recipe_rev" "${modules[*]}"
}

# Resolve each module of $modules with its dependencies in the unpacked tree $1, decompress those
# files, then depmod again so that modules.dep names the plain .ko files. load-order.txt lists them
# dependencies first, once each. Files decompressed by an earlier run are already plain .ko files.
resolve_modules() {
  local root=$1 order="$1/load-order.txt" m path
  depmod -b "$root" "$REALVF_KERNEL_ABI"
  : > "$order"
  for m in "${modules[@]}"; do
    modprobe -d "$root" -S "$REALVF_KERNEL_ABI" --show-depends "$m" >"$root/.deps" \
      || die "guest kernel $REALVF_KERNEL_ABI has no module $m"
    awk '$1=="insmod"{print $2}' "$root/.deps" \
      | while read -r path; do
          grep -qxF "$path" "$order" || echo "$path" >> "$order"
        done
    # A built-in module prints "builtin <name>" and needs no file.
  done
  rm -f "$root/.deps"
  local out=()
  while read -r path; do
    case "$path" in
      *.ko.xz) xz -d -f "$path"; out+=("${path%.xz}") ;;
      *.ko.zst) zstd -q -d --rm -f "$path"; out+=("${path%.zst}") ;;
      *.ko) out+=("$path") ;;
      *) die "unexpected module file $path" ;;
    esac
  done < "$order"
  printf '%s\n' "${out[@]#"$root"}" > "$order"
  depmod -b "$root" "$REALVF_KERNEL_ABI"
  log "guest kernel $REALVF_KERNEL_ABI ready in $kdir (${#out[@]} modules to load)"
}

fetch_kernel() {
  local stamp
  stamp=$(cat "$kdir/.stamp" 2>/dev/null || true)
  if [ "$stamp" = "$(kernel_key)" ]; then
    log "guest kernel $REALVF_KERNEL_ABI ($REALVF_KERNEL_VERSION): cached in $kdir"
    return 0
  fi
  if [ -n "$stamp" ] && [ "${stamp%% modules=*}" = "$(kernel_key | sed 's/ modules=.*//')" ]; then
    log "guest kernel $REALVF_KERNEL_ABI ($REALVF_KERNEL_VERSION): cached; resolving the new module list"
    rm -f "$kdir/.stamp"
    resolve_modules "$kdir"
    kernel_key > "$kdir/.stamp"
    return 0
  fi
  local pkg="linux-image-$REALVF_KERNEL_ABI" tmp
  tmp=$(mktemp -d "$cache/realvf/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  ensure_backports_source
  apt_update
  log "downloading $pkg=$REALVF_KERNEL_VERSION (about 100 MB)"
  (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$pkg=$REALVF_KERNEL_VERSION") \
    || die "apt-get download $pkg=$REALVF_KERNEL_VERSION failed (apt-cache policy $pkg lists what bookworm-backports has; update REALVF_KERNEL_* in tools/versions.env)"
  log "unpacking with dpkg -x"
  dpkg -x "$tmp"/linux-image-*.deb "$tmp/root"
  rm -f "$tmp"/linux-image-*.deb
  [ -f "$tmp/root/boot/vmlinuz-$REALVF_KERNEL_ABI" ] || die "$pkg has no boot/vmlinuz-$REALVF_KERNEL_ABI"
  resolve_modules "$tmp/root"
  rm -rf "$kdir"
  mkdir -p "$(dirname "$kdir")"
  mv "$tmp/root" "$kdir"
  kernel_key > "$kdir/.stamp"
  rm -rf "$tmp"
  trap - EXIT
}

mkdir -p "$cache/realvf"
install_packages
fetch_kernel
