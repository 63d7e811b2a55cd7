package nodeimage

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gangbench/gangbench/internal/proc"
)

// DefaultSuite is the Debian release of the node's root filesystem. Bookworm's systemd (252) boots
// on a cgroup v1 host, as these machines are; trixie's (257, kind's own base) deprecates cgroup v1.
const DefaultSuite = "bookworm"

// rootfsPackages are what kind's base image installs (images/base/Dockerfile) less what a node
// started by gangbench never uses (NFS, iSCSI, fuse-overlayfs, pigz, e2fsprogs): systemd to run the
// node, the network tools the kubelet, kube-proxy and the entrypoint call, and jq for the
// entrypoint's and kind's scripts.
var rootfsPackages = []string{
	"systemd", "systemd-sysv",
	"conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount", "kmod",
	"libseccomp2", "bash", "ca-certificates", "curl", "jq", "procps",
}

// rootfsRevision changes when the post-processing below changes, so cached trees are rebuilt.
const rootfsRevision = "1"

// rootfsKey names a cached root filesystem: the suite and a hash of what went into it.
func rootfsKey(suite string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", rootfsRevision, suite, strings.Join(rootfsPackages, ","))
	return suite + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// DebianMirror returns the first Debian archive URI this machine's apt sources use for suite
// (deb822 .sources files first, then sources.list lines), so debootstrap reads from whatever
// mirror apt already uses here.
func DebianMirror(suite string) (string, error) {
	var files []string
	for _, g := range []string{"/etc/apt/sources.list.d/*.sources", "/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if u := mirrorIn(string(b), suite, strings.HasSuffix(f, ".sources")); u != "" {
			return u, nil
		}
	}
	return "", fmt.Errorf("no Debian archive for %s in this machine's apt sources (%s): pass the mirror URL explicitly (--debian-mirror)", suite, strings.Join(files, ", "))
}

// mirrorIn finds the URI serving suite's main component in one sources file.
func mirrorIn(text, suite string, deb822 bool) string {
	if !deb822 {
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			// deb [options] URI suite components...
			if len(f) < 3 || f[0] != "deb" {
				continue
			}
			f = f[1:]
			if strings.HasPrefix(f[0], "[") {
				for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
					f = f[1:]
				}
				if len(f) == 0 { // unclosed [options]: a malformed line
					continue
				}
				f = f[1:]
			}
			if len(f) >= 3 && f[1] == suite && strings.Contains(" "+strings.Join(f[2:], " ")+" ", " main ") {
				return f[0]
			}
		}
		return ""
	}
	// Stanzas are separated by blank (or whitespace-only) lines; CRLF files parse the same.
	var stanzas []map[string]string
	cur := map[string]string{}
	for line := range strings.Lines(strings.ReplaceAll(text, "\r\n", "\n")) {
		if strings.TrimSpace(line) == "" {
			if len(cur) > 0 {
				stanzas = append(stanzas, cur)
			}
			cur = map[string]string{}
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(strings.TrimSpace(k), "#") {
			cur[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if len(cur) > 0 {
		stanzas = append(stanzas, cur)
	}
	for _, fields := range stanzas {
		if strings.EqualFold(fields["Enabled"], "no") {
			continue
		}
		if !strings.Contains(" "+fields["Types"]+" ", " deb ") || !strings.Contains(" "+fields["Components"]+" ", " main ") {
			continue
		}
		if strings.Contains(" "+fields["Suites"]+" ", " "+suite+" ") {
			if uris := strings.Fields(fields["URIs"]); len(uris) > 0 {
				return uris[0]
			}
		}
	}
	return ""
}

// buildRootfs runs debootstrap into work/root, applies kind's base image clean-up and writes the
// tree as the gzipped tar out. It needs root (debootstrap mounts and chroots).
func buildRootfs(ctx context.Context, suite, mirror, work, out string, log func(string)) error {
	if os.Geteuid() != 0 {
		return errors.New("building the node image's root filesystem runs debootstrap, which needs root: run as root, or pass a prebuilt node image with --node-image")
	}
	deb, err := exec.LookPath("debootstrap")
	if err != nil {
		return errors.New("debootstrap is not installed (apt-get install debootstrap); it builds the node image's Debian root filesystem")
	}
	root := filepath.Join(work, "root")
	// debootstrap mounts /proc and /sys inside the tree while it installs and unmounts them when it
	// ends; killed (Ctrl-C), it leaves them mounted, and the caller's RemoveAll of work must not
	// descend into the host's /proc or /sys.
	defer unmountUnder(root)
	args := []string{"--variant=minbase", "--include=" + strings.Join(rootfsPackages, ","), suite, root, mirror}
	cmd := exec.CommandContext(ctx, deb, args...)
	// debootstrap is a shell script whose dpkg, wget and chrooted maintainer scripts keep writing
	// into the tree when only the script is killed; so it runs in a process group of its own, a
	// cancel kills the group, and the tree is removed only once the group is gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	defer func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = proc.WaitGroupGone(context.Background(), cmd.Process.Pid, 30*time.Second)
		}
	}()
	logPath := filepath.Join(work, "debootstrap.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	err = cmd.Run()
	lf.Close()
	if err != nil {
		tail, _ := os.ReadFile(logPath)
		if len(tail) > 3000 {
			tail = tail[len(tail)-3000:]
		}
		return fmt.Errorf("debootstrap %s (mirror %s): %w\n%s", suite, mirror, err, tail)
	}
	log("debootstrap " + suite + " done")
	if err := kindCleanup(root); err != nil {
		return fmt.Errorf("root filesystem clean-up: %w", err)
	}
	return tarTree(root, "", out, []string{"dev", "proc", "sys", "run", "tmp"})
}

// kindCleanup is the clean-up of kind's base image Dockerfile: no unit starts unless kind's files
// enable it (a node runs systemd, containerd and the kubelet, nothing else), journald does not
// read the host's kmsg, and apt's caches are dropped.
func kindCleanup(root string) error {
	var errs []error
	rm := func(glob string) {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			errs = append(errs, err)
			return
		}
		for _, p := range m {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	rm("lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service")
	rm("lib/systemd/system/multi-user.target.wants/*")
	rm("etc/systemd/system/*.wants/*")
	rm("lib/systemd/system/local-fs.target.wants/*")
	rm("lib/systemd/system/sockets.target.wants/*udev*")
	rm("lib/systemd/system/sockets.target.wants/*initctl*")
	rm("lib/systemd/system/basic.target.wants/*")
	rm("var/cache/apt/archives/*.deb")
	rm("var/lib/apt/lists/*")
	rm("var/log/*.log")
	f, err := os.OpenFile(filepath.Join(root, "etc/systemd/journald.conf"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		errs = append(errs, err)
	} else {
		_, err = f.WriteString("ReadKMsg=no\n")
		errs = append(errs, err, f.Close())
	}
	return errors.Join(errs...)
}

// unmountUnder lazily unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = unix.Unmount(points[i], unix.MNT_DETACH)
	}
}
