// Package framework is what every conformance suite stands on: a Feature of Steps, each checking
// one assertion with a stable ID; the Lane a feature runs in (a namespace and nodes of its own);
// waits that poll with a deadline and report the last state seen; the Harness that connects to or
// creates the cluster, watches PodGroup status and collects logs on failure; the Collector that
// turns `go test -json` into results. The suites themselves live in package suites; adding one
// changes nothing here.
package framework
