package suites_test

import (
	"context"
	"sort"
	"strings"
	"testing"
)

// Temporary: dumps metric family names and label sets (deleted before hand-off).
func TestZZScratchObsDump(t *testing.T) {
	if harness == nil {
		t.Skip()
	}
	ctx := context.Background()
	for _, src := range []string{"scheduler", "apiserver"} {
		get := harness.Env.SchedulerMetrics
		if src == "apiserver" {
			get = harness.Env.APIServerMetrics
		}
		s, err := get(ctx)
		if err != nil {
			t.Logf("%s: %v", src, err)
			continue
		}
		var out []string
		for name, mf := range s.Families {
			if src == "apiserver" && name != "apiserver_request_total" {
				continue
			}
			if src == "scheduler" && !strings.HasPrefix(name, "scheduler_") {
				continue
			}
			for _, m := range mf.GetMetric() {
				var ls []string
				for _, lp := range m.GetLabel() {
					ls = append(ls, lp.GetName()+"="+lp.GetValue())
				}
				line := name + " " + mf.GetType().String() + " {" + strings.Join(ls, ",") + "}"
				if src == "apiserver" && !strings.Contains(line, "binding") && !strings.Contains(line, "podgroups") {
					continue
				}
				if strings.Contains(name, "extension_point") && !strings.Contains(line, "Placement") && !strings.Contains(line, "PodGroup") {
					continue
				}
				if strings.Contains(name, "plugin_execution") || strings.Contains(name, "queue_incoming") || strings.Contains(name, "event_handling") || strings.Contains(name, "hint") {
					continue
				}
				out = append(out, line)
			}
		}
		sort.Strings(out)
		t.Logf("%s:\n%s", src, strings.Join(out, "\n"))
	}
}
