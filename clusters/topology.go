package clusters

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Topology is the network shape of a cluster's GPU nodes, as node labels: blocks of racks of
// nodes, the domains a PodGroup's spec.schedulingConstraints.topology names by label key
// (TopologyAwareWorkloadScheduling). Each node carries its block under BlockKey and under
// ZoneLabel (the well-known key users already select on), and its rack under RackKey; its host is
// kubernetes.io/hostname, which every node has.
type Topology struct {
	Blocks        int `json:"blocks"`
	RacksPerBlock int `json:"racksPerBlock"`
	NodesPerRack  int `json:"nodesPerRack"`
	// BlockKey and RackKey are the label keys; "" means DefaultBlockKey and DefaultRackKey.
	BlockKey string `json:"blockKey,omitempty"`
	RackKey  string `json:"rackKey,omitempty"`
}

// The topology's label keys. No key is standard for blocks and racks: clouds each have their own
// (users pass theirs with block-key= and rack-key=).
const (
	ZoneLabel       = "topology.kubernetes.io/zone"
	DefaultBlockKey = "topology.gangbench.dev/block"
	DefaultRackKey  = "topology.gangbench.dev/rack"
)

// ParseTopology reads the --topology flag's value: blocks=B,racks-per-block=R,nodes-per-rack=N,
// optionally block-key=K and rack-key=K. Errors name the flag, the field and the value.
func ParseTopology(s string) (Topology, error) {
	var t Topology
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" {
			return Topology{}, fmt.Errorf("--topology %q: %q is not field=value (fields: blocks, racks-per-block, nodes-per-rack, block-key, rack-key)", s, part)
		}
		if seen[k] {
			return Topology{}, fmt.Errorf("--topology %q: %s given twice", s, k)
		}
		seen[k] = true
		switch k {
		case "blocks", "racks-per-block", "nodes-per-rack":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return Topology{}, fmt.Errorf("--topology %q: %s=%q is not a positive number", s, k, v)
			}
			switch k {
			case "blocks":
				t.Blocks = n
			case "racks-per-block":
				t.RacksPerBlock = n
			default:
				t.NodesPerRack = n
			}
		case "block-key":
			t.BlockKey = v
		case "rack-key":
			t.RackKey = v
		default:
			return Topology{}, fmt.Errorf("--topology %q: unknown field %q (fields: blocks, racks-per-block, nodes-per-rack, block-key, rack-key)", s, k)
		}
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"blocks", t.Blocks}, {"racks-per-block", t.RacksPerBlock}, {"nodes-per-rack", t.NodesPerRack}} {
		if f.n == 0 {
			return Topology{}, fmt.Errorf("--topology %q: %s is missing", s, f.name)
		}
	}
	if err := t.Validate(); err != nil {
		return Topology{}, fmt.Errorf("--topology %q: %w", s, err)
	}
	return t, nil
}

// Validate checks the counts and the label keys.
func (t Topology) Validate() error {
	if t.Blocks < 1 || t.RacksPerBlock < 1 || t.NodesPerRack < 1 {
		return fmt.Errorf("blocks (%d), racks per block (%d) and nodes per rack (%d) must be positive", t.Blocks, t.RacksPerBlock, t.NodesPerRack)
	}
	for _, k := range []struct{ field, key string }{{"block-key", t.blockKey()}, {"rack-key", t.rackKey()}} {
		if msgs := validation.IsQualifiedName(k.key); len(msgs) > 0 {
			return fmt.Errorf("%s %q is not a label key: %s", k.field, k.key, strings.Join(msgs, "; "))
		}
	}
	if t.blockKey() == t.rackKey() || t.blockKey() == ZoneLabel || t.rackKey() == ZoneLabel {
		return fmt.Errorf("block-key %q, rack-key %q and %s must be three different keys", t.blockKey(), t.rackKey(), ZoneLabel)
	}
	return nil
}

func (t Topology) blockKey() string {
	if t.BlockKey == "" {
		return DefaultBlockKey
	}
	return t.BlockKey
}

func (t Topology) rackKey() string {
	if t.RackKey == "" {
		return DefaultRackKey
	}
	return t.RackKey
}

// Nodes is how many nodes the topology has.
func (t Topology) Nodes() int { return t.Blocks * t.RacksPerBlock * t.NodesPerRack }

// String is the topology as the --topology flag says it.
func (t Topology) String() string {
	s := fmt.Sprintf("blocks=%d,racks-per-block=%d,nodes-per-rack=%d", t.Blocks, t.RacksPerBlock, t.NodesPerRack)
	if t.BlockKey != "" {
		s += ",block-key=" + t.BlockKey
	}
	if t.RackKey != "" {
		s += ",rack-key=" + t.RackKey
	}
	return s
}

// Labels are the labels of the nodes of rack r of block b (both from 0). Rack names include their
// block, so a rack key alone identifies a rack across the cluster.
func (t Topology) Labels(b, r int) map[string]string {
	block := fmt.Sprintf("block-%d", b)
	return map[string]string{
		ZoneLabel:    block,
		t.blockKey(): block,
		t.rackKey():  fmt.Sprintf("%s-rack-%d", block, r),
	}
}

// Groups turns a node group into the topology's racks: one group per rack with the group's kind,
// GPUs, taints and labels plus the rack's labels, NodesPerRack nodes each. The group's Count is
// replaced; the caller checks that it matched Nodes.
func (t Topology) Groups(g NodeGroup) []NodeGroup {
	out := make([]NodeGroup, 0, t.Blocks*t.RacksPerBlock)
	for b := range t.Blocks {
		for r := range t.RacksPerBlock {
			rack := g
			rack.Count = t.NodesPerRack
			rack.Labels = map[string]string{}
			for k, v := range g.Labels {
				rack.Labels[k] = v
			}
			for k, v := range t.Labels(b, r) {
				rack.Labels[k] = v
			}
			out = append(out, rack)
		}
	}
	return out
}

// Racked lays groups' nodes out in racks of nodesPerRack, in node order (group after group), the
// way scheduler_perf's topology shapes number them: node i is in rack i/nodesPerRack, and rack r in
// block r/racksPerBlock; the last rack takes what is left. A group that crosses a rack boundary is
// split, so each returned group lies in one rack and carries that rack's labels (Labels, default
// keys) beside its own. Unlike Topology, the node count need not be a multiple of the rack size: a
// benchmark's --nodes is the user's.
func Racked(groups []NodeGroup, nodesPerRack, racksPerBlock int) []NodeGroup {
	if nodesPerRack < 1 {
		return groups
	}
	racksPerBlock = max(1, racksPerBlock)
	var out []NodeGroup
	node := 0
	for _, g := range groups {
		for left := g.Count; left > 0; {
			rack := node / nodesPerRack
			n := min(left, (rack+1)*nodesPerRack-node)
			part := g
			part.Count = n
			part.Labels = maps.Clone(g.Labels)
			if part.Labels == nil {
				part.Labels = map[string]string{}
			}
			maps.Copy(part.Labels, Topology{}.Labels(rack/racksPerBlock, rack%racksPerBlock))
			out = append(out, part)
			node += n
			left -= n
		}
	}
	return out
}
