package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// maxFuzzInput bounds what FuzzReadRun decodes ("no hang" is a promise about bounded input). Real
// run.json files of a 500-node perf run are a few hundred KiB; the fuzzer's inputs are far smaller.
const maxFuzzInput = 1 << 20

// fuzzDeadline is how long one Read (plus Write and the reports) may take; the margin is for a
// loaded 2-core CI machine running the fuzzer's workers.
const fuzzDeadline = 5 * time.Second

// within runs fn and fails the test if it does not return in d, so a reader that loops forever
// fails with a message instead of stalling the fuzzer until -fuzztime ends.
// fn runs on another goroutine, where t.Fatal must not be called, so it returns its failure.
func within(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-timer.C:
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// FuzzReadRun writes arbitrary bytes as run.json and reads them. Read must not panic or hang, and
// must name the file in its error. A run it accepts must be writable (Write validates what Read
// validated), read back equal, write the same bytes again (the format is a fixed point after one
// round) and render in every report format without panicking.
func FuzzReadRun(f *testing.F) {
	seed, err := json.Marshal(fixture())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	if runs, err := filepath.Glob(filepath.Join("..", "perf", "testdata", "runs", "*", FileName)); err == nil {
		for _, p := range runs {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","started":"2026-11-29T16:15:00+01:00","interrupted":true,` +
		`"cases":[{"id":"A","suite":"s","name":"n","verdict":"pass","durationSeconds":1e-9,"measurements":{}}],"dataItems":[{"name":"x","data":null}]}`))
	f.Add([]byte(`{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","cases":[{"verdict":"skip","durationSeconds":1e300}]}`))
	f.Add([]byte(`{"apiVersion":"gangbench.dev/v1alpha1","kind":"Run","environment":{"host":{},"clusterName":"foo",` +
		`"componentFeatureGates":{"kube-scheduler":{"A":"true"},"kube-apiserver":{}},"clusterRequest":{ "provider" : "local", "spec": {"readyTimeout": 180000000000} }}}`))

	// One directory per fuzzing process, reused by every input: a process runs one input at a time,
	// and a fresh t.TempDir per input made the file system, not the reader, the bottleneck.
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			t.Skip("larger than the fuzzer's inputs need to be")
		}
		dir := filepath.Join(base, "input")
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, FileName)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var r *Run
		var err error
		within(t, fuzzDeadline, "Read", func() error { r, err = Read(dir); return nil })
		if err != nil {
			if !strings.Contains(err.Error(), path) && !strings.Contains(err.Error(), dir) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		within(t, fuzzDeadline, "Write, Read and the reports", func() error {
			dir2 := filepath.Join(dir, "again")
			if err := Write(dir2, r); err != nil {
				return fmt.Errorf("Read accepted a run Write refuses: %w", err)
			}
			r2, err := Read(dir2)
			if err != nil {
				return fmt.Errorf("a written run does not read back: %w", err)
			}
			if !equalRuns(r, r2) {
				return fmt.Errorf("round trip changed the run:\n%+v\n%+v", r, r2)
			}
			dir3 := filepath.Join(dir, "third")
			if err := Write(dir3, r2); err != nil {
				return err
			}
			b2, _ := os.ReadFile(filepath.Join(dir2, FileName))
			b3, _ := os.ReadFile(filepath.Join(dir3, FileName))
			if !bytes.Equal(b2, b3) {
				return fmt.Errorf("writing a read-back run changed its bytes:\n%s\n%s", b2, b3)
			}
			r.Summary()
			r.Headline()
			for _, c := range r.Cases {
				FormatCaseLine(c)
				FormatCaseDetail(c)
			}
			return errors.Join(WriteText(io.Discard, r), WriteMarkdown(io.Discard, r), WriteJUnit(io.Discard, r))
		})
	})
}

// equalRuns compares what a run.json can express: an empty map or list is written as nothing and
// reads back as nil, and instants compare as instants (a zone offset may come back as Local).
func equalRuns(a, b *Run) bool {
	a, b = normalised(a), normalised(b)
	if !a.Started.Equal(b.Started) || !a.Finished.Equal(b.Finished) {
		return false
	}
	a.Started, b.Started, a.Finished, b.Finished = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func normalised(r *Run) *Run {
	c := *r
	c.Cases = nilIfEmpty(c.Cases)
	c.DataItems = nilIfEmpty(c.DataItems)
	c.Notes = nilIfEmpty(c.Notes)
	c.Environment.FeatureGates = nilIfEmptyMap(c.Environment.FeatureGates)
	c.Environment.Extra = nilIfEmptyMap(c.Environment.Extra)
	c.Environment.ComponentFeatureGates = nilIfEmptyMap(c.Environment.ComponentFeatureGates)
	// The request is recorded verbatim: its layout (indentation, spaces) is not part of it, nor is
	// how a string spells <, > and & (encoding/json writes a RawMessage with them escaped as \u003c,
	// \u003e and \u0026, so a request read with a bare & comes back escaped).
	if raw := c.Environment.ClusterRequest; len(raw) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			var e bytes.Buffer
			json.HTMLEscape(&e, b.Bytes())
			c.Environment.ClusterRequest = e.Bytes()
		}
	}
	c.Cases = append([]Case(nil), c.Cases...)
	for i := range c.Cases {
		c.Cases[i].Measurements = nilIfEmptyMap(c.Cases[i].Measurements)
		c.Cases[i].Artifacts = nilIfEmpty(c.Cases[i].Artifacts)
	}
	c.DataItems = append([]DataItem(nil), c.DataItems...)
	for i := range c.DataItems {
		c.DataItems[i].Labels = nilIfEmptyMap(c.DataItems[i].Labels)
	}
	return &c
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func nilIfEmptyMap[V any](m map[string]V) map[string]V {
	if len(m) == 0 {
		return nil
	}
	return m
}
