package clusters

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A FeatureSet is one v1.37 workload feature around the gang core and everything a cluster needs
// to host it (workload-features-v1.37 §0): its feature gates, set on every component as
// Spec.FeatureGates are (each component then uses those it has), and the API versions the apiserver
// must serve.
type FeatureSet struct {
	Name  string
	About string
	Gates map[string]bool
	// RuntimeConfig is added to kube-apiserver's --runtime-config.
	RuntimeConfig map[string]string
}

// FeatureSets are the features --features names, in a stable order. Every one builds on
// GenericWorkload and scheduling.k8s.io/v1beta1, which every cluster has (GangFeatureGates).
func FeatureSets() []FeatureSet {
	return []FeatureSet{
		{Name: "tas", About: "topology-aware placement: PodGroup.spec.schedulingConstraints.topology",
			Gates: map[string]bool{"TopologyAwareWorkloadScheduling": true}},
		{Name: "jobs", About: "Jobs with spec.scheduling: the job controller writes the Workload and PodGroup",
			Gates: map[string]bool{"WorkloadWithJob": true}},
		{Name: "preemption-policy", About: "PodGroup.spec.preemptionPolicy and its check against the members'",
			Gates: map[string]bool{"PodGroupPreemptionPolicy": true}},
		// CompositePodGroup refuses to start without TopologyAwareWorkloadScheduling on the same
		// component, and its API is served only in v1alpha3 (workload-features §0).
		{Name: "composite", About: "CompositePodGroups (scheduling.k8s.io/v1alpha3): groups of groups",
			Gates:         map[string]bool{"CompositePodGroup": true, "TopologyAwareWorkloadScheduling": true},
			RuntimeConfig: map[string]string{"scheduling.k8s.io/v1alpha3": "true"}},
		// The apiserver keeps the field, the scheduler reserves the claim for the group, the
		// controller-manager creates the group's claim, and a kubelet lets the members use it: all
		// four need the gate (workload-features §5.4), which Spec.FeatureGates gives every one.
		{Name: "workload-claims", About: "PodGroup.spec.resourceClaims: DRA claims a PodGroup's members share",
			Gates: map[string]bool{"DRAWorkloadResourceClaims": true}},
	}
}

// FeatureNames lists the names --features accepts, "all" last.
func FeatureNames() []string {
	var out []string
	for _, f := range FeatureSets() {
		out = append(out, f.Name)
	}
	return append(out, "all")
}

// ApplyFeatures switches the named features on in spec: their gates under spec.FeatureGates and
// their API versions under spec.RuntimeConfig. Gates the user gave (already in spec) win, so raw
// --feature-gates stay the last word. "all" names every feature. Spec.Features records the
// features, sorted, once each.
func ApplyFeatures(spec *Spec, names []string) error {
	sets := map[string]FeatureSet{}
	for _, f := range FeatureSets() {
		sets[f.Name] = f
	}
	chosen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "all":
			for k := range sets {
				chosen[k] = true
			}
		case sets[n].Name != "":
			chosen[n] = true
		default:
			return fmt.Errorf("--features %q: unknown feature; accepted %s", n, strings.Join(FeatureNames(), ", "))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(chosen)) {
		f := sets[n]
		for g, on := range f.Gates {
			if _, given := spec.FeatureGates[g]; given {
				continue
			}
			if spec.FeatureGates == nil {
				spec.FeatureGates = map[string]bool{}
			}
			spec.FeatureGates[g] = on
		}
		for k, v := range f.RuntimeConfig {
			if _, given := spec.RuntimeConfig[k]; given {
				continue
			}
			if spec.RuntimeConfig == nil {
				spec.RuntimeConfig = map[string]string{}
			}
			spec.RuntimeConfig[k] = v
		}
		spec.Features = append(spec.Features, n)
	}
	return nil
}
