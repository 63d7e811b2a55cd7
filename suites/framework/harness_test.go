package framework

import (
	"testing"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/local"
	"github.com/gangbench/gangbench/clusters/request"
)

// TestClusterRequest: what the suites fill into a request is a cluster they can run on (a unique
// name, a shared node where every node is simulated, a kwok controller beside real kubelets for
// the lanes), what the user gave stays, and the result passes the provider's own validation.
func TestClusterRequest(t *testing.T) {
	kindP, localP := &kind.Provider{}, &local.Provider{}
	// kindReq is what `gangbench e2e --provider kind` makes of --nodes, --workers and --kwok-nodes.
	kindReq := func(nodes, workers, kwok int) request.Request {
		r := request.New("kind", clusters.Spec{})
		if err := (request.FlagShape{Nodes: nodes, Workers: workers, KwokNodes: kwok}).ForSuites(true).Apply(&r.Spec, true); err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name               string
		p                  clusters.Provider
		in                 request.Request
		wantName           string
		wantReal, wantKwok int
	}{
		{"local defaults", localP, request.New("local", clusters.Spec{}), "e2e-7", 0, 1},
		{"local as asked", localP, request.New("local", clusters.Spec{Name: "foo", Nodes: 3}), "foo", 0, 3},
		{"kind defaults: 2 workers and the lanes' kwok node", kindP, kindReq(0, 0, 0), "e2e-7", 2, 1},
		{"kind --nodes 3: 2 workers + 1 kwok", kindP, kindReq(3, 0, 0), "e2e-7", 2, 1},
		{"kind --nodes 3 --workers 1: the rest kwok", kindP, kindReq(3, 1, 0), "e2e-7", 1, 2},
		{"kind --kwok-nodes 5", kindP, kindReq(0, 0, 5), "e2e-7", 2, 5},
		{"kind request without groups", kindP, request.New("kind", clusters.Spec{}), "e2e-7", 2, 1},
		{"kind groups without simulated nodes", kindP, request.New("kind", clusters.Spec{NodeGroups: []clusters.NodeGroup{{Count: 3, GPUs: &clusters.GroupGPUs{}}}}), "e2e-7", 3, 1},
	}
	count := func(spec clusters.Spec) (real, kwok int) {
		for _, g := range spec.Groups() {
			if g.Kubelet == clusters.RealKubelets || (g.Kubelet == "" && len(spec.NodeGroups) > 0) {
				real += g.Count
			} else {
				kwok += g.Count
			}
		}
		return real, kwok
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ClusterRequest(tt.in, tt.p.Capabilities(), 7)
			if err != nil {
				t.Fatal(err)
			}
			real, kwok := count(got.Spec)
			if got.Spec.Name != tt.wantName || real != tt.wantReal || kwok != tt.wantKwok {
				t.Errorf("name %q real %d simulated %d, want %q %d %d", got.Spec.Name, real, kwok, tt.wantName, tt.wantReal, tt.wantKwok)
			}
			if err := tt.p.Validate(got.Spec); err != nil {
				t.Errorf("the provider refuses it: %v", err)
			}
			again, err := ClusterRequest(got, tt.p.Capabilities(), 8)
			if r2, k2 := count(again.Spec); err != nil || again.Spec.Name != got.Spec.Name || r2 != real || k2 != kwok {
				t.Errorf("applied twice it changes: %+v → %+v (%v)", got.Spec, again.Spec, err)
			}
		})
	}
}
