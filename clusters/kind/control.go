package kind

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/gangbench/gangbench/clusters"
	kwokcfg "github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/internal/poll"
)

// defaultControlTimeout bounds one Stop/Kill/Start of a component: a static pod restart takes
// seconds, an image-pull-free kubelet start a few more.
const defaultControlTimeout = 2 * time.Minute

// control implements clusters.ComponentControl for a kind cluster by acting inside its nodes:
//   - kube-scheduler and kube-controller-manager are static pods: Stop moves the manifest out of the
//     kubelet's manifests dir (the kubelet then stops the pod gracefully), Start moves it back, Kill
//     moves it out and SIGKILLs the container (crictl stop --timeout 0) before the kubelet's graceful
//     stop gets to it;
//   - "kubelet" (every node) or "kubelet/<node>" is the kubelet systemd unit of the nodes;
//   - the kwok controller of the cluster's simulated nodes is a process gangbench runs on this
//     machine (its pid and launch are in the state dir): Stop and Kill end it, Start launches it
//     again, after which it retakes the node leases it held (kwok.WaitNodeLeasesRetaken);
//   - the apiserver and etcd are not supported: stopping them in a kubeadm cluster this way cannot
//     be undone through the apiserver-less paths we have.
type control struct {
	api     kindAPI
	name    string
	timeout time.Duration
	// stateDir holds the cluster's state, where the kwok controller's process and launch are.
	stateDir string
}

var _ clusters.ComponentControl = (*control)(nil)

// staticPod describes a control-plane component run as a kubeadm static pod.
type staticPod struct {
	manifest string // file name in manifestDir
	healthz  string // URL answered "ok" inside the node once it is ready
}

func staticPodOf(c clusters.Component) (staticPod, bool) {
	switch c {
	case clusters.Scheduler:
		return staticPod{manifest: "kube-scheduler.yaml", healthz: "https://127.0.0.1:10259/healthz"}, true
	case clusters.ControllerManager:
		return staticPod{manifest: "kube-controller-manager.yaml", healthz: "https://127.0.0.1:10257/healthz"}, true
	case clusters.APIServer:
		// kubeadm lets anyone read /healthz (system:public-info-viewer).
		return staticPod{manifest: "kube-apiserver.yaml", healthz: "https://127.0.0.1:6443/healthz"}, true
	}
	return staticPod{}, false
}

func unsupported(c clusters.Component) error {
	return fmt.Errorf("%s: not supported on kind (supported: kube-scheduler, kube-controller-manager, kube-apiserver, kwok-controller, kubelet, kubelet/<node>)", c)
}

// kubeletNodes returns the nodes a "kubelet" or "kubelet/<node>" component names, or ok=false.
func (k *control) kubeletNodes(c clusters.Component) ([]nodes.Node, bool, error) {
	s := string(c)
	if s != string(Kubelet) && !strings.HasPrefix(s, string(Kubelet)+"/") {
		return nil, false, nil
	}
	cn, err := listClusterNodes(k.api, k.name)
	if err != nil {
		return nil, true, err
	}
	node, one := strings.CutPrefix(s, string(Kubelet)+"/")
	if !one {
		return cn.All, true, nil
	}
	for _, n := range cn.All {
		if n.String() == node {
			return []nodes.Node{n}, true, nil
		}
	}
	return nil, true, fmt.Errorf("kubelet: kind cluster %q has no node %q (nodes: %s)", k.name, node, nodeNames(cn.All))
}

func (k *control) controlPlane() (nodes.Node, error) {
	cn, err := listClusterNodes(k.api, k.name)
	if err != nil {
		return nil, err
	}
	return cn.ControlPlane, nil
}

// Stop implements clusters.ComponentControl.
func (k *control) Stop(ctx context.Context, c clusters.Component) error {
	return k.stop(ctx, c, false)
}

// Kill implements clusters.ComponentControl.
func (k *control) Kill(ctx context.Context, c clusters.Component) error {
	return k.stop(ctx, c, true)
}

func (k *control) stop(ctx context.Context, c clusters.Component, kill bool) error {
	if c == clusters.Kwok {
		return k.stopKwok(ctx, kill)
	}
	if ns, ok, err := k.kubeletNodes(c); ok {
		if err != nil {
			return err
		}
		// kind's kubelet.service restarts the kubelet (Restart=always): after a SIGKILL the unit is
		// also stopped, which cancels the pending restart, so both end with the kubelet down.
		script := "systemctl stop kubelet"
		if kill {
			script = "systemctl kill --signal=SIGKILL kubelet; systemctl stop kubelet"
		}
		return onNodes(ctx, ns, func(ctx context.Context, n nodes.Node) error {
			if _, err := nodeSh(ctx, n, script); err != nil {
				return err
			}
			return poll.Until(ctx, "kubelet on "+n.String()+" to stop", 200*time.Millisecond, k.timeout, func(ctx context.Context) (bool, string, error) {
				// is-active exits non-zero for every state but active, so its output is what counts;
				// no output at all means the node could not be asked, which proves nothing.
				out, err := nodeRun(ctx, n, nil, "systemctl", "is-active", "kubelet")
				s := strings.TrimSpace(out)
				if s == "" && err != nil {
					return false, "", err
				}
				return s != "active" && s != "activating" && s != "reloading", "systemctl is-active: " + s, nil
			})
		})
	}
	sp, ok := staticPodOf(c)
	if !ok {
		return unsupported(c)
	}
	cp, err := k.controlPlane()
	if err != nil {
		return err
	}
	container := strings.TrimSuffix(sp.manifest, ".yaml")
	script := fmt.Sprintf(`set -e
[ -f %[1]s/%[3]s ] || { echo "%[4]s is not running (its manifest is not in %[1]s)" >&2; exit 3; }
mkdir -p %[2]s
ids=$(crictl ps -q --name '^%[4]s$' --state running)
mv %[1]s/%[3]s %[2]s/%[3]s
`, manifestDir, stoppedDir, sp.manifest, container)
	if kill {
		// SIGKILL at once (a CRI stop with timeout 0 skips the stop signal), racing the kubelet's
		// graceful stop that the manifest move triggers.
		script += `[ -z "$ids" ] || crictl stop --timeout 0 $ids >/dev/null` + "\n"
	}
	if _, err := nodeSh(ctx, cp, script); err != nil {
		return fmt.Errorf("%s: %w", c, err)
	}
	return k.waitContainerGone(ctx, cp, container)
}

func (k *control) waitContainerGone(ctx context.Context, cp nodes.Node, container string) error {
	return poll.Until(ctx, container+" container to exit", 200*time.Millisecond, k.timeout, func(ctx context.Context) (bool, string, error) {
		out, err := nodeRun(ctx, cp, nil, "crictl", "ps", "-q", "--name", "^"+container+"$", "--state", "running")
		if err != nil {
			return false, "", err
		}
		ids := strings.TrimSpace(out)
		return ids == "", "running containers: " + ids, nil
	})
}

// Start implements clusters.ComponentControl: the manifest goes back (same image, same flags) and
// Start returns once the component's healthz answers ok inside the node.
func (k *control) Start(ctx context.Context, c clusters.Component) error {
	if c == clusters.Kwok {
		return k.startKwok(ctx)
	}
	if ns, ok, err := k.kubeletNodes(c); ok {
		if err != nil {
			return err
		}
		return onNodes(ctx, ns, func(ctx context.Context, n nodes.Node) error {
			if _, err := nodeRun(ctx, n, nil, "systemctl", "start", "kubelet"); err != nil {
				return err
			}
			return k.waitHealthz(ctx, n, "kubelet", "http://127.0.0.1:10248/healthz")
		})
	}
	sp, ok := staticPodOf(c)
	if !ok {
		return unsupported(c)
	}
	cp, err := k.controlPlane()
	if err != nil {
		return err
	}
	script := fmt.Sprintf(`set -e
[ ! -f %[1]s/%[3]s ] || { echo "%[4]s is already running (its manifest is in %[1]s)" >&2; exit 3; }
[ -f %[2]s/%[3]s ] || { echo "no stopped %[4]s manifest in %[2]s" >&2; exit 3; }
mv %[2]s/%[3]s %[1]s/%[3]s
`, manifestDir, stoppedDir, sp.manifest, strings.TrimSuffix(sp.manifest, ".yaml"))
	if _, err := nodeSh(ctx, cp, script); err != nil {
		return fmt.Errorf("%s: %w", c, err)
	}
	return k.waitHealthz(ctx, cp, string(c), sp.healthz)
}

func (k *control) waitHealthz(ctx context.Context, n nodes.Node, what, url string) error {
	return poll.Until(ctx, what+" on "+n.String()+" healthy", 250*time.Millisecond, k.timeout, func(ctx context.Context) (bool, string, error) {
		out, err := nodeRun(ctx, n, nil, "curl", "-sk", "--max-time", "2", url)
		if err != nil {
			return false, "", err
		}
		s := strings.TrimSpace(out)
		return s == "ok", "healthz: " + s, nil
	})
}

// Restart implements clusters.ComponentControl.
func (k *control) Restart(ctx context.Context, c clusters.Component) error {
	if err := k.Stop(ctx, c); err != nil {
		return err
	}
	return k.Start(ctx, c)
}

// onNodes runs f on every node concurrently and joins the errors, each naming its node.
func onNodes(ctx context.Context, ns []nodes.Node, f func(context.Context, nodes.Node) error) error {
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() {
			if err := f(ctx, n); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", n.String(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// componentLog returns the last lines of a static pod component's log from the control-plane node:
// every container the kubelet kept for it, oldest first, so a log read after a fault shows the
// killed scheduler's last words and the restarted one's first.
func (k *control) componentLog(ctx context.Context, c clusters.Component, lines int) ([]byte, error) {
	sp, ok := staticPodOf(c)
	if !ok {
		return nil, unsupported(c)
	}
	cp, err := k.controlPlane()
	if err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(sp.manifest, ".yaml")
	// crictl lists newest first; tac puts them in the order they ran.
	script := fmt.Sprintf(`for id in $(crictl ps -a -q --name '^%[1]s$' | tac); do
  echo "==> container $id"
  crictl logs --tail %[2]d "$id" 2>&1
done`, name, lines)
	out, err := nodeSh(ctx, cp, script)
	if err != nil {
		return nil, fmt.Errorf("%s log on %s: %w", c, cp.String(), err)
	}
	return []byte(out), nil
}

// kwokState reads the cluster's state for the kwok controller it records.
func (k *control) kwokState() (*state, error) {
	if k.stateDir == "" {
		return nil, unsupported(clusters.Kwok)
	}
	st, err := readState(k.stateDir, k.name)
	if err != nil {
		return nil, err
	}
	if st.Kwok == nil || st.KwokLaunch == nil {
		return nil, fmt.Errorf("%s: kind cluster %q runs no kwok controller (it has no kwok nodes)", clusters.Kwok, k.name)
	}
	return st, nil
}

// stopKwok stops the kwok controller gangbench runs on this machine for the cluster's simulated
// nodes: SIGTERM with kwok's grace, or SIGKILL at once.
func (k *control) stopKwok(ctx context.Context, kill bool) error {
	st, err := k.kwokState()
	if err != nil {
		return err
	}
	if !st.Kwok.Alive() {
		return fmt.Errorf("%s is not running (pid %d)", clusters.Kwok, st.Kwok.PID)
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return st.Kwok.Stop(ctx, sig, kwokGrace)
}

// startKwok starts the kwok controller again as it was first started, and records its new process.
func (k *control) startKwok(ctx context.Context) error {
	st, err := k.kwokState()
	if err != nil {
		return err
	}
	if st.Kwok.Alive() {
		return fmt.Errorf("%s is already running (pid %d)", clusters.Kwok, st.Kwok.PID)
	}
	// As on the local provider (clusters/local startKwok): the node Leases the stopped controller held
	// are released first, because a new kwok process has a new identity and would otherwise wait for
	// them to expire and can then lose the pods bound meanwhile (clusters/kwok/leases.go says why);
	// the restart is done once the new process holds them again, as a restarted kubelet is back when
	// it renews its lease. The kind nodes' real kubelets' Leases are not touched. A state without a
	// kubeconfig (tests) has no cluster to release them in.
	start := time.Now()
	var cs kubernetes.Interface
	var rel kwokcfg.ReleasedLeases
	if st.Kubeconfig != "" {
		cfg, err := restConfigFrom(st.Kubeconfig)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 500, 1000
		if cs, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
		if rel, err = kwokcfg.ReleaseNodeLeases(ctx, cs); err != nil {
			return err
		}
	}
	launch := *st.KwokLaunch
	launch.Timeout = k.timeout
	kp, err := startKwokProcess(ctx, launch)
	if err != nil {
		return err
	}
	st.Kwok = &kp.Ref
	if err := writeState(k.stateDir, st); err != nil {
		return err
	}
	if cs == nil {
		return nil
	}
	return errKwokNotReady(kwokcfg.WaitNodeLeasesRetaken(ctx, cs, rel, max(k.timeout-time.Since(start), 10*time.Second)), launch.LogPath)
}
