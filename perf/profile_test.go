package perf

import (
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters"
)

func TestApplyProfile(t *testing.T) {
	var quiet clusters.Spec
	if err := ApplyProfile(&quiet, ProfileQuiet); err != nil {
		t.Fatal(err)
	}
	kcm := quiet.ExtraArgs[clusters.ControllerManager]
	if quiet.NodeLeaseSeconds != QuietLeaseSeconds || !quiet.PodsStayPending || !strings.Contains(kcm["controllers"], "namespace-controller") || !strings.Contains(kcm["controllers"], "podgroup-protection-controller") {
		t.Errorf("quiet: lease %d, controller-manager flags %v", quiet.NodeLeaseSeconds, kcm)
	}
	if quiet.ExtraArgs[clusters.APIServer]["disable-admission-plugins"] != "TaintNodesByCondition" {
		t.Errorf("quiet: apiserver flags %v", quiet.ExtraArgs[clusters.APIServer])
	}
	if strings.Contains(kcm["controllers"], "*") || strings.Contains(kcm["controllers"], "job-controller") {
		t.Errorf("quiet runs only the controllers a run needs: %s", kcm["controllers"])
	}
	// A flag the user gave wins, and the caller's map is not changed.
	user := map[clusters.Component]map[string]string{clusters.ControllerManager: {"controllers": "*"}}
	mine := clusters.Spec{ExtraArgs: user, NodeLeaseSeconds: 120}
	if err := ApplyProfile(&mine, ProfileQuiet); err != nil {
		t.Fatal(err)
	}
	if mine.ExtraArgs[clusters.ControllerManager]["controllers"] != "*" || mine.NodeLeaseSeconds != 120 {
		t.Errorf("user settings overridden: %+v", mine)
	}
	var real clusters.Spec
	if err := ApplyProfile(&real, ProfileRealistic); err != nil || real.NodeLeaseSeconds != 0 || real.ExtraArgs != nil || real.PodsStayPending {
		t.Errorf("realistic changes nothing: %+v %v", real, err)
	}
	if err := ApplyProfile(&real, "loud"); err == nil || !strings.Contains(err.Error(), "accepted: quiet, realistic") {
		t.Errorf("unknown profile: %v", err)
	}
}
