package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/gangbench/gangbench/clusters/kind/nodeimage"
)

// kind starts every node with --privileged. Some engines refuse that: a Docker Engine whose own
// capability bounding set lacks a capability (CAP_SYS_RESOURCE on these machines) asks runc for
// all capabilities anyway and fails with "unable to apply caps: operation not permitted". Such an
// engine still runs a container with every capability it does have, seccomp and AppArmor off,
// /proc and /sys unmasked and every device allowed, which is what a node needs; gangbench's node
// entrypoint then remounts the cgroup hierarchies writable (see nodeimage/entrypoint.sh).

// capNames are the capabilities by number (linux/capability.h), for --cap-drop.
var capNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
	"LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
	"MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
	"CHECKPOINT_RESTORE",
}

// missingCaps lists the capabilities absent from a CapBnd mask of /proc/<pid>/status, among those
// the engine knows (the first 38: what Docker 20.10 grants with --cap-add=ALL).
func missingCaps(capBnd string) ([]string, error) {
	mask, err := strconv.ParseUint(strings.TrimSpace(capBnd), 16, 64)
	if err != nil {
		return nil, fmt.Errorf("capability bounding set %q: %w", capBnd, err)
	}
	var out []string
	for i, n := range capNames[:38] {
		if mask&(1<<i) == 0 {
			out = append(out, n)
		}
	}
	return out, nil
}

// boundingSet reads this process's capability bounding set: a local engine's daemon was started
// from the same init and lacks the same capabilities (the probe below checks it).
func boundingSet() (string, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("no CapBnd line in /proc/self/status")
}

// unprivilegedArgs replace --privileged for an engine that refuses it.
func unprivilegedArgs(drop []string) []string {
	args := []string{"--cap-add=ALL"}
	for _, c := range drop {
		args = append(args, "--cap-drop="+c)
	}
	return append(args, "--security-opt=systempaths=unconfined", "--device-cgroup-rule=a *:* rwm", "-e", nodeimage.UnprivilegedEnv+"=1")
}

// PrivilegeError says the engine can run no kind node, and why.
type PrivilegeError struct {
	Engine                   string
	Privileged, Capabilities error
}

func (e *PrivilegeError) Error() string {
	return fmt.Sprintf("%s cannot run kind nodes: it refuses privileged containers (%v), and containers with every capability it has too (%v); kind needs one of the two (check the engine's security settings, or use --provider local)", e.Engine, e.Privileged, e.Capabilities)
}

// ProbePrivilege finds how the engine can run kind nodes, with a throwaway container of image
// (the node image, so nothing is pulled) that runs /bin/true. It returns nil when --privileged
// works, the arguments to use instead when only the capability form does, and a *PrivilegeError
// when neither does. The container is removed either way (--rm).
func ProbePrivilege(ctx context.Context, run Runner, engine, image string) ([]string, error) {
	try := func(args ...string) error {
		argv := append([]string{"run", "--rm", "--entrypoint", "/bin/true"}, args...)
		return run(ctx, io.Discard, engine, append(argv, image)...)
	}
	perr := try("--privileged")
	if perr == nil {
		return nil, nil
	}
	bnd, err := boundingSet()
	if err != nil {
		return nil, &PrivilegeError{Engine: engine, Privileged: perr, Capabilities: err}
	}
	drop, err := missingCaps(bnd)
	if err != nil {
		return nil, &PrivilegeError{Engine: engine, Privileged: perr, Capabilities: err}
	}
	args := unprivilegedArgs(drop)
	if cerr := try(args...); cerr != nil {
		return nil, &PrivilegeError{Engine: engine, Privileged: perr, Capabilities: cerr}
	}
	return args, nil
}

// kindEnvMu serialises the environment changes below: the environment is process-wide, and kind
// reads it (PATH to find its engine binary, its network variable) while it creates nodes.
var kindEnvMu sync.Mutex

// networkEnv is kind's knob for the docker network its nodes join (kind's default, "kind", is shared
// by every kind cluster on the machine and never deleted by kind).
const networkEnv = "KIND_EXPERIMENTAL_DOCKER_NETWORK"

// clusterNetwork is the network a cluster's nodes get: their own, so delete can remove it. Only
// kind's docker provider takes the knob; other engines use kind's default network.
func clusterNetwork(engine, cluster string) string {
	if engine != "docker" {
		return ""
	}
	return "gangbench-" + cluster
}

// withKindEnv runs fn (a kind create) with the cluster's network and, when args is not nil, the
// engine shim of withEngineShim.
func withKindEnv(engine string, args []string, network string, fn func() error) error {
	kindEnvMu.Lock()
	defer kindEnvMu.Unlock()
	if network != "" {
		old, had := os.LookupEnv(networkEnv)
		if err := os.Setenv(networkEnv, network); err != nil {
			return err
		}
		defer func() {
			if had {
				os.Setenv(networkEnv, old)
			} else {
				os.Unsetenv(networkEnv)
			}
		}()
	}
	return withEngineShim(engine, args, fn)
}

// withEngineShim (called with kindEnvMu held) runs fn (a kind create) with engine resolving to a script that replaces kind's
// --privileged by args in `run` commands and passes every other command through unchanged. kind
// takes no command runner of ours (its Cmder is fixed), so the only seam is the engine's name on
// PATH; the script lives in a temp dir removed afterwards and PATH is restored.
func withEngineShim(engine string, args []string, fn func() error) error {
	if args == nil {
		return fn()
	}
	real, err := exec.LookPath(engine)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "gangbench-engine-shim-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, engine), []byte(shimScript(real, args)), 0o755); err != nil {
		return err
	}
	old := os.Getenv("PATH")
	if err := os.Setenv("PATH", dir+string(os.PathListSeparator)+old); err != nil {
		return err
	}
	defer os.Setenv("PATH", old)
	return fn()
}

// shimScript is the POSIX sh engine wrapper of withEngineShim.
func shimScript(real string, args []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by gangbench for one kind create: the engine refuses --privileged (see clusters/kind/privilege.go).\n")
	b.WriteString("if [ \"$1\" = run ]; then\n  for a do\n    shift\n    if [ \"$a\" = --privileged ]; then\n      set -- \"$@\"")
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n    else\n      set -- \"$@\" \"$a\"\n    fi\n  done\n")
	// kind's node commands are `exec --privileged`, refused the same way: they get the node's
	// capabilities without it.
	b.WriteString("elif [ \"$1\" = exec ]; then\n  for a do\n    shift\n    [ \"$a\" = --privileged ] || set -- \"$@\" \"$a\"\n  done\n")
	b.WriteString("fi\nexec " + shellQuote(real) + " \"$@\"\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
