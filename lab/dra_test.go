package lab

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gangbench/gangbench/fakegpu"
)

// decoded is a lab manifest's objects as the lab applies them literally.
func decoded(t *testing.T, file string) []runtime.Object {
	t.Helper()
	b, err := Manifest(file, "example.test/pause:1")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(file, b)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// kindName names an object for an order check: pod names bare, others kind/name.
func kindName(o runtime.Object) string {
	switch o := o.(type) {
	case *corev1.Namespace:
		return "ns/" + o.Name
	case *corev1.Pod:
		return o.Name
	case *resourcev1.ResourceClaimTemplate:
		return "rct/" + o.Namespace + "/" + o.Name
	}
	m, _ := o.(metav1.Object)
	return "other/" + m.GetName()
}

// TestWithDRAGPUsKeepsTheManifestsButTheGPUs: with DRA GPUs each manifest is the lab's, object
// for object in the lab's order, except that one template gpu-2 (2 fake GPUs of the lab's
// DeviceClass) comes before the first pod and each pod claims from it instead of asking for
// nvidia.com/gpu: 2.
func TestWithDRAGPUsKeepsTheManifestsButTheGPUs(t *testing.T) {
	for _, file := range []string{BasicControl, NativeGang, Elastic} {
		literal := decoded(t, file)
		got, err := withDRAGPUs(file, decoded(t, file))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(literal)+1 {
			t.Fatalf("%s: %d objects, want the lab's %d and one template", file, len(got), len(literal))
		}
		var ns string
		var order, want []string
		for i, o := range literal {
			if n, ok := o.(*corev1.Namespace); ok {
				ns = n.Name
			}
			if _, ok := o.(*corev1.Pod); ok && len(want) == i {
				want = append(want, "rct/"+ns+"/gpu-2")
			}
			want = append(want, kindName(o))
		}
		for _, o := range got {
			order = append(order, kindName(o))
		}
		if strings.Join(order, " ") != strings.Join(want, " ") {
			t.Fatalf("%s: objects %v, want %v", file, order, want)
		}
		j := 0
		for _, o := range got {
			switch o := o.(type) {
			case *resourcev1.ResourceClaimTemplate:
				reqs := o.Spec.Spec.Devices.Requests
				if o.APIVersion != "resource.k8s.io/v1" || o.Kind != "ResourceClaimTemplate" || len(reqs) != 1 || reqs[0].Exactly == nil ||
					reqs[0].Exactly.Count != 2 || reqs[0].Exactly.DeviceClassName != fakegpu.DeviceClassName ||
					reqs[0].Exactly.AllocationMode != resourcev1.DeviceAllocationModeExactCount {
					t.Errorf("%s: template %+v", file, o)
				}
				continue
			case *corev1.Pod:
				lit := literal[j].(*corev1.Pod)
				if podGPUs(o) != 0 {
					t.Errorf("%s: pod %s still asks for %d nvidia.com/gpu", file, o.Name, podGPUs(o))
				}
				// The literal pod with the expected change is the transformed pod, field for field.
				exp := lit.DeepCopy()
				exp.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Claims: []corev1.ResourceClaim{{Name: "worker-gpus"}}}
				exp.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "worker-gpus", ResourceClaimTemplateName: ptr.To("gpu-2")}}
				if !equality.Semantic.DeepEqual(exp, o) {
					t.Errorf("%s: pod %s\n got %+v\nwant %+v", file, o.Name, o.Spec, exp.Spec)
				}
			default:
				if !equality.Semantic.DeepEqual(literal[j], o) {
					t.Errorf("%s: %s changed: %+v", file, kindName(o), o)
				}
			}
			j++
		}
	}
}

func gpuContainer(name string, limit, request string) corev1.Container {
	c := corev1.Container{Name: name, Image: "x"}
	if limit != "" {
		c.Resources.Limits = corev1.ResourceList{gpuResource: resource.MustParse(limit), corev1.ResourceCPU: resource.MustParse("1")}
	}
	if request != "" {
		c.Resources.Requests = corev1.ResourceList{gpuResource: resource.MustParse(request)}
	}
	return c
}

func TestWithDRAGPUsPerCountAndContainer(t *testing.T) {
	pod := func(name string, cs ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PodSpec{Containers: cs}}
	}
	init := pod("p0", gpuContainer("main", "1", ""))
	init.Spec.InitContainers = []corev1.Container{gpuContainer("prep", "", "4")}
	objs := []runtime.Object{
		init,
		pod("p1", gpuContainer("a", "2", "2"), gpuContainer("b", "", ""), gpuContainer("c", "1", "")),
		pod("p2", gpuContainer("a", "4", "")),
	}
	got, err := withDRAGPUs("f.yaml", objs)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, o := range got {
		order = append(order, kindName(o))
	}
	// One template per distinct count, before the first pod that uses it.
	if w := "rct/ns/gpu-4 rct/ns/gpu-1 p0 rct/ns/gpu-2 p1 p2"; strings.Join(order, " ") != w {
		t.Errorf("objects %v, want %s", order, w)
	}
	p1 := got[4].(*corev1.Pod)
	var claims []string
	for _, c := range p1.Spec.ResourceClaims {
		claims = append(claims, c.Name+"="+*c.ResourceClaimTemplateName)
	}
	if strings.Join(claims, " ") != "a-gpus=gpu-2 c-gpus=gpu-1" {
		t.Errorf("p1 claims %v", claims)
	}
	a, b := p1.Spec.Containers[0], p1.Spec.Containers[1]
	if _, ok := a.Resources.Requests[gpuResource]; ok || len(a.Resources.Claims) != 1 || a.Resources.Claims[0].Name != "a-gpus" || len(b.Resources.Claims) != 0 {
		t.Errorf("containers %+v / %+v", a.Resources, b.Resources)
	}
	if cpu := a.Resources.Limits[corev1.ResourceCPU]; cpu.String() != "1" {
		t.Errorf("the other limits must stay: %v", a.Resources.Limits)
	}
	if p0 := got[2].(*corev1.Pod); len(p0.Spec.ResourceClaims) != 2 || p0.Spec.InitContainers[0].Resources.Claims[0].Name != "prep-gpus" {
		t.Errorf("init container: %+v", p0.Spec)
	}

	for name, c := range map[string]corev1.Container{
		"limit and request differ": gpuContainer("a", "2", "1"),
		"a fraction":               gpuContainer("a", "500m", ""),
	} {
		if _, err := withDRAGPUs("f.yaml", []runtime.Object{pod("bad", c)}); err == nil || !strings.Contains(err.Error(), "f.yaml: pod bad: container a") {
			t.Errorf("%s: err %v", name, err)
		}
	}
	taken := pod("taken", gpuContainer("a", "1", ""))
	taken.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "a-gpus", ResourceClaimName: ptr.To("x")}}
	if _, err := withDRAGPUs("f.yaml", []runtime.Object{taken}); err == nil || !strings.Contains(err.Error(), "already has a claim") {
		t.Errorf("a claim name taken: %v", err)
	}
}

// claim is an allocated ResourceClaim holding devices, each driver/pool/device.
func claim(ns, name string, devices ...string) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if len(devices) == 0 {
		return c
	}
	c.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devices {
		p := strings.SplitN(d, "/", 3)
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{Request: "gpus", Driver: p[0], Pool: p[1], Device: p[2]})
	}
	return c
}

func TestAllocatedDevices(t *testing.T) {
	d := fakegpu.DRADriver
	claims := []resourcev1.ResourceClaim{
		*claim("a", "c1", d+"/w/gpu-0", d+"/w/gpu-1"),
		*claim("b", "c2", d+"/w/gpu-2", d+"/w2/gpu-0"), // one device on another node's pool
		*claim("b", "c3", "other.example/w/gpu-3"),     // another driver's pool named alike
		*claim("b", "pending"),                         // not allocated
		*claim("c", "shared-view", d+"/w/gpu-1"),       // a device already counted
		*claim("c", "c4", d+"/w/gpu-7", d+"/w/gpu-6"),
	}
	if n := allocatedDevices(claims, d, "w"); n != 5 {
		t.Errorf("allocated on w: %d, want 5 (gpu-0, 1, 2, 6, 7)", n)
	}
	if n := allocatedDevices(claims, d, "w2"); n != 1 {
		t.Errorf("allocated on w2: %d, want 1", n)
	}
	if n := allocatedDevices(nil, d, "w"); n != 0 {
		t.Errorf("no claims: %d", n)
	}
}

// TestDRAAccountingReadsClaims runs the runner's GPU accounting against a fake API: with DRA GPUs
// it counts the devices allocated from the worker's pool, prints the kubectl command that counts
// them, and ignores nvidia.com/gpu; without, it reads the pods' limits as describe node does.
func TestDRAAccountingReadsClaims(t *testing.T) {
	ctx := context.Background()
	const w = "gpu-lab-worker"
	d := fakegpu.DRADriver
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "native-gang", Name: "team-a-0"}, Spec: corev1.PodSpec{NodeName: w, Containers: []corev1.Container{gpuContainer("worker", "2", "")}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	cs := fake.NewClientset(
		claim("native-gang", "team-a-0-worker-gpus-x", d+"/"+w+"/gpu-0", d+"/"+w+"/gpu-1"),
		claim("native-gang", "team-a-1-worker-gpus-y", d+"/"+w+"/gpu-2", d+"/"+w+"/gpu-3"),
		claim("native-gang", "team-b-0-worker-gpus-z"),
		pod,
	)
	var out bytes.Buffer
	r := &runner{cs: cs, o: Options{Worker: w, Out: &out, Here: "here", GPUAPI: fakegpu.APIDRA}, dra: true}
	if n, err := r.workerGPUs(ctx); err != nil || n != 4 {
		t.Errorf("DRA: %d GPUs (%v), want the 4 devices allocated from %s's pool", n, err, w)
	}
	if err := r.showGPUs(ctx, labGangGPUs); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "$ kubectl get resourceclaims -A -o jsonpath=") || !strings.Contains(s, "grep -c '^"+d+"/"+w+"/'") || !strings.Contains(s, fmt.Sprintf("  %-6s | %s", "4", labGangGPUs[0])) {
		t.Errorf("DRA GPU command and count:\n%s", s)
	}

	dp := &runner{cs: cs, o: Options{Worker: w, Out: &out}}
	if n, err := dp.workerGPUs(ctx); err != nil || n != 2 {
		t.Errorf("device plugin: %d GPUs (%v), want the pod's limit 2", n, err)
	}
}

// TestDRAClusterNeedsTheDeviceClass: describeCluster shows each node's DRA devices and refuses a
// cluster without the class the lab's claims name.
func TestDRAClusterNeedsTheDeviceClass(t *testing.T) {
	ctx := context.Background()
	node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	slice := fakegpu.ResourceSlice("gpu-lab-worker", fakegpu.Inventory{Count: 8}, fakegpu.SliceOptions{})
	var out bytes.Buffer
	r := &runner{cs: fake.NewClientset(node("gpu-lab-worker"), node("gpu-lab-worker2"), slice), o: Options{Worker: "gpu-lab-worker", Out: &out, GPUAPI: fakegpu.APIDRA}, dra: true}
	if err := r.describeCluster(ctx); err == nil || !strings.Contains(err.Error(), "DeviceClass "+fakegpu.DeviceClassName) {
		t.Errorf("without the DeviceClass: %v", err)
	}
	if _, err := r.cs.ResourceV1().DeviceClasses().Create(ctx, fakegpu.DeviceClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.describeCluster(ctx); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "gpu-lab-worker               nvidia.com/gpu 0   DRA devices ("+fakegpu.DRADriver+") 8") ||
		!strings.Contains(s, "gpu-lab-worker2              nvidia.com/gpu 0   DRA devices ("+fakegpu.DRADriver+") 0") {
		t.Errorf("cluster:\n%s", s)
	}
}

// TestCreateTemplate: a template is created in its namespace with kubectl's line.
func TestCreateTemplate(t *testing.T) {
	objs, err := withDRAGPUs(Elastic, decoded(t, Elastic))
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset()
	r := &runner{cs: cs, dra: true}
	for _, o := range objs {
		if _, ok := o.(*resourcev1.ResourceClaimTemplate); !ok {
			continue
		}
		line, err := r.create(context.Background(), o)
		if err != nil || line != "resourceclaimtemplate.resource.k8s.io/gpu-2 created" {
			t.Errorf("create: %q %v", line, err)
		}
	}
	if _, err := cs.ResourceV1().ResourceClaimTemplates(nsElastic).Get(context.Background(), "gpu-2", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
}

func TestDRAResourceMessage(t *testing.T) {
	ev := func(pod, msg string) corev1.Event {
		return corev1.Event{Reason: "FailedScheduling", InvolvedObject: corev1.ObjectReference{Name: pod}, Message: msg}
	}
	// v1.37.2's events of the DRA gang run on the lab's three nodes (gangbench lab --gpu-api dra).
	evs := []corev1.Event{
		ev("team-b-0", "pod group is unschedulable, minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, pod group preemption: No preemption victims found for incoming preemptor"),
		ev("team-b-1", "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 cannot allocate all claims."),
	}
	dra := &runner{dra: true}
	res, gang := messageKinds(evs, "team-b", dra.resourceReason())
	if res != dra.resourceMessage() || gang == "" {
		t.Errorf("DRA kinds %q %q; want the resource message %q", res, gang, dra.resourceMessage())
	}
	dp := &runner{}
	if res, _ := messageKinds(evs, "team-b", dp.resourceReason()); res != "" {
		t.Errorf("the lab's reason found %q in DRA events", res)
	}
	if dp.resourceMessage() != labResourceMessage {
		t.Errorf("device plugin: %q", dp.resourceMessage())
	}
}
