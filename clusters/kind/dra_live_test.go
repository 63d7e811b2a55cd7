package kind

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/kind/nodeimage"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/internal/testenv"
	"github.com/gangbench/gangbench/scenarios"
)

// TestIntegrationKindDRA creates a kind cluster of one real worker whose 2 fake GPUs go through DRA
// (--gpu-api dra) and checks the real-kubelet path end to end: the worker advertises no extended
// resource and publishes a ResourceSlice of 2 devices through the DRA plugin; a pod with a claim
// from a ResourceClaimTemplate of the fake GPUs' class runs, its claim allocated one of our devices,
// and the container sees that GPU (the CDI spec the plugin wrote, applied by containerd); once the
// pod is deleted the claim is gone and its CDI spec removed (Unprepare); and a GPU marked unhealthy
// through the cluster's GPU control leaves the slice, coming back when healthy. With --gpu-api both
// the same holds, next to the device plugin's 2 allocatable nvidia.com/gpu. Each takes a cluster
// of its own (about 85 s here): make test runs dra, make test-long both too.
func TestIntegrationKindDRA(t *testing.T) {
	engine := liveEngine(t)
	for _, api := range []clusters.GPUAPI{clusters.GPUAPIDRA, clusters.GPUAPIBoth} {
		t.Run(string(api), func(t *testing.T) {
			if api == clusters.GPUAPIBoth {
				testenv.SkipUnlessLong(t, "both is dra plus the device plugin, each proven on its own in make test")
			}
			testKindDRA(t, engine, api)
		})
	}
}

func testKindDRA(t *testing.T, engine string, api clusters.GPUAPI) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	name := "gangbench-it-" + string(api)
	cl, cs := liveCluster(t, ctx, engine, name, clusters.Spec{Nodes: 1, GPU: fakegpu.Inventory{Count: 2}, GPUAPI: api})

	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelWorker + "=true"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("workers %v, %v; want one", list, err)
	}
	worker := list.Items[0].Name
	var wantAllocatable int64
	if api.ExtendedResource() {
		wantAllocatable = 2
	}
	if q := list.Items[0].Status.Allocatable[scenarios.GPUResource]; q.Value() != wantAllocatable {
		t.Errorf("worker %s advertises %s %s, want %d", worker, q.String(), scenarios.GPUResource, wantAllocatable)
	}
	ids := fakegpu.Inventory{Count: 2}.DeviceIDs(worker)
	devs := waitWorkerSlice(t, ctx, cs, worker, 2)
	t.Logf("worker %s publishes %v", worker, devs)

	// A pod with a claim of one fake GPU, in a container that prints what it sees.
	ns := newNamespace(t, ctx, cs, "it-dra")
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: fakegpu.DeviceClassName}}},
		}}},
	}
	if _, err := cs.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-proxy's image is the node's Debian root filesystem: it has sh, env and sleep.
	img := nodeimage.ImageRepository + "/kube-proxy:" + clusters.DefaultKubernetesVersion
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-user", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": worker},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			ResourceClaims:                []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(tmpl.Name)}},
			Containers: []corev1.Container{{
				Name: "main", Image: img, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"sh", "-c", "env | grep '^FAKEGPU_' | sort; exec sleep 3600"},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("phase %s, conditions %v, statuses %v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod ended: %s", last)
		}
		pod = p
		return runningInContainerd(*p), nil
	})
	if err != nil {
		events, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		var es []string
		for _, e := range events.Items {
			es = append(es, e.Reason+": "+e.Message)
		}
		t.Fatalf("pod with a fake GPU claim not running: %v (last: %s; events: %s)", err, last, strings.Join(es, " | "))
	}

	// Its claim: allocated one of our devices on the worker, reserved for the pod.
	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod claim statuses %+v", pod.Status.ResourceClaimStatuses)
	}
	claimName := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
	claim, err := cs.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s allocation %+v", claimName, claim.Status.Allocation)
	}
	res := claim.Status.Allocation.Devices.Results[0]
	index := slices.Index(devs, res.Device)
	if res.Driver != fakegpu.DRADriver || res.Pool != worker || index < 0 {
		t.Fatalf("claim %s got %s/%s/%s, want a device of %s in pool %s (%v)", claimName, res.Driver, res.Pool, res.Device, fakegpu.DRADriver, worker, devs)
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
		t.Errorf("claim %s reserved for %+v, not the pod", claimName, claim.Status.ReservedFor)
	}
	t.Logf("claim %s allocated %s/%s", claimName, res.Pool, res.Device)

	// The container sees its GPU: the env of the CDI devices Prepare returned.
	logs, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("container env:\n%s", bytes.TrimSpace(logs))
	uuid := ids[deviceIndex(t, res.Device)]
	for _, want := range []string{"FAKEGPU_VISIBLE_DEVICES=" + uuid, fmt.Sprintf("FAKEGPU_DEVICE_%d=%s", deviceIndex(t, res.Device), uuid), "FAKEGPU_PRODUCT=" + fakegpu.DefaultProduct} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("container env lacks %s:\n%s", want, logs)
		}
	}
	if specs := cdiSpecs(t, ctx, engine, worker); len(specs) != 2 || !slices.Contains(specs, "gangbench.dev-gpu_"+string(claim.UID)+"_gpu.json") {
		t.Errorf("CDI specs on %s while the pod runs: %v, want the node's and the claim's", worker, specs)
	}

	// Deleted, the pod takes its claim along: unreserved, deallocated and deleted by the claim
	// controller, unprepared by the plugin.
	if err := cs.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := cs.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			last = "claim gone"
		case err != nil:
			return false, err
		case c.Status.Allocation != nil:
			last = fmt.Sprintf("claim still allocated, reserved for %+v", c.Status.ReservedFor)
			return false, nil
		default:
			last = "claim deallocated"
		}
		specs := cdiSpecs(t, ctx, engine, worker)
		last += fmt.Sprintf("; CDI specs %v", specs)
		return slices.Equal(specs, []string{"gangbench.dev-gpu.json"}), nil
	})
	if err != nil {
		t.Errorf("after deleting the pod: %v (last: %s)", err, last)
	}

	// A GPU marked unhealthy (the highest index, as GPUControl picks) leaves the slice.
	if err := cl.GPUs.SetUnhealthyGPUs(ctx, worker, 1); err != nil {
		t.Fatal(err)
	}
	if got := waitWorkerSlice(t, ctx, cs, worker, 1); !slices.Equal(got, []string{fakegpu.DeviceName(0)}) {
		t.Errorf("slice with one GPU unhealthy: %v, want %s", got, fakegpu.DeviceName(0))
	}
	if err := cl.GPUs.SetUnhealthyGPUs(ctx, worker, 0); err != nil {
		t.Fatal(err)
	}
	waitWorkerSlice(t, ctx, cs, worker, 2)
	if n, err := cl.GPUs.PluginRegistrations(ctx, worker); err != nil || n < 1 {
		t.Errorf("DRA plugin registrations on %s: %d, %v", worker, n, err)
	}
}

// waitWorkerSlice waits until node's slices of our driver (current pool generation) hold exactly n
// devices, and returns their names.
func waitWorkerSlice(t *testing.T, ctx context.Context, cs kubernetes.Interface, node string, n int) []string {
	t.Helper()
	var names []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			resourcev1.ResourceSliceSelectorDriver: fakegpu.DRADriver, resourcev1.ResourceSliceSelectorNodeName: node,
		}.String()})
		if err != nil {
			return false, err
		}
		var gen int64
		for _, s := range list.Items {
			gen = max(gen, s.Spec.Pool.Generation)
		}
		names = nil
		for _, s := range list.Items {
			if s.Spec.Pool.Name != node || s.Spec.Pool.Generation != gen {
				continue
			}
			for _, d := range s.Spec.Devices {
				names = append(names, d.Name)
			}
		}
		slices.Sort(names)
		return len(names) == n, nil
	})
	if err != nil {
		t.Fatalf("slices of %s: %v (devices %v, want %d)", node, err, names, n)
	}
	return names
}

// deviceIndex is the index in a DRA device name ("gpu-1").
func deviceIndex(t *testing.T, name string) int {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(name, "gpu-%d", &i); err != nil {
		t.Fatalf("device name %q: %v", name, err)
	}
	return i
}

// cdiSpecs lists the CDI spec files on node (its container, named as the node).
func cdiSpecs(t *testing.T, ctx context.Context, engine, node string) []string {
	t.Helper()
	var out bytes.Buffer
	if err := ExecRunner(ctx, &out, engine, "exec", node, "ls", "-1", "/var/run/cdi"); err != nil {
		t.Fatalf("list /var/run/cdi on %s: %v", node, err)
	}
	specs := strings.Fields(out.String())
	slices.Sort(specs)
	return specs
}
