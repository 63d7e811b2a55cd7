package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/proc"
)

// StateDirEnv overrides where cluster state lives (tests use a temp dir; users rarely need it).
const StateDirEnv = "GANGBENCH_STATE_DIR"

// DefaultStateDir is $GANGBENCH_STATE_DIR, else $XDG_STATE_HOME/gangbench/clusters, else
// ~/.local/state/gangbench/clusters. Another process finds a cluster there by name.
func DefaultStateDir() (string, error) {
	if d := os.Getenv(StateDirEnv); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gangbench", "clusters"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state dir: set %s: %w", StateDirEnv, err)
	}
	return filepath.Join(home, ".local", "state", "gangbench", "clusters"), nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$`)

func validateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("cluster name %q: must be 1-42 lowercase letters, digits or '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// state is what another process needs to find, use and delete a cluster. It is written once the
// cluster is ready and rewritten when a component restarts (its pid changes).
type state struct {
	Name       string              `json:"name"`
	Created    time.Time           `json:"created"`
	Owner      proc.Ref            `json:"owner"`
	Ports      ports               `json:"ports"`
	Procs      map[string]proc.Ref `json:"procs"`
	Versions   map[string]string   `json:"versions"`
	Binaries   map[string]string   `json:"binaries"`
	Nodes      int                 `json:"nodes"`
	GPU        fakegpu.Inventory   `json:"gpu"`
	Kubeconfig string              `json:"kubeconfig"`
	// Detached owners exist only to hold the cluster and may be signalled by `cluster delete`.
	Detached bool `json:"detached"`
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

func writeState(dir string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return os.Rename(tmp, statePath(dir))
}

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", dir, clusters.ErrNotFound)
		}
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("cluster state %s: %w", statePath(dir), err)
	}
	return &s, nil
}

// anyAlive reports whether the owner or any component of a recorded cluster still runs.
func (s *state) anyAlive() bool {
	if s.Owner.Alive() {
		return true
	}
	for _, p := range s.Procs {
		if p.Alive() {
			return true
		}
	}
	return false
}

// freePorts asks the kernel for n distinct free loopback ports. The listeners are closed before the
// components bind, so a port can in theory be taken in between; holding them all until the end keeps
// the kernel from handing the same port out twice in one call.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("allocate a loopback port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func allocatePorts() (ports, error) {
	p, err := freePorts(6)
	if err != nil {
		return ports{}, err
	}
	return ports{EtcdClient: p[0], EtcdPeer: p[1], APIServer: p[2], KCM: p[3], Scheduler: p[4], Kwok: p[5]}, nil
}
