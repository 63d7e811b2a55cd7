// Package results is gangbench's versioned result schema: the run.json every run writes into its run
// directory (_output/runs/<id>/), plus JUnit XML, text and markdown reports computed from it. It needs
// no cluster and imports only the standard library.
package results

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// SchemaVersion is written as "apiVersion" in run.json; Kind is its "kind".
const (
	SchemaVersion = "gangbench.dev/v1alpha1"
	Kind          = "Run"
)

// Verdict is the outcome of one case.
type Verdict string

const (
	Pass         Verdict = "pass"
	Fail         Verdict = "fail"
	Skip         Verdict = "skip"
	Error        Verdict = "error" // the harness failed, distinct from the scheduler failing an assertion
	SLOViolation Verdict = "slo-violation"
)

// Valid reports whether v is one of the known verdicts.
func (v Verdict) Valid() bool {
	switch v {
	case Pass, Fail, Skip, Error, SLOViolation:
		return true
	}
	return false
}

// Failing reports whether v makes a run fail (fail, error, slo-violation or unknown).
func (v Verdict) Failing() bool { return v != Pass && v != Skip }

// Run is the content of run.json.
type Run struct {
	APIVersion  string      `json:"apiVersion"`
	Kind        string      `json:"kind"`
	ID          string      `json:"id"`
	Command     string      `json:"command,omitempty"`
	Started     time.Time   `json:"started"`
	Finished    time.Time   `json:"finished,omitzero"`
	Interrupted bool        `json:"interrupted,omitempty"` // stopped by a signal: partial results
	Environment Environment `json:"environment"`
	Cases       []Case      `json:"cases,omitempty"`
	DataItems   []DataItem  `json:"dataItems,omitempty"`
	Notes       []string    `json:"notes,omitempty"`
}

// Environment describes what was tested and where.
type Environment struct {
	Provider          string `json:"provider,omitempty"`
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	SchedulerVersion  string `json:"schedulerVersion,omitempty"`
	SchedulerBinary   string `json:"schedulerBinary,omitempty"`
	// GangAPI is the group/version the harness spoke, e.g. scheduling.k8s.io/v1alpha2 on v1.36.
	GangAPI      string            `json:"gangAPI,omitempty"`
	Nodes        int               `json:"nodes,omitempty"`
	GPUsPerNode  int               `json:"gpusPerNode,omitempty"`
	Host         Host              `json:"host"`
	FeatureGates map[string]string `json:"featureGates,omitempty"`
	// ComponentFeatureGates are the feature gates each Kubernetes component ran with (FeatureGates
	// with the component's own on top), keyed by component (kube-apiserver, …).
	ComponentFeatureGates map[string]map[string]string `json:"componentFeatureGates,omitempty"`
	// ClusterName is the name of the cluster the run created or used.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterRequest is the request the run created its cluster from, verbatim (gangbench's
	// cluster-request.json: provider, spec, provider options); absent for an existing cluster.
	ClusterRequest json.RawMessage `json:"clusterRequest,omitempty"`
	// Profile is perf's load profile (quiet or realistic); empty for conformance runs.
	Profile string            `json:"profile,omitempty"`
	Extra   map[string]string `json:"extra,omitempty"`
}

// Host is the machine gangbench ran on.
type Host struct {
	Hostname string `json:"hostname,omitempty"`
	Cores    int    `json:"cores,omitempty"`
	GOOS     string `json:"goos,omitempty"`
	GOARCH   string `json:"goarch,omitempty"`
}

// CurrentHost describes the machine this process runs on.
func CurrentHost() Host {
	name, _ := os.Hostname()
	return Host{Hostname: name, Cores: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH}
}

// Case is the result of one assertion.
type Case struct {
	ID           string             `json:"id"`    // stable assertion ID, e.g. "BAR-03"
	Suite        string             `json:"suite"` // e.g. "barriers"
	Name         string             `json:"name"`  // one-line statement
	Ref          string             `json:"ref,omitempty"`
	Verdict      Verdict            `json:"verdict"`
	Duration     time.Duration      `json:"-"`                 // JSON: "durationSeconds"
	Message      string             `json:"message,omitempty"` // failure or skip reason, may be multi-line
	Measurements map[string]float64 `json:"measurements,omitempty"`
	Artifacts    []string           `json:"artifacts,omitempty"` // paths relative to the run directory
}

type caseAlias Case // Case without its methods

// maxDurationSeconds is the longest case duration run.json accepts: about 292 years, the range of
// time.Duration, rounded down to whole seconds so the conversion never overflows.
const maxDurationSeconds = float64(math.MaxInt64 / int64(time.Second))

type caseJSON struct {
	caseAlias
	DurationSeconds float64 `json:"durationSeconds"`
}

// MarshalJSON writes Duration as "durationSeconds".
func (c Case) MarshalJSON() ([]byte, error) {
	return json.Marshal(caseJSON{caseAlias(c), c.Duration.Seconds()})
}

// UnmarshalJSON reads "durationSeconds" and, like Read, rejects unknown fields.
func (c *Case) UnmarshalJSON(data []byte) error {
	var j caseJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	// A duration is measured, so never negative, and must fit a time.Duration: converting a larger
	// float to an integer gives an arbitrary value (1e300 came back as -292 years).
	if j.DurationSeconds < 0 || j.DurationSeconds > maxDurationSeconds {
		return fmt.Errorf("case %q: durationSeconds %g is out of range (accepted: 0 to %g)", j.ID, j.DurationSeconds, maxDurationSeconds)
	}
	*c = Case(j.caseAlias)
	c.Duration = time.Duration(math.Round(j.DurationSeconds * float64(time.Second)))
	return nil
}

// DataItem is a benchmark measurement series (perf-dash style).
type DataItem struct {
	Name   string             `json:"name"`
	Unit   string             `json:"unit,omitempty"`
	Labels map[string]string  `json:"labels,omitempty"`
	Data   map[string]float64 `json:"data"`
}

// UnitOf is the unit of one data key. Unit is the unit of the item's figure (its Average, Min,
// Max, percentiles, Value); keys that describe the figure carry their own: a binding rate's Count
// counts pods, not pods/s, and its DurationSeconds is seconds.
func (d DataItem) UnitOf(key string) string {
	switch {
	case key == "Average" || key == "Min" || key == "Max" || key == "Value" || strings.HasPrefix(key, "Perc"):
		return d.Unit
	case strings.HasSuffix(key, "Seconds"):
		return "s"
	case strings.HasSuffix(key, "MiB"):
		return "MiB"
	case strings.HasSuffix(key, "KiB"):
		return "KiB"
	case strings.HasSuffix(key, "Ms"):
		return "ms"
	case strings.HasSuffix(key, "MiBPerPod"):
		return "MiB/pod"
	case key == "GoroutinesPerPod":
		return "goroutines/pod"
	case strings.HasSuffix(key, "Cycles"):
		return "cycles"
	case key == "CPUShare":
		return "cores"
	case strings.HasPrefix(key, "Ratio"):
		return "×"
	case key == "Samples":
		return "samples"
	case key == "Count":
		// The numerator of a rate ("pods/s" counts pods); a count of observations otherwise.
		if num, _, ok := strings.Cut(d.Unit, "/"); ok {
			return num
		}
		return ""
	}
	// Another count (Pods, Gangs, Transitions): of the item's own kind when the item counts things.
	if d.Unit != "" && d.Unit != "s" && !strings.Contains(d.Unit, "/") {
		return d.Unit
	}
	return ""
}

// NewRunID returns a sortable run ID like "20261129-161500-a3f0": now in UTC plus 4 random hex digits.
func NewRunID(now time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// Validate checks what Write and Read rely on: schema identity, known verdicts, finite numbers
// (JSON cannot hold NaN or Inf) and artifact paths inside the run directory.
func (r *Run) Validate() error {
	if r.APIVersion != "" && r.APIVersion != SchemaVersion {
		return fmt.Errorf("apiVersion %s is not %s", r.APIVersion, SchemaVersion)
	}
	if r.Kind != "" && r.Kind != Kind {
		return fmt.Errorf("kind %q is not %q", r.Kind, Kind)
	}
	for i, c := range r.Cases {
		if !c.Verdict.Valid() {
			return fmt.Errorf("case %d (%s): unknown verdict %q (accepted: %s, %s, %s, %s, %s)", i, c.ID, c.Verdict, Pass, Fail, Skip, Error, SLOViolation)
		}
		for _, k := range sortedKeys(c.Measurements) {
			if v := c.Measurements[k]; math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("case %d (%s): measurement %s is %v", i, c.ID, k, v)
			}
		}
		for _, a := range c.Artifacts {
			if !filepath.IsLocal(filepath.FromSlash(a)) {
				return fmt.Errorf("case %d (%s): artifact %q is not a relative path inside the run directory", i, c.ID, a)
			}
		}
	}
	for i, d := range r.DataItems {
		for _, k := range sortedKeys(d.Data) {
			if v := d.Data[k]; math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("data item %d (%s): %s is %v", i, d.Name, k, v)
			}
		}
	}
	return nil
}

// SuiteSummary counts the verdicts of one suite (or of the whole run).
type SuiteSummary struct {
	Total, Passed, Failed, Skipped, Errors, SLOViolations int
	Duration                                              time.Duration // sum of case durations
}

func (s *SuiteSummary) add(c Case) {
	s.Total++
	s.Duration += c.Duration
	switch c.Verdict {
	case Pass:
		s.Passed++
	case Fail:
		s.Failed++
	case Skip:
		s.Skipped++
	case SLOViolation:
		s.SLOViolations++
	default: // error, and unknown verdicts, which are harness bugs
		s.Errors++
	}
}

// Summary counts verdicts per run and per suite.
type Summary struct {
	Total, Passed, Failed, Skipped, Errors, SLOViolations int
	Duration                                              time.Duration // sum of case durations
	BySuite                                               map[string]SuiteSummary
	Suites                                                []string // suite names in order of first appearance
}

// OK reports whether nothing failed, errored or violated an SLO.
func (s Summary) OK() bool { return s.Failed+s.Errors+s.SLOViolations == 0 }

// Summary counts the run's verdicts.
func (r *Run) Summary() Summary {
	s := Summary{BySuite: map[string]SuiteSummary{}}
	var t SuiteSummary
	for _, c := range r.Cases {
		name := suiteName(c)
		ss, seen := s.BySuite[name]
		if !seen {
			s.Suites = append(s.Suites, name)
		}
		ss.add(c)
		t.add(c)
		s.BySuite[name] = ss
	}
	s.Total, s.Passed, s.Failed, s.Skipped, s.Errors, s.SLOViolations, s.Duration =
		t.Total, t.Passed, t.Failed, t.Skipped, t.Errors, t.SLOViolations, t.Duration
	return s
}

// Passed reports whether the run completed and nothing failed, errored or violated an SLO.
func (r *Run) Passed() bool { return !r.Interrupted && r.Summary().OK() }

// Headline is "PASS" or "FAIL" (an interrupted run fails).
func (r *Run) Headline() string {
	if r.Passed() {
		return "PASS"
	}
	return "FAIL"
}

func suiteName(c Case) string {
	if c.Suite == "" {
		return "none"
	}
	return c.Suite
}

// StripANSI removes ANSI terminal escape sequences (CSI such as colours, OSC, two-byte escapes).
func StripANSI(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		switch {
		case j >= len(s):
		case s[j] == '[': // CSI: parameter and intermediate bytes, then a final byte
			for j++; j < len(s) && s[j] >= 0x20 && s[j] <= 0x3f; j++ {
			}
			for ; j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f; j++ {
			}
			if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7e {
				j++
			}
		case s[j] == ']': // OSC: up to BEL or ESC \
			for j++; j < len(s) && s[j] != 0x07 && s[j] != 0x1b; j++ {
			}
			if j < len(s) && s[j] == 0x07 {
				j++
			} else if j+1 < len(s) && s[j+1] == '\\' {
				j += 2
			}
		default: // nF escapes such as ESC ( B: intermediate bytes, then a final byte
			for ; j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f; j++ {
			}
			if j < len(s) {
				j++
			}
		}
		i = j - 1
	}
	return b.String()
}

func firstLine(s string) string {
	s = strings.TrimLeft(s, "\r\n")
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
