package suites

import "slices"

// All returns every feature of every suite, in SuiteNames order. It builds fresh closures each call,
// so one run's state never leaks into another's.
func All() []Feature {
	return slices.Concat(
		experimentFeatures(),
		barrierFeatures(),
		minCountFeatures(),
		preemptionFeatures(),
		statusFeatures(),
		validationFeatures(),
		observabilityFeatures(),
		faultFeatures(),
	)
}
