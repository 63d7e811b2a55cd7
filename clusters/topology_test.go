package clusters

import (
	"slices"
	"strings"
	"testing"
)

func TestParseTopology(t *testing.T) {
	got, err := ParseTopology("blocks=2,racks-per-block=3,nodes-per-rack=4")
	if err != nil {
		t.Fatal(err)
	}
	if got.Nodes() != 24 || got.String() != "blocks=2,racks-per-block=3,nodes-per-rack=4" {
		t.Errorf("got %+v (%d nodes, %s)", got, got.Nodes(), got)
	}
	custom, err := ParseTopology("nodes-per-rack=1, blocks=1, racks-per-block=2, rack-key=example.com/rack, block-key=example.com/block")
	if err != nil {
		t.Fatal(err)
	}
	if l := custom.Labels(0, 1); l["example.com/rack"] != "block-0-rack-1" || l["example.com/block"] != "block-0" || l[ZoneLabel] != "block-0" || len(l) != 3 {
		t.Errorf("custom keys: labels %v", l)
	}
	for in, want := range map[string]string{
		"":                           `"" is not field=value`,
		"blocks=2,racks-per-block=2": "nodes-per-rack is missing",
		"blocks=0,racks-per-block=2,nodes-per-rack=1":                                      `blocks="0" is not a positive number`,
		"blocks=x,racks-per-block=2,nodes-per-rack=1":                                      `blocks="x" is not a positive number`,
		"blocks=1,blocks=2,racks-per-block=1,nodes-per-rack=1":                             "blocks given twice",
		"blocks=1,racks=2,nodes-per-rack=1":                                                `unknown field "racks"`,
		"blocks=1,racks-per-block=1,nodes-per-rack=1,rack-key=a b":                         `rack-key "a b" is not a label key`,
		"blocks=1,racks-per-block=1,nodes-per-rack=1,rack-key=topology.kubernetes.io/zone": "three different keys",
	} {
		_, err := ParseTopology(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--topology") {
			t.Errorf("ParseTopology(%q) = %v, want an error naming --topology and %q", in, err, want)
		}
	}
}

func TestTopologyGroups(t *testing.T) {
	topo := Topology{Blocks: 2, RacksPerBlock: 2, NodesPerRack: 3}
	base := NodeGroup{Count: 12, Kubelet: RealKubelets, GPUs: &GroupGPUs{}, Labels: map[string]string{"team": "ml"}}
	groups := topo.Groups(base)
	if len(groups) != 4 {
		t.Fatalf("%d groups, want one per rack (4)", len(groups))
	}
	racks := map[string]bool{}
	total := 0
	for _, g := range groups {
		total += g.Count
		if g.Kubelet != RealKubelets || g.GPUs == nil || g.Labels["team"] != "ml" {
			t.Errorf("group %+v lost the base group's kind, GPUs or labels", g)
		}
		rack := g.Labels[DefaultRackKey]
		if !strings.HasPrefix(rack, g.Labels[DefaultBlockKey]+"-rack-") || g.Labels[ZoneLabel] != g.Labels[DefaultBlockKey] {
			t.Errorf("group labels %v: the rack must be named inside its block, the zone be the block", g.Labels)
		}
		racks[rack] = true
	}
	if total != topo.Nodes() || len(racks) != 4 {
		t.Errorf("%d nodes in %d distinct racks, want %d in 4", total, len(racks), topo.Nodes())
	}
	if base.Labels["topology.gangbench.dev/rack"] != "" || len(base.Labels) != 1 {
		t.Errorf("the base group's labels were changed: %v", base.Labels)
	}
}

// TestRacked: nodes numbered across groups go to rack i/nodesPerRack, a group crossing a rack
// boundary is split, the last rack takes what is left, and blocks group racks.
func TestRacked(t *testing.T) {
	real := NodeGroup{Count: 2, Kubelet: RealKubelets, Labels: map[string]string{"team": "ml"}}
	sim := NodeGroup{Count: 9, Kubelet: SimulatedNodes}
	got := Racked([]NodeGroup{real, sim}, 4, 2)
	type part struct {
		count       int
		kubelet     string
		rack, block string
	}
	var parts []part
	for _, g := range got {
		parts = append(parts, part{g.Count, g.Kubelet, g.Labels[DefaultRackKey], g.Labels[DefaultBlockKey]})
	}
	want := []part{
		{2, RealKubelets, "block-0-rack-0", "block-0"},
		{2, SimulatedNodes, "block-0-rack-0", "block-0"},
		{4, SimulatedNodes, "block-0-rack-1", "block-0"},
		{3, SimulatedNodes, "block-1-rack-0", "block-1"},
	}
	if !slices.Equal(parts, want) {
		t.Errorf("racked groups %v, want %v", parts, want)
	}
	if got[0].Labels["team"] != "ml" || real.Labels[DefaultRackKey] != "" {
		t.Errorf("a group's own labels must be kept and the input left alone: %v, %v", got[0].Labels, real.Labels)
	}
	if out := Racked([]NodeGroup{sim}, 0, 0); len(out) != 1 || out[0].Labels != nil {
		t.Errorf("no racks: the groups are returned as they are, got %v", out)
	}
}

// A group's simulated nodes publish GPUs as the group says, and their NVLink clique is their rack,
// under the topology's rack key when it has one of its own.
func TestSimulatedNodeOptions(t *testing.T) {
	spec := Spec{Nodes: 2, GPUAPI: GPUAPIDRA}
	g := spec.Groups()[0]
	if o := spec.SimulatedNodeOptions(g); o.GPUAPI != GPUAPIDRA || o.Clique != "" {
		t.Errorf("shorthand: API %q clique %q, want dra and none", o.GPUAPI, o.Clique)
	}
	if !spec.PublishesDRA() || (Spec{Nodes: 2}).PublishesDRA() {
		t.Error("PublishesDRA must follow the groups' GPU API")
	}
	top := Topology{Blocks: 1, RacksPerBlock: 2, NodesPerRack: 1, RackKey: "example.com/rack"}
	spec = Spec{Topology: &top, NodeGroups: top.Groups(NodeGroup{GPUs: &GroupGPUs{API: GPUAPIBoth}})}
	o := spec.SimulatedNodeOptions(spec.NodeGroups[1])
	if o.GPUAPI != GPUAPIBoth || o.Clique == "" || o.Clique != spec.NodeGroups[1].Labels["example.com/rack"] {
		t.Errorf("rack 1: API %q clique %q, want both and the rack label %q", o.GPUAPI, o.Clique, spec.NodeGroups[1].Labels["example.com/rack"])
	}
}
