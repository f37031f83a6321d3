#!/bin/sh
# Makes the base docker/Dockerfile starts from, python:3.11.7-slim-bookworm, on a machine that can
# reach Debian's archive but no image registry: Debian bookworm (debootstrap's minbase) with Debian's
# CPython 3.11 (python3, python3-venv), slimmed as Debian's own images are, imported under that tag.
# Python is 3.11.2 at /usr/bin/python3, not 3.11.7 at /usr/local/bin as in the real image: the
# Dockerfile needs only `python3` with venv. The image's label says it was made here.
#     sudo sh docker/make_base.sh [MIRROR]        # needs debootstrap and podman (or ENGINE=docker)
set -eu
engine=${ENGINE:-podman}
tag=docker.io/library/python:3.11.7-slim-bookworm
mirror=${1:-http://deb.debian.org/debian}
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT

debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" "$mirror"

# Slim as Debian's images: apt keeps no package caches, dpkg installs no docs, man pages or translations.
cat > "$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
cat > "$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF

# The point release's updates and security fixes, as the real image carries them.
cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
chroot "$rootfs" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get upgrade -y -q'

# What was installed before the dpkg excludes existed, and apt's lists.
find "$rootfs/usr/share/doc" -type f ! -name copyright -delete
rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* \
       "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb

tar -C "$rootfs" -c . | "$engine" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    --change 'LABEL org.luabridge.base="debootstrap bookworm minbase + python3, python3-venv (docker/make_base.sh)"' \
    - "$tag"
