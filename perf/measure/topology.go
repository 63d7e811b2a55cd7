package measure

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/results"
)

// Topology is the measurement of topology-constrained phases: did every gang land in one domain of
// its key (PodGroup spec.schedulingConstraints.topology)? A constrained gang spread over two racks
// is a wrong scheduler, however fast it bound.
const Topology = "topology"

// ItemOneDomainShare is, per constrained phase (label phase), the share of placed groups whose
// bound members all lie in one domain (Value, 0..1; must be 1), with the counts behind it and how
// many domains the phase's groups used between them.
const ItemOneDomainShare = "oneDomainShare"

type topology struct{ env *Env }

func newTopology(env *Env) Measurement { return &topology{env: env} }

func (m *topology) Start(context.Context) error { return nil }

func (m *topology) Gather(ctx context.Context) ([]results.DataItem, error) {
	keys := map[string]string{} // phase → topology key
	for _, ph := range m.env.Scenario.Phases {
		if ph.TopologyKey != "" && slices.Contains(m.env.Measured, ph.Name) {
			keys[ph.Name] = ph.TopologyKey
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	nodes, err := m.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("topology: list nodes: %w", err)
	}
	labels := map[string]map[string]string{}
	for _, n := range nodes.Items {
		labels[n.Name] = n.Labels
	}
	groups := Groups(m.env.Timeline.Events(), m.env.Measured)
	var items []results.DataItem
	for _, ph := range slices.Sorted(maps.Keys(keys)) {
		share := DomainShare(m.env.Timeline.Events(), groups, ph, keys[ph], labels)
		for _, g := range share.Spread {
			m.env.note("topology: group %s of phase %s is bound across domains of %s: %s", g.Group, ph, keys[ph], strings.Join(g.Domains, ", "))
		}
		items = append(items, share.Item(ph))
	}
	return items, nil
}

// Share is what DomainShare found for one phase.
type Share struct {
	// Placed counts the phase's complete groups; OneDomain those whose members share a domain.
	Placed, OneDomain int
	// Domains are the distinct domains the phase's placed groups used.
	Domains int
	// Spread lists the groups bound across domains (a member on a node without the key counts as
	// the domain "").
	Spread []SpreadGroup
}

// SpreadGroup is a group whose members are in more than one domain.
type SpreadGroup struct {
	Group   string
	Domains []string
}

// DomainShare checks, for each complete group of phase, that every member bound (and still bound at
// the end of the timeline) lies in one domain: one value of key on its node.
func DomainShare(events []timeline.Event, groups []GroupTimes, phase, key string, nodeLabels map[string]map[string]string) Share {
	members := map[string]map[string]string{} // group → pod → node
	for _, e := range timeline.Sorted(events) {
		if e.Phase != phase {
			continue
		}
		switch e.Kind {
		case timeline.PodBound:
			if members[e.Group] == nil {
				members[e.Group] = map[string]string{}
			}
			members[e.Group][e.Pod] = e.Node
		case timeline.PodDeleted:
			delete(members[e.Group], e.Pod)
		}
	}
	var s Share
	used := map[string]bool{}
	for _, g := range groups {
		if g.Phase != phase || !g.Complete() {
			continue
		}
		s.Placed++
		domains := map[string]bool{}
		for _, node := range members[g.Group] {
			domains[nodeLabels[node][key]] = true
		}
		for d := range domains {
			used[d] = true
		}
		if len(domains) == 1 && !domains[""] {
			s.OneDomain++
			continue
		}
		s.Spread = append(s.Spread, SpreadGroup{Group: g.Group, Domains: slices.Sorted(maps.Keys(domains))})
	}
	s.Domains = len(used)
	return s
}

// Item is the phase's oneDomainShare.
func (s Share) Item(phase string) results.DataItem {
	data := map[string]float64{"Placed": float64(s.Placed), "OneDomain": float64(s.OneDomain), "Domains": float64(s.Domains)}
	if s.Placed > 0 {
		data[Value] = float64(s.OneDomain) / float64(s.Placed)
	}
	return results.DataItem{Name: ItemOneDomainShare, Unit: "ratio", Labels: map[string]string{"phase": phase}, Data: data}
}
