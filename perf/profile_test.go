package perf

import (
	"slices"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters"
)

func TestApplyProfile(t *testing.T) {
	var quiet clusters.Spec
	if err := ApplyProfile(&quiet, ProfileQuiet, capsOf("local")); err != nil {
		t.Fatal(err)
	}
	kcm := quiet.ExtraArgs[clusters.ControllerManager]
	if quiet.NodeLeaseSeconds != QuietLeaseSeconds || !quiet.PodsStayPending || !strings.Contains(kcm["controllers"], "namespace-controller") || !strings.Contains(kcm["controllers"], "podgroup-protection-controller") {
		t.Errorf("quiet: lease %d, controller-manager flags %v", quiet.NodeLeaseSeconds, kcm)
	}
	if quiet.ExtraArgs[clusters.APIServer]["disable-admission-plugins"] != "TaintNodesByCondition,ServiceAccount" || kcm["node-monitor-period"] != QuietNodeMonitorPeriod {
		t.Errorf("quiet on local: apiserver flags %v, controller-manager flags %v", quiet.ExtraArgs[clusters.APIServer], kcm)
	}
	local := strings.Split(kcm["controllers"], ",")
	if slices.ContainsFunc(local, func(c string) bool {
		return c == "*" || c == "job-controller" || c == "garbage-collector-controller" || c == "daemonset-controller" || c == "disruption-controller"
	}) {
		t.Errorf("quiet runs only the controllers a local run needs: %s", kcm["controllers"])
	}
	// A kind worker must be able to join: bootstrap signer, CSR approval and signing, a pod CIDR,
	// DaemonSets (the device plugin, CNI, kube-proxy).
	var onKind clusters.Spec
	if err := ApplyProfile(&onKind, ProfileQuiet, capsOf("kind")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"bootstrap-signer-controller", "certificatesigningrequest-approving-controller", "certificatesigningrequest-signing-controller", "node-ipam-controller", "daemonset-controller", "garbage-collector-controller"} {
		if !strings.Contains(onKind.ExtraArgs[clusters.ControllerManager]["controllers"], c) {
			t.Errorf("quiet on kind lacks %s: %s", c, onKind.ExtraArgs[clusters.ControllerManager]["controllers"])
		}
	}
	// kind keeps service account tokens (its system pods use them) and the default health pass.
	if got := onKind.ExtraArgs[clusters.APIServer]["disable-admission-plugins"]; got != "TaintNodesByCondition" {
		t.Errorf("quiet on kind disables admission plugins %q", got)
	}
	if got, ok := onKind.ExtraArgs[clusters.ControllerManager]["node-monitor-period"]; ok {
		t.Errorf("quiet on kind sets node-monitor-period %q", got)
	}
	// A flag the user gave wins, and the caller's map is not changed.
	user := map[clusters.Component]map[string]string{clusters.ControllerManager: {"controllers": "*"}}
	mine := clusters.Spec{ExtraArgs: user, NodeLeaseSeconds: 120}
	if err := ApplyProfile(&mine, ProfileQuiet, capsOf("local")); err != nil {
		t.Fatal(err)
	}
	if mine.ExtraArgs[clusters.ControllerManager]["controllers"] != "*" || mine.NodeLeaseSeconds != 120 {
		t.Errorf("user settings overridden: %+v", mine)
	}
	var real clusters.Spec
	if err := ApplyProfile(&real, ProfileRealistic, capsOf("local")); err != nil || real.NodeLeaseSeconds != 0 || real.ExtraArgs != nil || real.PodsStayPending {
		t.Errorf("realistic changes nothing: %+v %v", real, err)
	}
	if err := ApplyProfile(&real, "loud", capsOf("local")); err == nil || !strings.Contains(err.Error(), "accepted: quiet, realistic") {
		t.Errorf("unknown profile: %v", err)
	}
}

// TestFeatureControllers: a Job-driven shape adds the job controller to the quiet profile's list,
// once, and leaves a list that runs every controller alone.
func TestFeatureControllers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a,b", "a,b,job-controller"},
		{"a,job-controller", "a,job-controller"},
		{"*", "*"},
	} {
		if got := withControllers(tc.in, FeatureControllers("jobs")); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
	if FeatureControllers("tas") != nil {
		t.Error("tas needs no controller")
	}
}
