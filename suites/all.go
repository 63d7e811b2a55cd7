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
	// cluster are the workload features (clusters.FeatureSets) its cluster must have; its
	// assertions skip elsewhere, naming the gate that is off.
	cluster []string
}

// registry lists the suites in run order.
func registry() []suite {
	return []suite{
		{name: "experiments", test: "TestExperiments", features: experimentFeatures},
		{name: "barriers", test: "TestBarriers", features: barrierFeatures},
		{name: "mincount", test: "TestMinCount", features: minCountFeatures},
		{name: "preemption", test: "TestPreemption", features: preemptionFeatures},
		{name: "status", test: "TestStatus", features: statusFeatures},
		{name: "validation", test: "TestValidation", features: validationFeatures},
		{name: "observability", test: "TestObservability", features: observabilityFeatures},
		{name: "faults", test: "TestFaults", features: faultFeatures},
		{name: "topology", test: "TestTopology", features: topologyFeatures, cluster: []string{"tas"}},
		{name: "preemption-policy", test: "TestPreemptionPolicy", features: preemptionPolicyFeatures, cluster: []string{"preemption-policy"}},
		{name: "jobs", test: "TestJobs", features: jobFeatures, cluster: []string{"jobs"}},
		{name: "composite", test: "TestComposite", features: compositeFeatures, cluster: []string{"composite"}},
		{name: "dra", test: "TestDRA", features: draFeatures, cluster: []string{"workload-claims"}},
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

// ClusterFeatures are the workload features (clusters.FeatureSets) a cluster must have for the
// suite to run rather than skip; nil for the suites of the gang core.
func ClusterFeatures(name string) []string {
	for _, s := range registry() {
		if s.name == name {
			return s.cluster
		}
	}
	return nil
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
