package clusters

import (
	"reflect"
	"strings"
	"testing"
)

func TestApplyFeatures(t *testing.T) {
	var spec Spec
	if err := ApplyFeatures(&spec, []string{"composite", "tas"}); err != nil {
		t.Fatal(err)
	}
	wantGates := map[string]bool{"CompositePodGroup": true, "TopologyAwareWorkloadScheduling": true}
	if !reflect.DeepEqual(spec.FeatureGates, wantGates) || spec.RuntimeConfig["scheduling.k8s.io/v1alpha3"] != "true" || !reflect.DeepEqual(spec.Features, []string{"composite", "tas"}) {
		t.Errorf("composite,tas: gates %v, runtime config %v, features %v", spec.FeatureGates, spec.RuntimeConfig, spec.Features)
	}

	// Raw --feature-gates and --runtime-config given before keep the last word.
	spec = Spec{FeatureGates: map[string]bool{"TopologyAwareWorkloadScheduling": false}, RuntimeConfig: map[string]string{"scheduling.k8s.io/v1alpha3": "false"}}
	if err := ApplyFeatures(&spec, []string{"all"}); err != nil {
		t.Fatal(err)
	}
	if spec.FeatureGates["TopologyAwareWorkloadScheduling"] || spec.RuntimeConfig["scheduling.k8s.io/v1alpha3"] != "false" {
		t.Errorf("a gate or API version the user gave was overridden: %v %v", spec.FeatureGates, spec.RuntimeConfig)
	}
	for _, g := range []string{"WorkloadWithJob", "PodGroupPreemptionPolicy", "CompositePodGroup"} {
		if !spec.FeatureGates[g] {
			t.Errorf("all: gate %s not on: %v", g, spec.FeatureGates)
		}
	}
	if len(spec.Features) != len(FeatureSets()) {
		t.Errorf("all: features %v, want each once", spec.Features)
	}

	err := ApplyFeatures(&Spec{}, []string{"tas", "gpus"})
	if err == nil || !strings.Contains(err.Error(), `--features "gpus"`) || !strings.Contains(err.Error(), "preemption-policy") {
		t.Errorf("unknown feature: %v, want an error naming it and the accepted ones", err)
	}
}
