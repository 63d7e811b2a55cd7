package clusters

import (
	"maps"
	"testing"
)

func TestGangDefaultsFollowTheMinorVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		gates   map[string]bool
		rc      map[string]string
	}{
		{"v1.37.2", map[string]bool{"GenericWorkload": true}, map[string]string{"scheduling.k8s.io/v1beta1": "true"}},
		{"v1.38.0-rc.1", map[string]bool{"GenericWorkload": true}, map[string]string{"scheduling.k8s.io/v1beta1": "true"}},
		{"v1.36.3", map[string]bool{"GenericWorkload": true, "GangScheduling": true, "WorkloadAwarePreemption": true}, map[string]string{"scheduling.k8s.io/v1alpha2": "true"}},
	} {
		if g := GangFeatureGates(tc.version); !maps.Equal(g, tc.gates) {
			t.Errorf("%s gates %v, want %v", tc.version, g, tc.gates)
		}
		if rc := GangRuntimeConfig(tc.version); !maps.Equal(rc, tc.rc) {
			t.Errorf("%s runtime-config %v, want %v", tc.version, rc, tc.rc)
		}
	}
	for v, want := range map[string]int{"v1.36.3": 36, "v1.37.2": 37, "v1.x": -1, "v2.0.0": -1, "": -1, "v1.-3.0": -1} {
		if got := MinorOf(v); got != want {
			t.Errorf("MinorOf(%q) = %d, want %d", v, got, want)
		}
	}
}
