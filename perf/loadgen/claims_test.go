package loadgen

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/scenarios"
)

// TestDRAPods: on DRA nodes a phase's pods claim their GPUs through a pod-level claim from the
// namespace's template for the phase's GPU count, one template per distinct count however many
// phases share it, and carry no nvidia.com/gpu; on the device plugin's nodes nothing changes.
func TestDRAPods(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	g := &Generator{Client: cs, Namespace: "ns", SchedulerName: "s", Workers: 2, Timeline: timeline.NewTimeline(nil), GPUAPI: clusters.GPUAPIDRA}
	phases := []scenario.Phase{
		{Name: "big", Groups: 2, PodsPerGroup: 2, GPUsPerPod: 8, Policy: scenario.Gang, MinCount: 2, CPU: resource.MustParse("100m")},
		{Name: "big2", Groups: 1, PodsPerGroup: 2, GPUsPerPod: 8, Policy: scenario.Gang, MinCount: 2},
		{Name: "small", Groups: 1, PodsPerGroup: 3, GPUsPerPod: 1, Policy: scenario.Basic},
		{Name: "cpu", Groups: 1, PodsPerGroup: 1, Policy: scenario.Basic, CPU: resource.MustParse("1")},
	}
	for _, ph := range phases {
		if _, err := g.Run(ctx, ph); err != nil {
			t.Fatalf("phase %s: %v", ph.Name, err)
		}
	}
	tl, err := cs.ResourceV1().ResourceClaimTemplates("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, tmpl := range tl.Items {
		reqs := tmpl.Spec.Spec.Devices.Requests
		if len(reqs) != 1 || reqs[0].Exactly == nil || reqs[0].Exactly.DeviceClassName != fakegpu.DeviceClassName ||
			reqs[0].Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount ||
			tmpl.Labels[scenarios.ManagedLabel] != "true" || tmpl.Spec.Labels[scenarios.ManagedLabel] != "true" {
			t.Errorf("template %s: %+v", tmpl.Name, tmpl)
			continue
		}
		counts[tmpl.Name] = reqs[0].Exactly.Count
	}
	if len(counts) != 2 || counts["gpus-8"] != 8 || counts["gpus-1"] != 1 {
		t.Errorf("templates %v, want gpus-8 (8 GPUs) and gpus-1 (1 GPU), one each", counts)
	}
	for pod, tmpl := range map[string]string{"big-00001-1": "gpus-8", "big2-00000-0": "gpus-8", "small-00000-2": "gpus-1", "cpu-00000-0": ""} {
		p, err := cs.CoreV1().Pods("ns").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkDRAPod(t, p, tmpl)
	}
	big, _ := cs.CoreV1().Pods("ns").Get(ctx, "big-00001-1", metav1.GetOptions{})
	if q := big.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "100m" {
		t.Errorf("the phase's cpu request is lost: %v", big.Spec.Containers[0].Resources)
	}
	// The device plugin's pods: the count, no claim, no template.
	p := PodFor("ns", "s", clusters.GPUAPIDevicePlugin, phases[0], "big-00000", 0)
	if q := p.Spec.Containers[0].Resources.Limits[scenarios.GPUResource]; q.Value() != 8 || len(p.Spec.ResourceClaims) != 0 {
		t.Errorf("device plugin pod: %+v", p.Spec)
	}
	if p := PodFor("ns", "s", "", phases[0], "big-00000", 0); len(p.Spec.ResourceClaims) != 0 {
		t.Errorf("no API named is the device plugin's: %+v", p.Spec.ResourceClaims)
	}
}

// checkDRAPod: the pod claims GPUs from template (none when ""), its container uses the claim, and
// it counts no nvidia.com/gpu.
func checkDRAPod(t *testing.T, p *corev1.Pod, template string) {
	t.Helper()
	c := p.Spec.Containers[0]
	if _, ok := c.Resources.Limits[scenarios.GPUResource]; ok {
		t.Errorf("%s: nvidia.com/gpu limit on a DRA pod: %v", p.Name, c.Resources)
	}
	if _, ok := c.Resources.Requests[scenarios.GPUResource]; ok {
		t.Errorf("%s: nvidia.com/gpu request on a DRA pod: %v", p.Name, c.Resources)
	}
	if template == "" {
		if len(p.Spec.ResourceClaims) != 0 || len(c.Resources.Claims) != 0 {
			t.Errorf("%s asks for no GPU but claims %+v", p.Name, p.Spec.ResourceClaims)
		}
		return
	}
	rc := p.Spec.ResourceClaims
	if len(rc) != 1 || rc[0].Name != ClaimName || rc[0].ResourceClaimTemplateName == nil || *rc[0].ResourceClaimTemplateName != template || rc[0].ResourceClaimName != nil {
		t.Errorf("%s: resourceClaims %+v, want one %q from template %s", p.Name, rc, ClaimName, template)
	}
	if len(c.Resources.Claims) != 1 || c.Resources.Claims[0].Name != ClaimName {
		t.Errorf("%s: the container uses claims %+v, want %q", p.Name, c.Resources.Claims, ClaimName)
	}
	if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
		t.Errorf("%s: not in its group", p.Name)
	}
}

// TestDRAJob: a Job-driven phase on DRA nodes puts the claim into the Job's pod template, so every
// pod the job controller makes gets a claim of its own from the same template.
func TestDRAJob(t *testing.T) {
	ph := scenario.Phase{Name: "jobs", Groups: 1, PodsPerGroup: 4, GPUsPerPod: 8, Policy: scenario.Gang, MinCount: 4, ViaJob: true}
	j := JobFor("ns", "s", clusters.GPUAPIDRA, ph, "jobs-00000")
	spec := j.Spec.Template.Spec
	rc := spec.ResourceClaims
	if len(rc) != 1 || *rc[0].ResourceClaimTemplateName != "gpus-8" || len(spec.Containers[0].Resources.Claims) != 1 {
		t.Errorf("Job pod template claims %+v, container %+v", rc, spec.Containers[0].Resources)
	}
	if _, ok := spec.Containers[0].Resources.Limits[scenarios.GPUResource]; ok {
		t.Errorf("nvidia.com/gpu in a DRA Job's pods: %v", spec.Containers[0].Resources)
	}
	cs := fake.NewClientset()
	g := &Generator{Client: cs, Namespace: "ns", SchedulerName: "s", Timeline: timeline.NewTimeline(nil), GPUAPI: clusters.GPUAPIDRA}
	if _, err := g.Run(context.Background(), ph); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ResourceV1().ResourceClaimTemplates("ns").Get(context.Background(), "gpus-8", metav1.GetOptions{}); err != nil {
		t.Errorf("a Job-driven phase's template: %v", err)
	}
}
