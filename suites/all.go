// Package suites holds gangbench's conformance suites: e2e-framework features, one per behaviour,
// whose assessments carry stable assertion IDs. The features are built here, in a normal package, so
// the CLI can list them and generate docs; conformance_test.go runs them as Go tests. What they
// stand on (lanes, waits, the harness, result collection) is package suites/framework.
package suites

import (
	"github.com/gangbench/gangbench/suites/framework"
)

// suite is one conformance suite: the name users pass to --suites, the Go test in
// conformance_test.go that runs it (for -test.run filters), and its features. A new suite is a file
// set of its own, one line here and one test function there; the framework does not change.
type suite struct {
	name, test string
	features   func() []framework.Feature
}

// registry lists the suites in run order.
func registry() []suite {
	return []suite{
		{"experiments", "TestExperiments", experimentFeatures},
		{"barriers", "TestBarriers", barrierFeatures},
		{"mincount", "TestMinCount", minCountFeatures},
		{"preemption", "TestPreemption", preemptionFeatures},
		{"status", "TestStatus", statusFeatures},
		{"validation", "TestValidation", validationFeatures},
		{"observability", "TestObservability", observabilityFeatures},
		{"faults", "TestFaults", faultFeatures},
	}
}

// All returns every feature of every suite, in SuiteNames order. It builds fresh closures each call,
// so one run's state never leaks into another's.
func All() []framework.Feature {
	var out []framework.Feature
	for _, s := range registry() {
		out = append(out, s.features()...)
	}
	return out
}

// SuiteNames lists the suites in run order.
func SuiteNames() []string {
	var out []string
	for _, s := range registry() {
		out = append(out, s.name)
	}
	return out
}

// TestFunc is the Go test that runs a suite, for -test.run filters; "" for an unknown suite.
func TestFunc(name string) string {
	for _, s := range registry() {
		if s.name == name {
			return s.test
		}
	}
	return ""
}
