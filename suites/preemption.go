package suites

// preemptionFeatures is being written.
func preemptionFeatures() []Feature { return nil }
