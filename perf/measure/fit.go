package measure

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// FitNode is a node's allocatable resources.
type FitNode struct {
	Name        string
	Allocatable corev1.ResourceList
}

// FitPod is a pod as the fit check sees it: what it requests and where it is bound ("" = pending).
type FitPod struct {
	Name     string
	Group    string // "" for a pod outside any PodGroup
	Node     string
	Requests corev1.ResourceList
}

// FitGroup is what the fit check needs of a PodGroup.
type FitGroup struct {
	Name     string
	Gang     bool
	MinCount int
}

// FitReport says how many pending pods could have been placed in the capacity left at the end.
type FitReport struct {
	Pending int
	// Fitting is the number of pending pods that the free capacity could hold, honouring gang
	// quorums: a gang below its quorum counts only if its missing members fit all at once.
	Fitting int
	// Examples names up to five groups with fitting pods, for the report.
	Examples []string
}

// UnboundFitting checks "every pod that fits is bound" on a final state. It subtracts the bound
// pods' requests from the nodes, then walks the pending pods group by group in the order given,
// placing each first-fit and keeping what it placed, so two groups that each fit alone but not
// together count once. A pure function: the caller lists nodes and pods.
func UnboundFitting(nodes []FitNode, pods []FitPod, groups []FitGroup) FitReport {
	free := make([]map[corev1.ResourceName]int64, len(nodes))
	index := map[string]int{}
	for i, n := range nodes {
		free[i] = milli(n.Allocatable)
		index[n.Name] = i
	}
	bound := map[string]int{}
	pending := map[string][]FitPod{}
	var loose []FitPod
	var rep FitReport
	for _, p := range pods {
		if p.Node != "" {
			if i, ok := index[p.Node]; ok {
				take(free[i], podDemand(p))
			}
			bound[p.Group]++
			continue
		}
		rep.Pending++
		if p.Group == "" {
			loose = append(loose, p)
			continue
		}
		pending[p.Group] = append(pending[p.Group], p)
	}
	place := func(d map[corev1.ResourceName]int64) (int, bool) {
		for i := range free {
			if fits(free[i], d) {
				take(free[i], d)
				return i, true
			}
		}
		return 0, false
	}
	unplace := func(i int, d map[corev1.ResourceName]int64) {
		for r, v := range d {
			free[i][r] += v
		}
	}
	count := func(group string, n int) {
		if n == 0 {
			return
		}
		rep.Fitting += n
		if len(rep.Examples) < 5 {
			rep.Examples = append(rep.Examples, fmt.Sprintf("%s: %d pending pods fit", group, n))
		}
	}
	known := map[string]bool{}
	for _, g := range groups {
		known[g.Name] = true
		ps := pending[g.Name]
		if len(ps) == 0 {
			continue
		}
		start := 0
		if g.Gang && bound[g.Name] < g.MinCount {
			need := min(g.MinCount-bound[g.Name], len(ps))
			var placed []int
			for _, p := range ps[:need] {
				i, ok := place(podDemand(p))
				if !ok {
					break
				}
				placed = append(placed, i)
			}
			if len(placed) < need || need < g.MinCount-bound[g.Name] {
				// The quorum cannot be met: none of it fits in the gang sense. Give back what the
				// attempt took, so later groups see the true free capacity.
				for k, i := range placed {
					unplace(i, podDemand(ps[k]))
				}
				continue
			}
			start = need
		}
		n := start
		for _, p := range ps[start:] {
			if _, ok := place(podDemand(p)); ok {
				n++
			}
		}
		count(g.Name, n)
	}
	// Pods of groups the caller did not describe are judged one by one, like basic members.
	var rest []string
	for name := range pending {
		if !known[name] {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range rest {
		n := 0
		for _, p := range pending[name] {
			if _, ok := place(podDemand(p)); ok {
				n++
			}
		}
		count(name, n)
	}
	n := 0
	for _, p := range loose {
		if _, ok := place(podDemand(p)); ok {
			n++
		}
	}
	count("pods without a PodGroup", n)
	return rep
}

// podDemand is a pod's requests plus the pod slot it occupies.
func podDemand(p FitPod) map[corev1.ResourceName]int64 {
	d := milli(p.Requests)
	d[corev1.ResourcePods] += 1000
	return d
}

func milli(rl corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(rl))
	for r, q := range rl {
		out[r] = q.MilliValue()
	}
	return out
}

func fits(free, d map[corev1.ResourceName]int64) bool {
	for r, v := range d {
		if v > 0 && free[r] < v {
			return false
		}
	}
	return true
}

func take(free, d map[corev1.ResourceName]int64) {
	for r, v := range d {
		free[r] -= v
	}
}

// String summarises a report in one line.
func (r FitReport) String() string {
	if r.Fitting == 0 {
		return fmt.Sprintf("%d pending pods, none of which fits the free capacity", r.Pending)
	}
	return fmt.Sprintf("%d of %d pending pods fit the free capacity: %s", r.Fitting, r.Pending, strings.Join(r.Examples, "; "))
}
