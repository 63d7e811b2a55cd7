package scenario_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gangbench/gangbench/perf/internal/strictyaml"
	"github.com/gangbench/gangbench/perf/scenario"
)

// maxFuzzInput bounds what the fuzz target decodes: scenario files are hand-written and small, and
// "no hang" is a promise about bounded input.
const maxFuzzInput = 64 << 10

// fuzzDeadline is how long one decode may take. Decoding a 64 KiB file takes well under a
// millisecond; the margin is for a loaded 2-core CI machine running the fuzzer's workers.
const fuzzDeadline = 5 * time.Second

// within runs fn and fails the test if it does not return in d, so a decoder that loops forever
// fails with a message instead of stalling the fuzzer until -fuzztime ends.
// fn runs on another goroutine, where t.Fatal must not be called: it only decodes.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// FuzzDecodeScenario feeds arbitrary bytes (and command-line overrides) to scenario.Load. It must
// not panic or hang; an error must be strictyaml.Errors naming the file on every line; a scenario it
// accepts must satisfy every rule validate promises, so nothing impossible reaches a cluster; and
// decoding is deterministic.
func FuzzDecodeScenario(f *testing.F) {
	for _, dir := range []string{filepath.Join("..", "testdata", "scenarios"), filepath.Join("..", "scenarios")} {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, 0, 0, "")
		}
	}
	f.Add([]byte("apiVersion: gangbench.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nparams: {g: 1}\ncluster: {nodes: 1}\nphases:\n- {name: a, groups: $g, podsPerGroup: 1, gpusPerPod: 1}\n"), 3, 2, "g=2")
	f.Add([]byte("a: &x [*x]\n"), 0, 0, "")

	f.Fuzz(func(t *testing.T, data []byte, nodes, gpusPerNode int, param string) {
		if len(data) > maxFuzzInput {
			t.Skip("larger than any scenario file")
		}
		opts := scenario.Options{Nodes: nodes, GPUsPerNode: gpusPerNode, Measurements: measurements}
		if k, v, ok := strings.Cut(param, "="); ok {
			opts.Params = map[string]string{k: v}
		}
		const file = "fuzz.yaml"
		var s1, s2 *scenario.Scenario
		var err1, err2 error
		within(t, fuzzDeadline, "scenario.Load", func() {
			s1, err1 = scenario.Load(file, data, opts)
			s2, err2 = scenario.Load(file, data, opts)
			scenario.Peek(data)
		})
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) || !reflect.DeepEqual(s1, s2) {
			t.Fatalf("two loads of the same input differ:\n%v\n%v", err1, err2)
		}
		if err1 != nil {
			checkErrors(t, file, err1)
			return
		}
		checkValid(t, s1, opts)
	})
}

// checkErrors asserts the error contract: every problem is a strictyaml.Error naming the file.
func checkErrors(t *testing.T, file string, err error) {
	t.Helper()
	var es strictyaml.Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("error %T is not strictyaml.Errors: %v", err, err)
	}
	for _, e := range es {
		if e.File != file || e.Line < 0 || e.Msg == "" {
			t.Fatalf("error does not name the file, a line and a message: %+v", e)
		}
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, file+":") {
			t.Fatalf("error line %q does not start with the file name", line)
		}
	}
}

// checkValid asserts what a resolved scenario promises its users.
func checkValid(t *testing.T, s *scenario.Scenario, opts scenario.Options) {
	t.Helper()
	c := s.Cluster
	if s.Name == "" || len(s.Name) > 40 || len(s.Hash) != 16 {
		t.Fatalf("name %q hash %q", s.Name, s.Hash)
	}
	if c.Nodes < 1 || c.Nodes > scenario.MaxNodes || c.GPUsPerNode < 1 || c.GPUsPerNode > 64 {
		t.Fatalf("cluster out of range: %+v", c)
	}
	if opts.Nodes > 0 && c.Nodes != opts.Nodes {
		t.Fatalf("--nodes %d not applied: %d", opts.Nodes, c.Nodes)
	}
	if s.Repetitions < 1 || s.Repetitions > 100 || s.Timeout <= 0 || s.Settle <= 0 || s.Settle >= s.Timeout {
		t.Fatalf("repetitions %d timeout %s settle %s", s.Repetitions, s.Timeout, s.Settle)
	}
	if c.GPUAPI != "" && !slices.Contains(scenario.GPUAPIs(), c.GPUAPI) {
		t.Fatalf("GPU API %q accepted", c.GPUAPI)
	}
	if s.Scheduler.KubeAPIQPS < 1 || s.Scheduler.KubeAPIBurst < 1 {
		t.Fatalf("scheduler: %+v", s.Scheduler)
	}
	for _, m := range s.Measurements {
		if !slices.Contains(opts.Measurements, m) {
			t.Fatalf("unknown measurement %q accepted", m)
		}
	}
	if len(s.Phases) == 0 || s.MeasuredPods() == 0 {
		t.Fatalf("no measured phase: %+v", s.Phases)
	}
	for i, ph := range s.Phases {
		if ph.Groups < 1 || ph.PodsPerGroup < 1 || ph.GPUsPerPod < 0 || ph.GPUsPerPod > c.GPUsPerNode {
			t.Fatalf("phase %d: impossible shape accepted: %+v", i, ph)
		}
		switch ph.Policy {
		case scenario.Gang:
			if ph.MinCount < 1 || ph.MinCount > ph.PodsPerGroup {
				t.Fatalf("phase %d: minCount %d of %d accepted", i, ph.MinCount, ph.PodsPerGroup)
			}
		case scenario.Basic:
			if ph.MinCount != 0 {
				t.Fatalf("phase %d: basic group with minCount %d", i, ph.MinCount)
			}
		default:
			t.Fatalf("phase %d: policy %q", i, ph.Policy)
		}
		// The capacity rule: each phase fits next to every earlier phase it cannot preempt.
		gpus, pods := ph.GPUs(), ph.Pods()
		for _, e := range s.Phases[:i] {
			if e.Priority >= ph.Priority {
				gpus += e.GPUs()
				pods += e.Pods()
			}
		}
		if gpus < 0 || gpus > c.GPUs() || pods < 1 || pods > c.Nodes*scenario.NodePods {
			t.Fatalf("phase %d: %d GPUs / %d pods accepted on %d nodes × %d GPUs", i, gpus, pods, c.Nodes, c.GPUsPerNode)
		}
	}
}
