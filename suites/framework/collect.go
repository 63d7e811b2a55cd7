package framework

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gangbench/gangbench/results"
)

// testEvent is one line of `go tool test2json` output.
type testEvent struct {
	Action  string
	Test    string
	Elapsed float64
	Output  string
}

// assessRE splits an assessment's test name. Feature names and statements may contain '/', which
// go test does not escape, so the split is anchored on the assertion ID instead of on slashes.
var assessRE = regexp.MustCompile(`^(Test[A-Za-z0-9]+)/(.+?)/([A-Z]{2,5}-[0-9][0-9A-Za-z]*)_(.*)$`)

// measurementRE is how a step reports a number: t.Logf("measurement bindSpreadSeconds=%.3f", …).
var measurementRE = regexp.MustCompile(`measurement ([A-Za-z0-9_]+)=([-+0-9.eE]+)`)

// Collector turns the test2json stream of a suite run into result cases, keyed by assertion ID, so
// the CLI can print one line per assertion as it finishes and write run.json at the end.
type Collector struct {
	catalogue map[string]Assertion
	cases     map[string]*results.Case
	order     []string
	output    map[string][]string // test name -> output lines
	onCase    func(results.Case)
	// Setup failures (a lane that could not be created) fail a feature without an assessment; they
	// are kept so the run does not look green.
	featureFailures []results.Case
	failedFeatures  map[string]bool // features with at least one failed assessment
	// failedFeatureNames holds the same features by their declared name, for the catalogue lookup.
	failedFeatureNames map[string]bool
	catalogueOrder     []Assertion
}

// NewCollector returns a collector; onCase (may be nil) is called as each assertion finishes.
func NewCollector(cat []Assertion, onCase func(results.Case)) *Collector {
	m := map[string]Assertion{}
	for _, a := range cat {
		m[a.ID] = a
	}
	return &Collector{catalogue: m, cases: map[string]*results.Case{}, output: map[string][]string{}, onCase: onCase, failedFeatures: map[string]bool{}, failedFeatureNames: map[string]bool{}, catalogueOrder: cat}
}

// Line consumes one line; lines that are not test2json events (a build error, say) are ignored.
func (c *Collector) Line(b []byte) {
	var ev testEvent
	if err := json.Unmarshal(b, &ev); err != nil || ev.Test == "" {
		return
	}
	switch ev.Action {
	case "output":
		out := strings.TrimRight(ev.Output, "\n")
		if strings.HasPrefix(strings.TrimSpace(out), "=== ") || strings.HasPrefix(strings.TrimSpace(out), "--- ") {
			return
		}
		lines := c.output[ev.Test]
		if len(lines) < 400 {
			c.output[ev.Test] = append(lines, out)
		}
	case "pass", "fail", "skip":
		c.finish(ev)
	}
}

func (c *Collector) finish(ev testEvent) {
	verdict := map[string]results.Verdict{"pass": results.Pass, "fail": results.Fail, "skip": results.Skip}[ev.Action]
	m := assessRE.FindStringSubmatch(ev.Test)
	if m == nil {
		top, feature, ok := strings.Cut(ev.Test, "/")
		if ok && ev.Action == "fail" && !c.failedFeatures[ev.Test] {
			// A feature failed without a failed assessment: its setup did. Recorded at the end.
			c.featureFailures = append(c.featureFailures, results.Case{
				ID: "SETUP", Suite: suiteOfTest(top), Name: strings.ReplaceAll(feature, "_", " "),
				Verdict: results.Error, Duration: dur(ev.Elapsed), Message: c.message(ev.Test),
			})
		}
		return
	}
	top, feature, id, statement := m[1], m[2], m[3], strings.ReplaceAll(m[4], "_", " ")
	a, ok := c.catalogue[id]
	if !ok {
		a = Assertion{ID: id, Statement: statement, Suite: suiteOfTest(top)}
	}
	cs := results.Case{ID: id, Suite: a.Suite, Name: a.Statement, Ref: a.Ref, Verdict: verdict, Duration: dur(ev.Elapsed)}
	if verdict != results.Pass {
		cs.Message = c.message(ev.Test)
	}
	if verdict == results.Fail {
		c.failedFeatures[top+"/"+feature] = true
		c.failedFeatureNames[strings.ReplaceAll(feature, "_", " ")] = true
	}
	for _, l := range c.output[ev.Test] {
		if m := measurementRE.FindStringSubmatch(l); m != nil {
			if v, err := strconv.ParseFloat(m[2], 64); err == nil {
				if cs.Measurements == nil {
					cs.Measurements = map[string]float64{}
				}
				cs.Measurements[m[1]] = v
			}
		}
	}
	if _, seen := c.cases[id]; !seen {
		c.order = append(c.order, id)
	}
	c.cases[id] = &cs
	if c.onCase != nil {
		c.onCase(cs)
	}
}

// message is the test's own output, without the framework's file:line prefixes' indentation.
func (c *Collector) message(test string) string {
	lines := c.output[test]
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, strings.TrimSpace(l))
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func dur(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }

// NotReported begins the message of an assertion the suite binary never reported on (see Cases), so
// a report can tell "nothing ran" from skips the suites decided.
const NotReported = "not run: the suite binary reported no result"

// Cases returns the assertions seen, in the order they finished, then setup failures. Every other
// assertion of the catalogue is listed too, as a skip that says it never reported, unless the run
// was interrupted (then only what ran is listed, under the run's INTERRUPTED banner).
func (c *Collector) Cases() []results.Case { return c.list(true) }

// PartialCases is Cases for an interrupted run: the assertions that never reported are left out.
func (c *Collector) PartialCases() []results.Case { return c.list(false) }

func (c *Collector) list(complete bool) []results.Case {
	out := make([]results.Case, 0, len(c.order)+len(c.featureFailures))
	for _, id := range c.order {
		out = append(out, *c.cases[id])
	}
	// e2e-framework stops a feature at its first fatal step; the steps it never ran are reported as
	// skipped, so a reader sees them instead of a shorter list.
	for _, a := range c.catalogueOrder {
		if _, seen := c.cases[a.ID]; seen || !c.failedFeatureNames[a.Feature] {
			continue
		}
		out = append(out, results.Case{ID: a.ID, Suite: a.Suite, Name: a.Statement, Ref: a.Ref, Verdict: results.Skip,
			Message: "not run: an earlier step of feature \"" + a.Feature + "\" failed"})
	}
	// Anything else of the catalogue that never reported is listed too: every run shows every
	// assertion, and a missing one says so instead of vanishing.
	for _, a := range c.catalogueOrder {
		if _, seen := c.cases[a.ID]; seen || c.failedFeatureNames[a.Feature] || !complete {
			continue
		}
		out = append(out, results.Case{ID: a.ID, Suite: a.Suite, Name: a.Statement, Ref: a.Ref, Verdict: results.Skip,
			Message: NotReported + " for it (feature \"" + a.Feature + "\")"})
	}
	out = append(out, c.featureFailures...)
	return out
}

// suiteOfTest is the suite a top-level test reports as: its name after Test, words joined by '-'
// (TestUpstreamJobs is suite upstream-jobs, TestPreemptionPolicy preemption-policy).
func suiteOfTest(top string) string {
	var b strings.Builder
	for i, r := range strings.TrimPrefix(top, "Test") {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
