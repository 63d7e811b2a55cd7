#!/bin/bash
# gangbench's node entrypoint: it adapts the node to two host facts kind's own entrypoint does not
# handle, then runs kind's entrypoint unchanged.
set -o errexit -o nounset -o pipefail

# 1. An engine that refuses --privileged (its bounding set lacks a capability) runs gangbench's
#    nodes with every capability it has instead; it then mounts cgroups and sysfs read-only. The
#    node's systemd, kubelet and runc need the cgroup hierarchies writable, as --privileged has them.
if [[ -n "${GANGBENCH_UNPRIVILEGED:-}" ]]; then
  while read -r _ target fstype _; do
    case "${fstype}" in
      # The engine's read-only cgroup mounts are bind mounts: only a bind remount changes them.
      cgroup|cgroup2) mount -o remount,bind,rw "${target}" || echo "gangbench-entrypoint: cannot remount ${target} rw" >&2 ;;
    esac
  done < /proc/self/mounts
  mount -o remount,rw /sys/fs/cgroup 2>/dev/null || true
  # The kubelet's OOM watcher reads the kernel log; --privileged would have brought the host's /dev.
  [[ -e /dev/kmsg ]] || mknod -m 0640 /dev/kmsg c 1 11 || ln -s /dev/console /dev/kmsg
  # Lowering a process's oom_score_adj needs CAP_SYS_RESOURCE, which such an engine withholds (it
  # is what makes it refuse --privileged): containerd must clamp pods' scores instead of failing
  # their sandboxes, as it does rootless.
  if ! grep -q '^CapBnd:.*' /proc/self/status || (( (0x$(awk '/^CapBnd:/{print $2}' /proc/self/status) >> 24 & 1) == 0 )); then
    sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml
  fi
fi

# 2. On an engine whose storage is fuse-overlayfs, the node's root filesystem is fuse and kind's
#    entrypoint would switch containerd to the fuse-overlayfs snapshotter, which needs a proxy
#    plugin this image does not carry. containerd's data lives on the /var volume, not on the root
#    filesystem: when overlayfs works there, keep it.
if [[ -z "${KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER:-}" ]] && [[ "$(stat -f -c %T /kind)" == fuse* ]]; then
  probe="$(mktemp -d /var/lib/gangbench-overlay-probe.XXXXXX)"
  mkdir -p "${probe}/l" "${probe}/u" "${probe}/w" "${probe}/m"
  if mount -t overlay -o "lowerdir=${probe}/l,upperdir=${probe}/u,workdir=${probe}/w" overlay "${probe}/m" 2>/dev/null; then
    umount "${probe}/m"
    export KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=overlayfs
  else
    export KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=native
  fi
  rm -rf "${probe}"
  echo "gangbench-entrypoint: root filesystem is fuse; containerd snapshotter ${KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER} on /var"
fi

exec /usr/local/bin/entrypoint "$@"
