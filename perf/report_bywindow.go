package perf

import (
	"slices"

	"github.com/gangbench/gangbench/results"
)

// windowItems are a run's items of one measured window (a scenario's repetition).
type windowItems struct {
	scenario, rep string
	items         []results.DataItem
}

// itemsByWindow groups the run's items with the given names by window: windows in the order their
// first item appears, items in run order within each.
func itemsByWindow(r *results.Run, names ...string) []*windowItems {
	var out []*windowItems
	index := map[string]*windowItems{}
	for _, it := range r.DataItems {
		if !slices.Contains(names, it.Name) {
			continue
		}
		key := it.Labels["scenario"] + "\x00" + it.Labels["repetition"]
		w := index[key]
		if w == nil {
			w = &windowItems{scenario: it.Labels["scenario"], rep: it.Labels["repetition"]}
			index[key] = w
			out = append(out, w)
		}
		w.items = append(w.items, it)
	}
	return out
}
