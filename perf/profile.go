package perf

import (
	"fmt"
	"maps"
	"slices"
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
	// as in scheduler_perf) instead of a status write per pod to make it Running. On the local
	// provider also: no ServiceAccount admission and a node health pass once a minute
	// (QuietDisabledAdmission, QuietNodeMonitorPeriod).
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

// QuietControllers are the controller-manager's controllers in the quiet profile on a provider
// with or without real kubelets (clusters.Capabilities.RealKubelets):
// service accounts and their tokens (pods are admitted only once their namespace's default account
// exists), namespace deletion between repetitions, the PodGroup finalizer, pod GC, the node
// lifecycle and taint eviction (nodes stay honest, and node faults are judged by them), and the root
// CA config map. Left out everywhere: the disruption controller (no perf scenario has a
// PodDisruptionBudget) and, without real kubelets (the local provider), the garbage collector (a perf run's objects have
// no owner references, and the harness deletes its pods itself). The garbage collector watches
// every resource type, so it decodes each pod, event and PodGroup of the measured window once more.
// A cluster with real kubelets (kind) keeps the collector (its system pods have owners) and needs what a worker needs to
// join: kubeadm join finds the cluster through the cluster-info config map signed by the bootstrap
// signer, its kubelet gets its client certificate through a CSR the approving and signing
// controllers handle, its node then needs a pod CIDR (node IPAM), and the device plugin, CNI and
// kube-proxy run as DaemonSets. (kubeadm itself runs the controller-manager with
// "*,bootstrapsigner,tokencleaner"; a controllers flag of ours replaces that.)
func QuietControllers(realKubelets bool) []string {
	cs := []string{
		"serviceaccount-controller", "serviceaccount-token-controller", "namespace-controller",
		"podgroup-protection-controller", "pod-garbage-collector-controller",
		"node-lifecycle-controller", "taint-eviction-controller",
		"root-ca-certificate-publisher-controller",
	}
	if realKubelets {
		cs = append(cs, "garbage-collector-controller",
			"bootstrap-signer-controller", "certificatesigningrequest-approving-controller", "certificatesigningrequest-signing-controller",
			"node-ipam-controller", "daemonset-controller")
	}
	return cs
}

// FeatureControllers are the controllers a workload feature needs beside QuietControllers: a
// Job-driven scenario (feature jobs) needs the job controller, which writes each Job's Workload,
// PodGroup and pods. A list of controllers the quiet profile set is extended with them; a user's
// own list is not touched.
func FeatureControllers(feature string) []string {
	if feature == "jobs" {
		return []string{"job-controller"}
	}
	return nil
}

// GPUAPIControllers are the controllers a GPU API needs beside QuietControllers: with DRA the
// resourceclaim-controller makes each pod's ResourceClaim from its template (the scheduler waits
// for it before the pod can be placed), takes the reservation of a deleted pod back and releases
// its devices. Like FeatureControllers, a list the quiet profile set is extended with them.
func GPUAPIControllers(api clusters.GPUAPI) []string {
	if api.DRA() {
		return []string{"resourceclaim-controller"}
	}
	return nil
}

// withControllers adds controllers to a --controllers value, unless it already runs them (by name
// or "*").
func withControllers(list string, add []string) string {
	have := strings.Split(list, ",")
	for _, c := range add {
		if !slices.Contains(have, c) && !slices.Contains(have, "*") {
			have = append(have, c)
		}
	}
	return strings.Join(have, ",")
}

// QuietDisabledAdmission is the apiserver's --disable-admission-plugins in the quiet profile on a
// provider with or without real kubelets. Everywhere, as scheduler_perf's apiserver (util.go): TaintNodesByCondition, so a node is
// not tainted not-ready at creation; simulated nodes are created Ready, and removing 5000 taints
// again is 5000 node writes by the controller-manager before the cluster can schedule. Without real
// kubelets (the local provider) also ServiceAccount, as scheduler_perf: no pod there runs a container that could use a
// token, and the plugin makes every pod larger (a projected token volume and its mount) for the
// apiserver and etcd to store, encode and send to each watcher. A cluster with real kubelets keeps it: its
// device plugin, CNI and kube-proxy pods talk to the apiserver with their tokens.
func QuietDisabledAdmission(realKubelets bool) string {
	if realKubelets {
		return "TaintNodesByCondition"
	}
	return "TaintNodesByCondition,ServiceAccount"
}

// QuietNodeMonitorPeriod is the controller-manager's --node-monitor-period in the quiet profile on
// a provider without real kubelets (default 5 s). Every period the node lifecycle controller walks all nodes and
// their leases; at 5000 nodes that was a third of the controller-manager's CPU in a measured window.
// With leases renewed a quarter of QuietLeaseSeconds apart and a grace period of an hour, a pass a
// minute loses nothing. Not with real kubelets (kind): a joining worker is NotReady for a moment, and a pass that sees
// it so taints it NoExecute until the next pass sees it Ready, which would then be a minute later.
const QuietNodeMonitorPeriod = "1m"

// ApplyProfile sets a cluster spec for a profile on a provider of caps. Flags the user gave
// (spec.ExtraArgs) win.
func ApplyProfile(spec *clusters.Spec, profile string, caps clusters.Capabilities) error {
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
	kcm := map[string]string{"controllers": strings.Join(QuietControllers(caps.RealKubelets), ",")}
	if !caps.RealKubelets {
		kcm["node-monitor-period"] = QuietNodeMonitorPeriod
	}
	for c, args := range map[clusters.Component]map[string]string{
		clusters.ControllerManager: kcm,
		clusters.APIServer:         {"disable-admission-plugins": QuietDisabledAdmission(caps.RealKubelets)},
	} {
		maps.Copy(args, spec.ExtraArgs[c])
		spec.ExtraArgs[c] = args
	}
	return nil
}
