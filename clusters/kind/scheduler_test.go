package kind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/clusters"
)

func TestRewriteSchedulerManifestGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "kube-scheduler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec := clusters.Spec{
		ComponentFeatureGates: map[clusters.Component]map[string]bool{clusters.Scheduler: {"GenericWorkload": false}},
		ExtraArgs:             map[clusters.Component]map[string]string{clusters.Scheduler: {"v": "4", "--leader-elect": "false"}},
	}
	out, err := RewriteStaticPodManifest(in, ManifestEdit{
		Container: "kube-scheduler", Image: "example.com/kube-scheduler:gang", PullPolicy: corev1.PullNever,
		Flags: schedulerFlags(spec),
	})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "kube-scheduler.rewritten.golden.yaml", out)

	// The result must still be a valid Pod, and everything kubeadm wrote must survive.
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(out, &pod); err != nil {
		t.Fatalf("rewritten manifest is not a Pod: %v", err)
	}
	c := pod.Spec.Containers[0]
	if c.Image != "example.com/kube-scheduler:gang" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %q pull policy %q", c.Image, c.ImagePullPolicy)
	}
	want := map[string]int{
		"--feature-gates=GenericWorkload=false": 1, "--leader-elect=false": 1, "--v=4": 1,
		"--bind-address=0.0.0.0": 1, "--kubeconfig=/etc/kubernetes/scheduler.conf": 1,
	}
	count := map[string]int{}
	for _, a := range c.Command {
		count[a]++
		if strings.HasPrefix(a, "--leader-elect=") && a != "--leader-elect=false" {
			t.Errorf("old flag kept: %s", a)
		}
	}
	for a, n := range want {
		if count[a] != n {
			t.Errorf("command has %q %d times, want %d: %v", a, count[a], n, c.Command)
		}
	}
	if c.Command[0] != "kube-scheduler" {
		t.Errorf("binary moved: %v", c.Command)
	}
	if pod.Spec.PriorityClassName != "system-node-critical" || c.LivenessProbe == nil || len(pod.Spec.Volumes) != 1 || !pod.Spec.HostNetwork {
		t.Errorf("kubeadm fields lost: %+v", pod.Spec)
	}
}

func TestRewriteStaticPodManifestErrors(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "kube-scheduler.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RewriteStaticPodManifest(in, ManifestEdit{Container: "scheduler", Image: "x"}); err == nil || !strings.Contains(err.Error(), "kube-scheduler") {
		t.Errorf("missing container: %v (want the existing names listed)", err)
	}
	if _, err := RewriteStaticPodManifest([]byte("kind: Deployment\n"), ManifestEdit{Container: "x"}); err == nil {
		t.Error("non-Pod accepted")
	}
	if _, err := RewriteStaticPodManifest([]byte("{"), ManifestEdit{Container: "x"}); err == nil {
		t.Error("broken YAML accepted")
	}
}

func TestSetFlagsArgs(t *testing.T) {
	// A hand-written manifest with flags in args instead of command.
	in := []byte("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: s\n    image: a\n    args: [--v=2, --leader-elect]\n")
	out, err := RewriteStaticPodManifest(in, ManifestEdit{Container: "s", Flags: map[string]string{"v": "5", "leader-elect": "false", "x": "y"}})
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(out, &pod); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(pod.Spec.Containers[0].Args, " ")
	if got != "--v=5 --leader-elect=false --x=y" || pod.Spec.Containers[0].Command != nil {
		t.Errorf("args %q command %v", got, pod.Spec.Containers[0].Command)
	}
}

func TestImageTagAndEtcdVersion(t *testing.T) {
	for in, want := range map[string]string{
		"example.test/etcd:3.6.4-0":               "v3.6.4",
		"localhost:5000/etcd:v3.7.0":              "v3.7.0",
		"example.test/etcd@sha256:abc":            "sha256:abc",
		"example.test/kube-scheduler:v1.37.0":     "v1.37.0",
		"localhost:5000/kube-scheduler":           "localhost:5000/kube-scheduler",
		"example.com/kube-scheduler:gang-feature": "gang-feature",
	} {
		got := imageTag(in)
		if strings.Contains(in, "etcd") {
			got = etcdVersion(in)
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", in, got, want)
		}
	}
}
