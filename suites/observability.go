package suites

// observabilityFeatures is being written.
func observabilityFeatures() []Feature { return nil }
