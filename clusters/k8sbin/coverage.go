package k8sbin

// SchedulerCoverPackages are the packages a coverage build of kube-scheduler instruments: the
// scheduler itself, its framework, plugins, queue and cache, and the main package (Go writes a
// binary's counters through hooks in an instrumented main; without it nothing is written).
const SchedulerCoverPackages = "k8s.io/kubernetes/pkg/scheduler/...,k8s.io/kubernetes/cmd/kube-scheduler"

// SchedulerCoveragePatch is kube-scheduler built with coverage instrumentation of the scheduler's
// packages. Go writes a binary's counters only when it exits normally, and the fault suites kill
// the scheduler with SIGKILL, which would lose everything it ran before; so the build's main also
// writes its counters to GOCOVERDIR every few seconds (each write is a file of cumulative counts
// that `go tool covdata` merges). Only what ran in the last seconds before a SIGKILL is lost.
func SchedulerCoveragePatch() Patch {
	return Patch{
		Name:   "coverage",
		Binary: SchedulerBinaryName,
		Cover:  SchedulerCoverPackages,
		Edits: []Edit{{
			File: "cmd/kube-scheduler/scheduler.go",
			Old:  "import (\n\t\"os\"\n",
			New:  "import (\n\t\"os\"\n\t\"runtime/coverage\"\n\t\"time\"\n",
		}, {
			File: "cmd/kube-scheduler/scheduler.go",
			Old:  "func main() {\n",
			New: "func main() {\n" +
				"\t// gangbench: counters written every few seconds, so a scheduler killed by a fault still reports.\n" +
				"\tif dir := os.Getenv(\"GOCOVERDIR\"); dir != \"\" {\n" +
				"\t\tgo func() {\n" +
				"\t\t\tfor range time.Tick(3 * time.Second) {\n" +
				"\t\t\t\t_ = coverage.WriteCountersDir(dir)\n" +
				"\t\t\t}\n" +
				"\t\t}()\n" +
				"\t}\n",
		}},
	}
}
