package suites

// validationFeatures is being written.
func validationFeatures() []Feature { return nil }
