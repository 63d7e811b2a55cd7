package measure

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/results"
)

// trafficText is an apiserver /metrics body with the two families the traffic measurement reads.
// watchLabel is the watch counter's label for the resource (resource on newer apiservers, kind on
// older ones).
func trafficText(binds, creates, statusPatches, leases, scrapes, podEvents, eventEvents int, watchLabel string) []byte {
	return fmt.Appendf(nil, `# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} %d
apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} %d
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} %d
apiserver_request_total{code="200",resource="leases",subresource="",verb="PUT"} %d
apiserver_request_total{code="200",resource="",subresource="",verb="GET"} %d
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",%[8]s="pods",version="v1"} %[6]d
apiserver_watch_events_total{group="",%[8]s="events",version="v1"} %[7]d
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{resource="pods",scope="cluster",subresource="",verb="WATCH"} 3
apiserver_longrunning_requests{resource="pods",scope="namespace",subresource="",verb="WATCH"} 1
apiserver_longrunning_requests{resource="podgroups",scope="cluster",subresource="",verb="WATCH"} 2
apiserver_longrunning_requests{resource="nodes",scope="cluster",subresource="",verb="WATCH"} 0
apiserver_longrunning_requests{resource="pods",scope="namespace",subresource="log",verb="GET"} 7
`, binds, creates, statusPatches, leases, scrapes, podEvents, eventEvents, watchLabel)
}

func find(items []results.DataItem, name, label, value string) (results.DataItem, bool) {
	for _, it := range items {
		if it.Name == name && it.Labels[label] == value {
			return it, true
		}
	}
	return results.DataItem{}, false
}

// TestTraffic counts 100 measured pods' requests and watch events between two scrapes: per pod,
// by kind, busiest first, with their sum; requests not for a resource are left out.
func TestTraffic(t *testing.T) {
	for _, watchLabel := range []string{"resource", "kind"} {
		t.Run(watchLabel, func(t *testing.T) {
			tl := timeline.NewTimeline(nil)
			for i := range 100 {
				tl.Add(timeline.Event{Kind: timeline.PodCreated, Phase: "gangs", Pod: fmt.Sprint("p", i)})
			}
			tl.Add(timeline.Event{Kind: timeline.PodCreated, Phase: "prefill", Pod: "fill"})
			env := &Env{
				Cluster: &clusters.Cluster{APIServerMetrics: fixtureServer(t,
					trafficText(10, 20, 5, 1000, 7, 50, 3, watchLabel),
					trafficText(110, 121, 305, 1050, 90, 450, 53, watchLabel))},
				Timeline: tl, Measured: []string{"gangs"},
			}
			m := newTraffic(env)
			ctx := context.Background()
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			items, err := m.Gather(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []struct {
				name, label, value string
				perPod             float64
			}{
				{ItemAPIRequests, LabelRequest, All, 5.51},
				{ItemAPIRequests, LabelRequest, "PATCH pods/status", 3},
				{ItemAPIRequests, LabelRequest, "POST pods", 1.01},
				{ItemAPIRequests, LabelRequest, "POST pods/binding", 1},
				{ItemAPIRequests, LabelRequest, "PUT leases", 0.5},
				{ItemWatchEvents, LabelResource, All, 4.5},
				{ItemWatchEvents, LabelResource, "pods", 4},
				{ItemWatchEvents, LabelResource, "events", 0.5},
			}
			for _, w := range want {
				it, ok := find(items, w.name, w.label, w.value)
				if !ok {
					t.Errorf("no %s{%s=%s} in %v", w.name, w.label, w.value, items)
					continue
				}
				if !near(it.Data["PerPod"], w.perPod) || !near(it.Data["Count"], w.perPod*100) {
					t.Errorf("%s{%s=%s}: %v, want %g per pod", w.name, w.label, w.value, it.Data, w.perPod)
				}
			}
			// Watches open at the end, by resource: not other long-running requests, not
			// resources without one.
			var watches []string
			for _, it := range items {
				if it.Name == ItemWatches {
					watches = append(watches, fmt.Sprintf("%s=%g", it.Labels[LabelResource], it.Data[Value]))
				}
			}
			if fmt.Sprint(watches) != "[all=6 pods=4 podgroups=2]" {
				t.Errorf("watches %v", watches)
			}
			if _, ok := find(items, ItemAPIRequests, LabelRequest, "GET "); ok {
				t.Errorf("a non-resource request (the scrapes) counted: %v", items)
			}
			// Busiest first after the sum: the report names the first few.
			var order []string
			for _, it := range items {
				if it.Name == ItemAPIRequests {
					order = append(order, it.Labels[LabelRequest])
				}
			}
			if fmt.Sprint(order) != "[all PATCH pods/status POST pods POST pods/binding PUT leases]" {
				t.Errorf("order %v", order)
			}
		})
	}
}

// TestTrafficRestartedAPIServer reports nothing across an apiserver restart: its counters started
// again from zero, so a delta would be garbage.
func TestTrafficRestartedAPIServer(t *testing.T) {
	tl := timeline.NewTimeline(nil)
	tl.Add(timeline.Event{Kind: timeline.PodCreated, Phase: "gangs", Pod: "p"})
	var notes []string
	env := &Env{
		Cluster:  &clusters.Cluster{APIServerMetrics: fixtureServer(t, trafficText(10, 20, 5, 1000, 7, 50, 3, "resource"), trafficText(1, 1, 1, 1, 1, 1, 1, "resource"))},
		Timeline: tl, Measured: []string{"gangs"},
		Restarted: map[clusters.Component]bool{clusters.APIServer: true},
		Note:      func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) },
	}
	m := newTraffic(env)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	items, err := m.Gather(context.Background())
	if err != nil || len(items) != 0 || len(notes) != 1 {
		t.Errorf("items %v, err %v, notes %q; want none and a note", items, err, notes)
	}
}

// TestTrafficErrors counts the requests the apiserver answered with an error status in the window,
// by request and code, says so in a note (explaining 429s), and records a zero without a note when
// there were none.
func TestTrafficErrors(t *testing.T) {
	body := func(bound, refused, conflicts int) []byte {
		return fmt.Appendf(nil, `# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} %d
apiserver_request_total{code="429",resource="pods",subresource="binding",verb="POST"} %d
apiserver_request_total{code="409",resource="pods",subresource="binding",verb="POST"} %d
apiserver_request_total{code="429",resource="",subresource="",verb="GET"} 9
apiserver_request_total{code="0",resource="pods",subresource="",verb="WATCH"} 3
`, bound, refused, conflicts)
	}
	for _, tt := range []struct {
		name                   string
		before, after          []byte
		all, refused, conflict float64
		note                   string
	}{
		{"throttled", body(0, 5, 0), body(100, 45, 2), 42, 40, 2, "answered 42 requests with an error status during the window (POST pods/binding 429 40, POST pods/binding 409 2); 429 is priority and fairness"},
		{"conflicts only", body(0, 5, 0), body(100, 5, 3), 3, 0, 3, "answered 3 requests with an error status during the window (POST pods/binding 409 3)"},
		{"none", body(0, 5, 0), body(100, 5, 0), 0, 0, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tl := timeline.NewTimeline(nil)
			for i := range 100 {
				tl.Add(timeline.Event{Kind: timeline.PodCreated, Phase: "gangs", Pod: fmt.Sprint("p", i)})
			}
			var notes []string
			env := &Env{
				Cluster:  &clusters.Cluster{APIServerMetrics: fixtureServer(t, tt.before, tt.after)},
				Timeline: tl, Measured: []string{"gangs"},
				Note: func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) },
			}
			m := newTraffic(env)
			ctx := context.Background()
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			items, err := m.Gather(ctx)
			if err != nil {
				t.Fatal(err)
			}
			all, ok := find(items, ItemAPIErrors, LabelRequest, All)
			if !ok || all.Data["Count"] != tt.all || !near(all.Data["PerPod"], tt.all/100) {
				t.Errorf("errors in all: %+v (found %v), want %g", all, ok, tt.all)
			}
			for key, want := range map[string]float64{"POST pods/binding 429": tt.refused, "POST pods/binding 409": tt.conflict} {
				it, ok := find(items, ItemAPIErrors, LabelRequest, key)
				if (want > 0) != ok || (ok && it.Data["Count"] != want) {
					t.Errorf("%s: %+v (found %v), want %g", key, it, ok, want)
				}
			}
			for _, it := range items {
				if it.Name == ItemAPIErrors && (strings.HasPrefix(it.Labels[LabelRequest], "GET") || strings.Contains(it.Labels[LabelRequest], "WATCH")) {
					t.Errorf("a non-resource request or a code-0 watch counted: %+v", it)
				}
			}
			switch {
			case tt.note == "" && len(notes) != 0:
				t.Errorf("notes %q, want none", notes)
			case tt.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], tt.note)):
				t.Errorf("notes %q, want one with %q", notes, tt.note)
			case tt.note != "" && tt.refused == 0 && strings.Contains(notes[0], "429"):
				t.Errorf("note %q explains a 429 that did not happen", notes[0])
			}
		})
	}
}
