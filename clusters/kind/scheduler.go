package kind

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/internal/poll"
)

// Static pod manifest locations inside a kind control-plane node (kubeadm's layout). Manifests are
// moved to stoppedDir to stop a component: the kubelet watches manifestDir only.
const (
	manifestDir = "/etc/kubernetes/manifests"
	stoppedDir  = "/etc/kubernetes/gangbench-stopped"
	// originalSchedulerManifest keeps kubeadm's manifest when the scheduler image is replaced.
	originalSchedulerManifest = "/etc/kubernetes/gangbench-kube-scheduler.orig.yaml"
)

// ManifestEdit is a change to one container of a static pod manifest.
type ManifestEdit struct {
	// Container is the container's name ("kube-scheduler").
	Container string
	// Image replaces the container image when set.
	Image string
	// PullPolicy replaces imagePullPolicy when set. A loaded image must not be pulled ("Never"):
	// a registry that has a different image under the same tag would silently win otherwise.
	PullPolicy corev1.PullPolicy
	// Flags set "--name=value" in the container's command: an existing --name (with or without a
	// value) is replaced in place, a new one is appended, in name order.
	Flags map[string]string
}

// RewriteStaticPodManifest applies e to a static pod manifest. It edits the YAML as a generic map,
// so every field kubeadm wrote (probes, volumes, priority, fields newer than our API types) survives;
// only key order and comments are lost, which the kubelet does not care about.
func RewriteStaticPodManifest(manifest []byte, e ManifestEdit) ([]byte, error) {
	var pod map[string]any
	if err := yaml.Unmarshal(manifest, &pod); err != nil {
		return nil, fmt.Errorf("static pod manifest: %w", err)
	}
	if k, _ := pod["kind"].(string); k != "Pod" {
		return nil, fmt.Errorf("static pod manifest: kind is %q, want Pod", k)
	}
	spec, _ := pod["spec"].(map[string]any)
	containers, _ := spec["containers"].([]any)
	var c map[string]any
	var names []string
	for _, item := range containers {
		m, _ := item.(map[string]any)
		n, _ := m["name"].(string)
		names = append(names, n)
		if n == e.Container {
			c = m
		}
	}
	if c == nil {
		return nil, fmt.Errorf("static pod manifest: no container %q (containers: %s)", e.Container, strings.Join(names, ", "))
	}
	if e.Image != "" {
		c["image"] = e.Image
	}
	if e.PullPolicy != "" {
		c["imagePullPolicy"] = string(e.PullPolicy)
	}
	if len(e.Flags) > 0 {
		// kubeadm puts the binary and all flags in command; a hand-written manifest may use args.
		key := "command"
		if _, ok := c["command"]; !ok {
			if _, ok := c["args"]; ok {
				key = "args"
			}
		}
		argv, err := stringList(c[key])
		if err != nil {
			return nil, fmt.Errorf("static pod manifest: container %q %s: %w", e.Container, key, err)
		}
		c[key] = setFlags(argv, e.Flags)
	}
	out, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("static pod manifest: %w", err)
	}
	return out, nil
}

func stringList(v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("not a list")
	}
	out := make([]string, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, fmt.Errorf("item %d is not a string", i)
		}
		out[i] = s
	}
	return out, nil
}

// setFlags replaces or appends --name=value in argv.
func setFlags(argv []string, flags map[string]string) []string {
	out := slices.Clone(argv)
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		flag := "--" + strings.TrimLeft(name, "-") + "=" + flags[name]
		prefix := "--" + strings.TrimLeft(name, "-")
		i := slices.IndexFunc(out, func(a string) bool { return a == prefix || strings.HasPrefix(a, prefix+"=") })
		if i >= 0 {
			out[i] = flag
		} else {
			out = append(out, flag)
		}
	}
	return out
}

// swapScheduler points the control-plane node's kube-scheduler static pod at image (already loaded
// into the node) with the scheduler flags of the spec. The kubeadm original is kept beside the
// manifests dir; the new manifest is written outside the watched dir and renamed in, so the kubelet
// never reads half a file.
func swapScheduler(ctx context.Context, cp nodes.Node, image string, flags map[string]string) error {
	path := manifestDir + "/kube-scheduler.yaml"
	orig, err := nodeRun(ctx, cp, nil, "cat", path)
	if err != nil {
		return fmt.Errorf("read scheduler manifest: %w", err)
	}
	edited, err := RewriteStaticPodManifest([]byte(orig), ManifestEdit{
		Container: "kube-scheduler", Image: image, PullPolicy: corev1.PullNever, Flags: flags,
	})
	if err != nil {
		return err
	}
	tmp := "/etc/kubernetes/gangbench-kube-scheduler.yaml.tmp"
	if _, err := nodeRun(ctx, cp, strings.NewReader(string(edited)), "cp", "/dev/stdin", tmp); err != nil {
		return fmt.Errorf("write scheduler manifest: %w", err)
	}
	script := fmt.Sprintf("set -e; [ -f %[1]s ] || cp %[2]s %[1]s; mv %[3]s %[2]s", originalSchedulerManifest, path, tmp)
	if _, err := nodeSh(ctx, cp, script); err != nil {
		return fmt.Errorf("install scheduler manifest: %w", err)
	}
	return nil
}

// waitSchedulerPod waits until the scheduler's mirror pod runs image and is Ready. The kubelet
// replaces the mirror pod when the manifest changes, so a Ready pod with the new image is the new
// scheduler, not the old one lingering.
func waitSchedulerPod(ctx context.Context, cs kubernetes.Interface, node, image string, timeout time.Duration) error {
	name := "kube-scheduler-" + node
	return poll.Until(ctx, "kube-scheduler pod "+name+" Ready with image "+image, 500*time.Millisecond, timeout,
		func(ctx context.Context) (bool, string, error) {
			pod, err := cs.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			ok, seen := schedulerPodReady(pod, image)
			return ok, seen, nil
		})
}

func schedulerPodReady(pod *corev1.Pod, image string) (bool, string) {
	var img string
	for _, c := range pod.Spec.Containers {
		if c.Name == "kube-scheduler" {
			img = c.Image
		}
	}
	if img != image {
		return false, fmt.Sprintf("pod runs image %q", img)
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			if cond.Status == corev1.ConditionTrue {
				return true, ""
			}
			return false, fmt.Sprintf("Ready=%s (%s %s)", cond.Status, cond.Reason, cond.Message)
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			return false, fmt.Sprintf("container waiting: %s %s", w.Reason, w.Message)
		}
	}
	return false, "no Ready condition yet (phase " + string(pod.Status.Phase) + ")"
}

var kubeVersionRE = regexp.MustCompile(`Kubernetes (v\d+\.\d+\.\d+[0-9A-Za-z.+-]*)`)

// schedulerVersion asks the running scheduler container itself (`kube-scheduler --version` through
// crictl exec in the control-plane node), because a user's image tag need not be a version. When the
// image has no such binary on its PATH, the image tag is reported instead, marked as such.
func schedulerVersion(ctx context.Context, cp nodes.Node, image string) string {
	ids, err := nodeRun(ctx, cp, nil, "crictl", "ps", "-q", "--name", "^kube-scheduler$", "--state", "running")
	if err == nil {
		if id, _, _ := strings.Cut(strings.TrimSpace(ids), "\n"); id != "" {
			out, err := nodeRun(ctx, cp, nil, "crictl", "exec", id, "kube-scheduler", "--version")
			if m := kubeVersionRE.FindStringSubmatch(out); err == nil && m != nil {
				return m[1]
			}
		}
	}
	return imageTagVersionPrefix + imageTag(image)
}

// imageTagVersionPrefix marks a scheduler version that is the image tag, not what the binary said.
const imageTagVersionPrefix = "image "

// imageTag is the tag (or digest) of an image reference, or the whole reference without one.
func imageTag(ref string) string {
	if _, d, ok := strings.Cut(ref, "@"); ok {
		return d
	}
	if i := strings.LastIndex(ref, ":"); i >= 0 && !strings.Contains(ref[i:], "/") {
		return ref[i+1:]
	}
	return ref
}
