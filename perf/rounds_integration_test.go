package perf_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gangbench/gangbench/observe/speedprobe"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
)

// TestIntegrationRounds runs the integration workload in two rounds on a real local cluster each:
// between them the first round's cluster is gone (so a reference run there has the machine to
// itself), and every item and event says which round and repetition it belongs to. The workload
// is created in scheduler_perf's order (arrival: schedulerPerf): every PodGroup before the window,
// which opens at the first pod.
func TestIntegrationRounds(t *testing.T) {
	skipShort(t)
	sc, err := scenario.LoadFile(filepath.Join("testdata", "scenarios", "integration-in-order.yaml"), scenario.Options{Measurements: []string{measure.BindingRate}})
	if err != nil {
		t.Fatal(err)
	}
	src, stateDir := localSourceIn(t, "perf-rounds")
	runDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var between []int
	pctx, stop := context.WithCancel(ctx)
	probe := speedprobe.Start(pctx, 100*time.Millisecond)
	defer func() {
		stop()
		if err := probe.Wait(); err != nil {
			t.Error(err)
		}
	}()
	run, err := perf.Run(ctx, perf.Options{Scenarios: []*scenario.Scenario{sc}, Source: src, RunDir: runDir, Rounds: 2, SpeedProbe: probe,
		BetweenRounds: func(_ context.Context, n int) error {
			between = append(between, n)
			if ents, err := os.ReadDir(stateDir); err != nil || len(ents) != 0 {
				t.Errorf("after round %d the cluster must be gone before anything runs between rounds: %v %v", n, ents, err)
			}
			return nil
		}})
	if err != nil {
		t.Fatalf("run: %v\nnotes: %v", err, run.Notes)
	}
	if len(between) != 1 || between[0] != 1 {
		t.Errorf("between rounds ran after rounds %v, want [1]", between)
	}
	got := map[[2]string]float64{}
	speeds := map[string]float64{}
	for _, d := range run.DataItems {
		if d.Name == perf.ItemMachineSpeed {
			speeds[d.Labels[perf.LabelRound]] = d.Data[measure.Value]
		}
		if d.Name == measure.ItemBindingRate && d.Labels["phase"] == "" {
			got[[2]string{d.Labels[perf.LabelRound], d.Labels["repetition"]}] = d.Data["Count"]
		}
	}
	if len(got) != 2 || got[[2]string{"1", "1"}] != 300 || got[[2]string{"2", "2"}] != 300 {
		t.Errorf("binding rate items by (round, repetition): %v, want 300 binds in (1, 1) and in (2, 2)", got)
	}
	// The speed probe ran through both windows.
	if len(speeds) != 2 || speeds["1"] <= 0 || speeds["2"] <= 0 {
		t.Errorf("machine speed by round: %v, want a figure for each of 1 and 2", speeds)
	}
	f, err := os.Open(filepath.Join(runDir, perf.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	binds, groups, pods := map[int]int{}, map[int]int{}, map[int]int{}
	firstPod, lastGroup, lastBind := map[int]time.Time{}, map[int]time.Time{}, map[int]time.Time{}
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		var e timeline.Event
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case timeline.PodBound:
			binds[e.Rep]++
			if e.Time.After(lastBind[e.Rep]) {
				lastBind[e.Rep] = e.Time
			}
		case timeline.PodGroupCreated:
			groups[e.Rep]++
			if !e.Ahead || pods[e.Rep] > 0 {
				t.Errorf("repetition %d: PodGroup %s ahead %v after %d pods; want every PodGroup ahead of the pods", e.Rep, e.Group, e.Ahead, pods[e.Rep])
			}
			lastGroup[e.Rep] = e.Time
		case timeline.PodCreated:
			if pods[e.Rep] == 0 || e.Time.Before(firstPod[e.Rep]) {
				firstPod[e.Rep] = e.Time
			}
			pods[e.Rep]++
		}
	}
	for rep, n := range groups {
		if n != 100 || pods[rep] != 300 || !firstPod[rep].After(lastGroup[rep]) {
			t.Errorf("repetition %d: %d PodGroups and %d pods, first pod %s after the last PodGroup; want 100, 300, after", rep, n, pods[rep], firstPod[rep].Sub(lastGroup[rep]))
		}
	}
	// The window opened at the first pod: the watch's span cannot start before it.
	for _, d := range run.DataItems {
		if d.Name == measure.ItemBindingRate && d.Labels["phase"] == "" {
			rep, _ := strconv.Atoi(d.Labels["repetition"])
			if span := time.Duration(d.Data["DurationSeconds"] * float64(time.Second)); span <= 0 || span > lastBind[rep].Sub(firstPod[rep])+time.Millisecond {
				t.Errorf("repetition %d: window %s, longer than first pod to last bind (%s): it opened before the pods", rep, span, lastBind[rep].Sub(firstPod[rep]))
			}
		}
	}
	if len(binds) != 2 || binds[1] != 300 || binds[2] != 300 {
		t.Errorf("binds in events.jsonl by repetition: %v, want 300 in each of 1 and 2", binds)
	}
	if ents, _ := os.ReadDir(stateDir); len(ents) != 0 {
		t.Errorf("cluster state left behind: %v", ents)
	}
}
