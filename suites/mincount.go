package suites

// minCountFeatures is being written.
func minCountFeatures() []Feature { return nil }
