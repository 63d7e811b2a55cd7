package suites

import (
	"testing"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/request"
)

// TestClusterRequest: what the suites fill into a request is a cluster they can run on (a unique
// name, a shared node on local, a kwok controller on kind for the lanes), what the user gave stays,
// and the result passes the provider's own validation.
func TestClusterRequest(t *testing.T) {
	kindReq := func(nodes, workers, kwok int) request.Request {
		r := request.New("kind", clusters.Spec{Nodes: nodes})
		r.KindOptions = &request.KindOptions{Workers: workers, KwokNodes: kwok}
		return r
	}
	tests := []struct {
		name      string
		in        request.Request
		wantName  string
		wantNodes int
		wantKwok  int
	}{
		{"local defaults", request.New("local", clusters.Spec{}), "e2e-7", 1, 0},
		{"local as asked", request.New("local", clusters.Spec{Name: "foo", Nodes: 3}), "foo", 3, 0},
		{"kind defaults: 2 workers and the lanes' kwok node", kindReq(0, 0, 0), "e2e-7", 0, 1},
		{"kind --nodes 3: 2 workers + 1 kwok", kindReq(3, 0, 0), "e2e-7", 3, 1},
		{"kind --nodes 3 --workers 1: the rest kwok", kindReq(3, 1, 0), "e2e-7", 3, 2},
		{"kind --kwok-nodes 5", kindReq(0, 0, 5), "e2e-7", 0, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClusterRequest(tt.in, 7)
			kwok := 0
			if got.KindOptions != nil {
				kwok = got.KindOptions.KwokNodes
			}
			if got.Spec.Name != tt.wantName || got.Spec.Nodes != tt.wantNodes || kwok != tt.wantKwok {
				t.Errorf("name %q nodes %d kwok %d, want %q %d %d", got.Spec.Name, got.Spec.Nodes, kwok, tt.wantName, tt.wantNodes, tt.wantKwok)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("the provider refuses it: %v", err)
			}
			if again := ClusterRequest(got, 8); again.Spec.Name != got.Spec.Name || again.Spec.Nodes != got.Spec.Nodes {
				t.Errorf("applied twice it changes: %+v → %+v", got.Spec, again.Spec)
			}
		})
	}
}
