package kind

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
)

// cniConfPath is the network config every node's containerd reads; the name sorts before anything a
// user might add, since the CRI uses the first file.
const cniConfPath = "/etc/cni/net.d/10-gangbench.conflist"

// cniConfig is what kindnetd would write on a node, without kindnetd: a point-to-point veth per pod
// with an address from the node's pod CIDR (host-local), and hostPort support (portmap). Pods on
// other nodes are reached through the routes routePeers adds.
func cniConfig(podCIDR string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "gangbench",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"ranges":  []any{[]any{map[string]any{"subnet": podCIDR}}},
				},
				"mtu": 1500,
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// nodeNet is what the CNI set-up needs of a node.
type nodeNet struct {
	Name, PodCIDR, IP string
}

// setupCNI configures pod networking on every kind node: each node's pod CIDR (allocated by the
// controller-manager) goes into its CNI config, and every node gets a route to every other node's
// pod CIDR through that node's address. Then it waits until every kind node is Ready.
func setupCNI(ctx context.Context, cs kubernetes.Interface, kindNodes []nodes.Node, timeout time.Duration) error {
	nets, err := waitPodCIDRs(ctx, cs, kindNodes, timeout)
	if err != nil {
		return err
	}
	for _, n := range kindNodes {
		me := nets[n.String()]
		conf, err := cniConfig(me.PodCIDR)
		if err != nil {
			return err
		}
		if _, err := nodeRun(ctx, n, strings.NewReader(string(conf)), "sh", "-c", "mkdir -p /etc/cni/net.d && cat > "+cniConfPath); err != nil {
			return fmt.Errorf("node %s: write CNI config: %w", n, err)
		}
		for _, peer := range nets {
			if peer.Name == me.Name {
				continue
			}
			if _, err := nodeRun(ctx, n, nil, "ip", "route", "replace", peer.PodCIDR, "via", peer.IP); err != nil {
				return fmt.Errorf("node %s: route to %s's pods: %w", n, peer.Name, err)
			}
		}
	}
	if err := waitNodesReady(ctx, cs, kindNodes, timeout); err != nil {
		return err
	}
	return waitKubeProxy(ctx, cs, timeout)
}

// waitKubeProxy waits until kube-proxy runs on every node, so that service IPs work once Create
// returns (pods started before its first sync would not reach them).
func waitKubeProxy(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		st := ds.Status
		last = fmt.Sprintf("%d of %d kube-proxy pods ready", st.NumberReady, st.DesiredNumberScheduled)
		return st.DesiredNumberScheduled > 0 && st.NumberReady == st.DesiredNumberScheduled && st.UpdatedNumberScheduled == st.DesiredNumberScheduled, nil
	})
	if err != nil {
		return fmt.Errorf("kube-proxy not running on every node after %s (%s): %w", timeout, last, err)
	}
	return nil
}

// waitPodCIDRs waits until every kind node is registered with a pod CIDR and an internal address.
func waitPodCIDRs(ctx context.Context, cs kubernetes.Interface, kindNodes []nodes.Node, timeout time.Duration) (map[string]nodeNet, error) {
	var nets map[string]nodeNet
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			missing = []string{err.Error()}
			return false, nil
		}
		byName := map[string]corev1.Node{}
		for _, n := range list.Items {
			byName[n.Name] = n
		}
		nets, missing = map[string]nodeNet{}, nil
		for _, kn := range kindNodes {
			n, ok := byName[kn.String()]
			ip := internalIP(n)
			if !ok || n.Spec.PodCIDR == "" || ip == "" {
				missing = append(missing, kn.String())
				continue
			}
			nets[kn.String()] = nodeNet{Name: n.Name, PodCIDR: n.Spec.PodCIDR, IP: ip}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("kind nodes without a pod CIDR or address after %s (the controller-manager allocates them): %s: %w", timeout, strings.Join(missing, ", "), err)
	}
	return nets, nil
}

func internalIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// waitNodesReady waits until every kind node reports Ready, naming the ones that did not and why.
func waitNodesReady(ctx context.Context, cs kubernetes.Interface, kindNodes []nodes.Node, timeout time.Duration) error {
	var last []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		last = nil
		for _, kn := range kindNodes {
			n, err := cs.CoreV1().Nodes().Get(ctx, kn.String(), metav1.GetOptions{})
			if err != nil {
				last = append(last, kn.String()+": "+err.Error())
				continue
			}
			ready := false
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					ready = c.Status == corev1.ConditionTrue
					if !ready {
						last = append(last, fmt.Sprintf("%s: Ready=%s (%s)", n.Name, c.Status, c.Message))
					}
				}
			}
			if !ready && len(n.Status.Conditions) == 0 {
				last = append(last, n.Name+": no conditions yet")
			}
		}
		return len(last) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("kind nodes not Ready after %s: %s: %w", timeout, strings.Join(last, "; "), err)
	}
	return nil
}
