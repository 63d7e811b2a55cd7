package perf

import (
	"fmt"
	"maps"
	"strings"

	"github.com/gangbench/gangbench/clusters"
)

// Profiles say how much load runs beside the scheduler during a measurement.
const (
	// ProfileQuiet (the default) measures the scheduler's algorithm with the least load beside it
	// that keeps the cluster honest: node leases renewed every 15 minutes instead of every 10 s
	// (at 5000 nodes, 500 lease writes a second less for the apiserver and etcd), the controller-
	// manager's node-monitor-grace-period raised to match so no node goes NotReady, only the
	// controllers a run needs, new nodes not tainted not-ready by the apiserver (they are created
	// Ready), and bound pods left as their binding leaves them (PodScheduled=True, phase Pending,
	// as in scheduler_perf) instead of a status write per pod to make it Running.
	ProfileQuiet = "quiet"
	// ProfileRealistic keeps a kubelet's heartbeat (40 s leases renewed every 10 s), every
	// controller and pods made Running and Ready once bound, for users who want the scheduler
	// measured on a loaded control plane.
	ProfileRealistic = "realistic"
)

// Profiles lists the profiles.
func Profiles() []string { return []string{ProfileQuiet, ProfileRealistic} }

// QuietLeaseSeconds is the node lease duration of the quiet profile; kwok renews a quarter of it apart.
const QuietLeaseSeconds = 3600

// QuietControllers are the controller-manager's controllers in the quiet profile: service
// accounts and their tokens (pods are admitted only once their namespace's default account
// exists), namespace deletion between repetitions, garbage collection, the PodGroup finalizer,
// pod GC, the node lifecycle and taint eviction (nodes stay honest), disruption budgets
// (preemption respects them), the root CA config map (real kubelets' pods mount it on kind), and
// what a kind worker needs to join: kubeadm join finds the cluster through the cluster-info config
// map signed by the bootstrap signer, and its kubelet gets its client certificate through a CSR that
// the approving and signing controllers handle; its node then needs a pod CIDR (node IPAM), and the
// device plugin, CNI and kube-proxy run as DaemonSets. (kubeadm itself runs the controller-manager with
// "*,bootstrapsigner,tokencleaner"; a controllers flag of ours replaces that.) On the local provider
// these five have nothing to do.
func QuietControllers() []string {
	return []string{
		"serviceaccount-controller", "serviceaccount-token-controller", "namespace-controller",
		"garbage-collector-controller", "podgroup-protection-controller", "pod-garbage-collector-controller",
		"node-lifecycle-controller", "taint-eviction-controller", "disruption-controller",
		"root-ca-certificate-publisher-controller",
		"bootstrap-signer-controller", "certificatesigningrequest-approving-controller", "certificatesigningrequest-signing-controller",
		"node-ipam-controller", "daemonset-controller",
	}
}

// ApplyProfile sets a cluster spec for a profile. Flags the user gave (spec.ExtraArgs) win.
func ApplyProfile(spec *clusters.Spec, profile string) error {
	switch profile {
	case ProfileRealistic:
		return nil
	case ProfileQuiet, "":
	default:
		return fmt.Errorf("profile %q: accepted: %s", profile, strings.Join(Profiles(), ", "))
	}
	if spec.NodeLeaseSeconds == 0 {
		spec.NodeLeaseSeconds = QuietLeaseSeconds
	}
	spec.PodsStayPending = true
	if spec.ExtraArgs == nil {
		spec.ExtraArgs = map[clusters.Component]map[string]string{}
	} else {
		spec.ExtraArgs = maps.Clone(spec.ExtraArgs)
	}
	for c, args := range map[clusters.Component]map[string]string{
		clusters.ControllerManager: {"controllers": strings.Join(QuietControllers(), ",")},
		// As scheduler_perf's apiserver (util.go, --disable-admission-plugins): a node is not
		// tainted not-ready at creation. Simulated nodes are created Ready, and removing 5000 taints
		// again is 5000 node writes by the controller-manager before the cluster can schedule.
		clusters.APIServer: {"disable-admission-plugins": "TaintNodesByCondition"},
	} {
		maps.Copy(args, spec.ExtraArgs[c])
		spec.ExtraArgs[c] = args
	}
	return nil
}
