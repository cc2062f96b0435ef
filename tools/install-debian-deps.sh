#!/usr/bin/env bash
# Install the Debian packages the tests and the lab need, only when something is missing.
# iproute2: network namespaces and veth; python3-venv: the project venv; git: the Go module
# proxy fallbacks and ansible-galaxy; golang is NOT taken from Debian (bookworm's 1.19 is too old):
# the Go toolchain >= 1.26 must already be on PATH. Real lab nodes (lab/sriov_dra_lab/real_node.py): runc (the OCI
# runtime containerd calls), busybox-static (the workload image's /bin/busybox), gcc and libc6-dev
# (the static pause binary, tools/pause.c), iptables (the Service-IP DNAT to the API server inside each
# node's namespace) and procps (sysctl, route_localnet inside the node's namespace). Images without a registry (tools/build-image.sh): mmdebstrap
# (the bookworm base root filesystem) and buildah (builds collection/image/Containerfile, daemonless).
# Pushing it (tools/push-image.sh): skopeo. The registry the tests push to on loopback and the lab's bridge:
# docker-registry (the distribution registry; its own system service is not used, so it is stopped and
# disabled where systemd runs) and htpasswd (apache2-utils) for its credentials.
set -euo pipefail
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v git >/dev/null || need+=(git)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
command -v nsenter >/dev/null || need+=(util-linux)
command -v runc >/dev/null || need+=(runc)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need+=(busybox-static)
command -v gcc >/dev/null || need+=(gcc)
command -v iptables >/dev/null || [ -x /usr/sbin/iptables ] || need+=(iptables)
command -v sysctl >/dev/null || [ -x /usr/sbin/sysctl ] || need+=(procps)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v buildah >/dev/null || need+=(buildah)
command -v skopeo >/dev/null || need+=(skopeo)
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v htpasswd >/dev/null || need+=(apache2-utils)
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || [ -n "$(find /usr/lib -name libc.a -print -quit 2>/dev/null)" ] || need+=(libc6-dev)
if [ ${#need[@]} -eq 0 ]; then
  echo "[setup] Debian packages present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "[setup] ERROR: missing Debian packages (${need[*]}); install them as root: apt-get install ${need[*]}" >&2
  exit 1
fi
echo "[setup] installing Debian packages: ${need[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
if [[ " ${need[*]} " == *" docker-registry "* ]] && [ -d /run/systemd/system ]; then
  systemctl disable --now docker-registry.service >/dev/null 2>&1 || true  # the tests start their own
fi
