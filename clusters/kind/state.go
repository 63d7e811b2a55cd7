package kind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/proc"
)

// StateDirEnv overrides where kind cluster state lives.
const StateDirEnv = "GANGBENCH_KIND_STATE_DIR"

// DefaultStateDir is $GANGBENCH_KIND_STATE_DIR, else $XDG_STATE_HOME/gangbench/kind, else
// ~/.local/state/gangbench/kind: a sibling of the local provider's "clusters" dir, never inside it,
// because the local provider takes every directory there for one of its clusters.
func DefaultStateDir() (string, error) {
	if d := os.Getenv(StateDirEnv); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gangbench", "kind"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no kind state dir: set %s: %w", StateDirEnv, err)
	}
	return filepath.Join(home, ".local", "state", "gangbench", "kind"), nil
}

// Phases of a state file.
const (
	phaseCreating = "creating"
	phaseReady    = "ready"
)

// state is what another process needs to find, use and delete a kind cluster gangbench made. It is
// written before kind creates anything (phase "creating"), so a crash mid-create still leaves a
// record `delete` can act on, and rewritten once the cluster is ready.
type state struct {
	Name    string    `json:"name"`
	Engine  string    `json:"engine"`
	Created time.Time `json:"created"`
	Phase   string    `json:"phase"`
	// Owner is the process that created (or is creating) the cluster.
	Owner                proc.Ref `json:"owner"`
	NodeImage            string   `json:"nodeImage"`
	SchedulerImage       string   `json:"schedulerImage,omitempty"`
	SchedulerBinary      string   `json:"schedulerBinary,omitempty"` // what SchedulerImage was built from, if it was
	SchedulerMetricsPort int      `json:"schedulerMetricsPort"`
	// Network is the engine network the nodes are on, made by kind for this cluster alone (so that
	// deleting the cluster can delete it without touching a network anyone else uses).
	Network string `json:"network,omitempty"`
	// Workers, PlainWorkers and KwokNodes count the nodes of each kind over all node groups.
	Workers      int `json:"workers"`
	PlainWorkers int `json:"plainWorkers,omitempty"`
	KwokNodes    int `json:"kwokNodes"`
	// GPU is the first GPU node group's inventory (Cluster.GPU carries one); other groups may differ.
	GPU          fakegpu.Inventory `json:"gpu"`
	Kubeconfig   string            `json:"kubeconfig"`
	ControlPlane string            `json:"controlPlane,omitempty"`
	Versions     map[string]string `json:"versions,omitempty"`
	// Kwok is the kwok controller this package started for the cluster's simulated nodes.
	Kwok     *proc.Ref `json:"kwok,omitempty"`
	KwokPort int       `json:"kwokPort,omitempty"`
	// KwokLaunch is how the kwok controller was started, so a fault can start it again alike.
	KwokLaunch *kwokLaunch `json:"kwokLaunch,omitempty"`
}

func statePath(root, name string) string  { return filepath.Join(root, name+".json") }
func clusterDir(root, name string) string { return filepath.Join(root, name) }

func writeState(root string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	p := statePath(root, s.Name)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write kind cluster state: %w", err)
	}
	return os.Rename(tmp, p)
}

func readState(root, name string) (*state, error) {
	b, err := os.ReadFile(statePath(root, name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("kind cluster %q (no state in %s): %w", name, root, clusters.ErrNotFound)
		}
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("kind cluster state %s: %w", statePath(root, name), err)
	}
	return &s, nil
}

// claimState creates the state file exclusively: two processes creating the same cluster cannot both
// succeed. A leftover from a create that died (owner gone, cluster not listed by the engine) is
// removed by the caller before retrying.
func claimState(root string, s *state) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("kind state dir: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(statePath(root, s.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func removeState(root, name string) error {
	var errs []error
	if err := os.RemoveAll(clusterDir(root, name)); err != nil {
		errs = append(errs, err)
	}
	for _, p := range []string{statePath(root, name), statePath(root, name) + ".tmp"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kwokGrace is how long the kwok controller gets between SIGTERM and SIGKILL.
const kwokGrace = 10 * time.Second

// engineLister answers "which kind clusters exist" per engine, asking each engine once.
type engineLister struct {
	p     *Provider
	cache map[string]listResult
}

type listResult struct {
	names []string
	err   error
}

func (l *engineLister) list(ctx context.Context, engine string) ([]string, error) {
	if r, ok := l.cache[engine]; ok {
		return r.names, r.err
	}
	var r listResult
	// Probe first: kind's List has no timeout of its own, and the probe's error says what is wrong.
	if _, err := DetectEngineWith(ctx, engine, l.p.opts.Runner); err != nil {
		r.err = err
	} else {
		r.names, r.err = l.p.newKind(engine).List()
	}
	if l.cache == nil {
		l.cache = map[string]listResult{}
	}
	l.cache[engine] = r
	return r.names, r.err
}

// List implements clusters.Provider: the clusters with a state file here, each checked against its
// engine's list of kind clusters. An engine that does not answer makes the status "unknown" rather
// than failing the whole list, so `cluster list` still shows the other providers' clusters.
func (p *Provider) List(ctx context.Context) ([]clusters.Info, error) {
	ents, err := os.ReadDir(p.opts.StateDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	lister := &engineLister{p: p}
	var out []clusters.Info
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok || validateName(name) != nil {
			continue
		}
		st, err := readState(p.opts.StateDir, name)
		if err != nil {
			out = append(out, clusters.Info{Name: name, Provider: ProviderName, Status: "unreadable state: " + err.Error()})
			continue
		}
		out = append(out, clusters.Info{
			Name: st.Name, Provider: ProviderName, Created: st.Created,
			Status: p.status(ctx, st, lister), Nodes: st.Workers + st.KwokNodes,
		})
	}
	slices.SortFunc(out, func(a, b clusters.Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// status is one word (plus a reason where it helps) for `cluster list`.
func (p *Provider) status(ctx context.Context, st *state, l *engineLister) string {
	if st.Phase != phaseReady {
		if st.Owner.Alive() {
			return "creating"
		}
		return "incomplete"
	}
	names, err := l.list(ctx, st.Engine)
	switch {
	case err != nil:
		return "unknown (" + st.Engine + " does not answer)"
	case !slices.Contains(names, st.Name):
		return "stale"
	case st.KwokNodes > 0 && (st.Kwok == nil || !st.Kwok.Alive()):
		return "degraded (kwok controller not running)"
	}
	return "running"
}

// Get implements clusters.Provider. The handle's Control works from any process (it acts through
// the engine); its Close releases nothing, as the cluster belongs to whoever created it.
func (p *Provider) Get(ctx context.Context, name string) (*clusters.Cluster, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	st, err := readState(p.opts.StateDir, name)
	if err != nil {
		return nil, err
	}
	if st.Phase != phaseReady {
		return nil, fmt.Errorf("kind cluster %q is not ready (still being created, or its create failed); run `gangbench cluster delete %s` if no create is running", name, name)
	}
	l := &engineLister{p: p}
	names, err := l.list(ctx, st.Engine)
	if err != nil {
		return nil, fmt.Errorf("kind cluster %q: %w", name, err)
	}
	if !slices.Contains(names, name) {
		return nil, fmt.Errorf("kind cluster %q is stale (%s has no such cluster any more); run `gangbench cluster delete %s`", name, st.Engine, name)
	}
	api := p.newKind(st.Engine)
	cl, err := p.handle(st, api)
	if err != nil {
		return nil, err
	}
	cl.Close = func(context.Context) error { return nil }
	return cl, nil
}

// Delete implements clusters.Provider: it stops the cluster's kwok controller, deletes the kind
// cluster through its engine and removes the state. Only clusters with a state file are touched.
func (p *Provider) Delete(ctx context.Context, name string) error {
	if err := validateName(name); err != nil {
		return err
	}
	st, err := readState(p.opts.StateDir, name)
	if errors.Is(err, clusters.ErrNotFound) {
		if _, statErr := os.Stat(clusterDir(p.opts.StateDir, name)); statErr == nil {
			return removeState(p.opts.StateDir, name)
		}
		return err
	}
	if err != nil {
		return err
	}
	if st.Phase != phaseReady && st.Owner.PID != os.Getpid() && st.Owner.Alive() {
		return fmt.Errorf("kind cluster %q is being created by process %d; stop that process first (it deletes the cluster when its create fails)", name, st.Owner.PID)
	}
	return p.destroy(ctx, st)
}

// destroy removes everything a state records: kwok, the kind cluster, the state.
func (p *Provider) destroy(ctx context.Context, st *state) error {
	var errs []error
	// A fault may have restarted the kwok controller since st was read (control.startKwok records
	// the new process in the state file): the file's record is the one to stop.
	if cur, err := readState(p.opts.StateDir, st.Name); err == nil && cur.Kwok != nil {
		st.Kwok = cur.Kwok
	}
	if st.Kwok != nil {
		if err := st.Kwok.Stop(ctx, syscall.SIGTERM, kwokGrace); err != nil {
			errs = append(errs, fmt.Errorf("kwok controller: %w", err))
		}
	}
	if _, err := DetectEngineWith(ctx, st.Engine, p.opts.Runner); err != nil {
		// Keep the state: without it a later delete (once the engine is back) could not find the
		// cluster, and `delete --all` must not go looking for clusters it did not make.
		return errors.Join(append(errs, fmt.Errorf("cannot delete kind cluster %q: %w", st.Name, err))...)
	}
	kubeconfig := st.Kubeconfig
	if kubeconfig == "" {
		// Never "": kind would then edit $KUBECONFIG or ~/.kube/config.
		kubeconfig = filepath.Join(clusterDir(p.opts.StateDir, st.Name), "kubeconfig")
	}
	err := p.newKind(st.Engine).Delete(st.Name, kubeconfig)
	if err != nil {
		// A node that cannot be killed because a cgroup in it stayed frozen (thaw.go): thaw, retry.
		if n, terr := p.thawNodes(ctx, st.Engine, st.Name); n > 0 {
			err = p.newKind(st.Engine).Delete(st.Name, kubeconfig)
		} else if terr != nil {
			err = errors.Join(err, fmt.Errorf("thawing its nodes' cgroups: %w", terr))
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("delete kind cluster %q: %w", st.Name, err))
		return errors.Join(errs...)
	}
	if st.Network != "" {
		if err := removeNetwork(ctx, p.opts.Runner, st.Engine, st.Network); err != nil {
			errs = append(errs, err)
			return errors.Join(errs...)
		}
	}
	if err := removeState(p.opts.StateDir, st.Name); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeNetwork removes the cluster's own network; one that is already gone is fine.
func removeNetwork(ctx context.Context, run Runner, engine, network string) error {
	err := run(ctx, io.Discard, engine, "network", "rm", network)
	var ce *CommandError
	if err != nil && errors.As(err, &ce) && strings.Contains(strings.ToLower(ce.Stderr), "not found") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove network %s: %w", network, err)
	}
	return nil
}
