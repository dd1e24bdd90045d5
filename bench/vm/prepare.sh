#!/usr/bin/env bash
# Prepares `glass serve --isolation vm`: installs QEMU (Debian's qemu-system-x86) if missing and
# puts a guest kernel with the virtio modules its guest loads into DIR [default:
# $GLASS_VM_GUEST, else target/vm-guest]. The kernel is Debian's linux-image-amd64 (fetched with
# apt-get download, unpacked, nothing installed on this machine); Glass writes the guest's
# initramfs itself at the first start. Needs /dev/kvm to be useful: it says so if it is missing.
#
#   bench/vm/prepare.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-${GLASS_VM_GUEST:-target/vm-guest}}
modules=(virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console
         failover net_failover virtio_net)

export DEBIAN_FRONTEND=noninteractive
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends qemu-system-x86
fi

if [ -f "$dir/vmlinuz" ] && [ -f "$dir/modules/virtio_console.ko" ] && [ -f "$dir/modules/virtio_net.ko" ]; then
    echo "guest kernel: $dir/vmlinuz (already there)"
else
    mkdir -p "$dir/modules"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # linux-image-amd64 is a metapackage: the kernel is the package it depends on.
    package=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
    if [ -z "$package" ]; then
        apt-get update -qq
        package=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
    fi
    # Stale package lists name a version the mirror no longer has: update them and try again.
    if ! (cd "$work" && apt-get download -qq "$package" 2>/dev/null); then
        apt-get update -qq
        package=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
        (cd "$work" && apt-get download -qq "$package" 2>/dev/null)
    fi
    dpkg-deb -x "$work"/"$package"_*.deb "$work/x"
    cp "$work"/x/boot/vmlinuz-* "$dir/vmlinuz"
    for m in "${modules[@]}"; do
        found=$(find "$work/x/lib/modules" -name "$m.ko*" | head -1)
        case "$found" in
            "") echo "no $m module in $package: assuming it is built in" ;;
            *.ko) cp "$found" "$dir/modules/$m.ko" ;;
            *.ko.xz) xz -dc "$found" > "$dir/modules/$m.ko" ;;
            *.ko.zst) zstd -qdc "$found" > "$dir/modules/$m.ko" ;;
            *) echo "unknown module file $found" >&2; exit 1 ;;
        esac
    done
    echo "guest kernel: $dir/vmlinuz ($package)"
fi

if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
    echo "KVM: /dev/kvm is usable"
else
    echo "KVM: /dev/kvm is missing or not usable here: --isolation vm will refuse to start"
fi
