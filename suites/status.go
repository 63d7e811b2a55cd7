package suites

// statusFeatures is being written.
func statusFeatures() []Feature { return nil }
