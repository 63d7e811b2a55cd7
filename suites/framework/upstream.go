package framework

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/results"
)

// Upstream's own gang specs (the [FeatureGate:GenericWorkload] specs of k8s.io/kubernetes
// test/e2e/scheduling: GangScheduling, Workload, WorkloadAwarePreemption) run as a second opinion
// next to gangbench's suites, against the same cluster, from the binary k8sbin.EnsureUpstreamE2E
// builds. They are selected by label: without a focus or a label filter the framework skips
// [Feature:OffByDefault] specs, which all of them are in v1.37.

// UpstreamSelection is a set of upstream's specs run as one suite.
type UpstreamSelection struct {
	// LabelFilter is ginkgo's label filter that selects the specs.
	LabelFilter string
	// Skip are specs, by UpstreamSpecName, left out on this cluster, each with the reason; they are
	// reported skipped with it.
	Skip map[string]string
}

// UpstreamGangSpecs selects upstream's gang specs of test/e2e/scheduling. The Job specs of
// test/e2e/apps that also carry GenericWorkload's label belong to UpstreamJobSpecs: they need the
// WorkloadWithJob gate, which a cluster may not have.
func UpstreamGangSpecs() UpstreamSelection {
	return UpstreamSelection{LabelFilter: "FeatureGate:GenericWorkload && !FeatureGate:WorkloadWithJob"}
}

// upstreamJobCompletes is upstream's Job gang spec that waits for the Job to complete: its pods must
// run to success, which only a kubelet does (simulated nodes keep pods Running).
const upstreamJobCompletes = "Job should create Workload and PodGroup for gang-eligible Job"

// UpstreamJobSpecs selects upstream's Job gang specs (test/e2e/apps/job.go, label
// FeatureGate:WorkloadWithJob). Unless every node a pod can land on runs a kubelet, the spec that
// waits for its pods to succeed is skipped, saying why, rather than failed after the Job's 15-minute
// timeout: its pods have no node selector, and on a simulated node they never finish.
func UpstreamJobSpecs(everyNodeRunsKubelet bool) UpstreamSelection {
	sel := UpstreamSelection{LabelFilter: "FeatureGate:WorkloadWithJob"}
	if !everyNodeRunsKubelet {
		sel.Skip = map[string]string{upstreamJobCompletes: "waits for the Job's pods to succeed, and some node they can land on is simulated (kwok keeps pods Running; only a kubelet completes them)"}
	}
	return sel
}

// EveryNodeRunsKubelet reports whether every node a pod without tolerations or a selector can land
// on (schedulable, no NoSchedule or NoExecute taint) runs a kubelet: kubelets report the images they
// hold (node.status.images), simulated nodes report none.
func EveryNodeRunsKubelet(ctx context.Context, cs kubernetes.Interface) (bool, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list nodes: %w", err)
	}
	return !slices.ContainsFunc(nodes.Items, func(n corev1.Node) bool { return podsLand(n) && len(n.Status.Images) == 0 }), nil
}

// podsLand says whether a plain pod can be scheduled to the node.
func podsLand(n corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	})
}

// nodesHoldImage says whether any node of the cluster reports an image whose name starts with
// prefix (node.status.images, which kubelets fill and kwok leaves empty).
func nodesHoldImage(ctx context.Context, cs kubernetes.Interface, prefix string) (bool, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		for _, img := range n.Status.Images {
			if slices.ContainsFunc(img.Names, func(name string) bool { return strings.HasPrefix(name, prefix) }) {
				return true, nil
			}
		}
	}
	return false, nil
}

// UpstreamSpec is one upstream spec's result.
type UpstreamSpec struct {
	Name     string
	Verdict  results.Verdict
	Duration time.Duration
	Message  string
}

// RunUpstream runs the upstream spec binary against the cluster of kubeconfig (cs is a client of
// the same cluster), writing its JUnit report and log into dir, and returns the specs that ran
// (and any suite-level step that failed), sorted by name. A non-zero exit with a readable report is
// not an error: failed specs say why. The specs create PriorityClasses and patch an extended
// resource onto a node, so nothing else may run on the cluster meanwhile.
func RunUpstream(ctx context.Context, cs kubernetes.Interface, bin, kubeconfig, dir string, sel UpstreamSelection) ([]UpstreamSpec, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "upstream.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// Upstream's pods run the e2e pause and busybox images from upstream's registries, which no
	// node here can pull. The framework reads its registries from KUBE_TEST_REPO_LIST: pointing
	// both at gangbench's own names gives the images gangbench's kind node image preloads under
	// those tags (kwok nodes pull nothing).
	// The busybox mapping only where a node holds gangbench's busybox: on a kindest/node cluster the
	// user's engine can pull upstream's own.
	repoList := filepath.Join(dir, "repo-list.yaml")
	own := path.Dir(fakegpu.PodImage)
	list := "gcRegistry: " + own + "\n"
	hasOwn, err := nodesHoldImage(ctx, cs, own+"/busybox:")
	if err != nil {
		return nil, err
	}
	if hasOwn {
		list += "promoterE2eRegistry: " + own + "\n"
	}
	if err := os.WriteFile(repoList, []byte(list), 0o644); err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--provider=skeleton",
		"--ginkgo.label-filter=" + sel.LabelFilter, "--ginkgo.v", "--ginkgo.no-color", "--report-dir=" + dir}
	for _, name := range slices.Sorted(maps.Keys(sel.Skip)) {
		// The name is the spec's words; ginkgo matches the full text, brackets and all, so the
		// part after the container's name is what is quoted.
		_, words, _ := strings.Cut(name, " ")
		args = append(args, "--ginkgo.skip="+regexp.QuoteMeta(words))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, ended as a whole: the framework starts helpers of its own.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	runErr := cmd.Run()
	specs, err := ReadUpstreamReport(dir)
	if err != nil {
		if runErr != nil {
			return nil, fmt.Errorf("upstream specs: %v, and no report: %w (log: %s)", runErr, err, logPath)
		}
		return nil, err
	}
	for name, why := range sel.Skip {
		specs = append(specs, UpstreamSpec{Name: name, Verdict: results.Skip, Message: why})
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	if len(specs) == len(sel.Skip) {
		return nil, fmt.Errorf("upstream specs: none ran (label filter %q; log: %s)", sel.LabelFilter, logPath)
	}
	return specs, nil
}

type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ReadUpstreamReport reads the framework's junit_01.xml in dir: the specs that ran, and any
// suite-level step (before or after the suite) that failed.
func ReadUpstreamReport(dir string) ([]UpstreamSpec, error) {
	path := filepath.Join(dir, "junit_01.xml")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var js junitSuites
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	if err := dec.Decode(&js); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []UpstreamSpec
	for _, s := range js.Suites {
		for _, c := range s.Cases {
			spec := !strings.HasPrefix(c.Name, "[Synchronized") && !strings.HasPrefix(c.Name, "[ReportAfterSuite]") &&
				!strings.HasPrefix(c.Name, "[BeforeSuite]") && !strings.HasPrefix(c.Name, "[AfterSuite]")
			u := UpstreamSpec{Name: UpstreamSpecName(c.Name), Duration: time.Duration(c.Time * float64(time.Second))}
			switch {
			case c.Failure != nil:
				u.Verdict, u.Message = results.Fail, strings.TrimSpace(c.Failure.Message+"\n"+c.Failure.Text)
			case c.Error != nil:
				u.Verdict, u.Message = results.Error, strings.TrimSpace(c.Error.Message+"\n"+c.Error.Text)
			case c.Status == "failed" || c.Status == "panicked" || c.Status == "interrupted" || c.Status == "timedout":
				u.Verdict, u.Message = results.Fail, c.Status
			case c.Status == "passed" && spec:
				u.Verdict = results.Pass
			default:
				continue // skipped specs of other features, and suite steps that passed
			}
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

var bracketRE = regexp.MustCompile(`\s*\[[^\]]*\]`)

// UpstreamSpecName shortens a JUnit test name ("[It] [sig-scheduling] GangScheduling
// [FeatureGate:GenericWorkload] should … [Beta] [Feature:OffByDefault]") to its words, "GangScheduling
// should …"; '/' would split a Go subtest name, so it becomes '-'.
func UpstreamSpecName(junit string) string {
	s := strings.TrimSpace(bracketRE.ReplaceAllString(junit, ""))
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "/", "-")
}
