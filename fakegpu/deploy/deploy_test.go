package deploy

import (
	"bytes"
	"context"
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gangbench/gangbench/fakegpu"
	"github.com/gangbench/gangbench/fakegpu/draplugin"
	"github.com/gangbench/gangbench/fakegpu/image"
	"github.com/gangbench/gangbench/fakegpu/plugin"
)

// update rewrites the golden files instead of comparing: go test ./fakegpu/deploy/ -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

func TestManifestsGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		opts   Options
	}{
		{golden: "daemonset-default.golden.yaml", opts: Options{Inventory: fakegpu.Default()}},
		{golden: "daemonset-tolerate-control-plane.golden.yaml", opts: Options{
			Image:                "registry.example/fakegpu:v2",
			Inventory:            fakegpu.Inventory{Count: 8, NVLinkDomainSize: 4, Product: "Fake-GPU", MemoryMiB: 1024},
			TolerateControlPlane: true,
			NodeSelector:         map[string]string{"gangbench.dev/pool": "gpu", "kubernetes.io/os": "linux"},
		}},
		{golden: "daemonset-instance.golden.yaml", opts: Options{
			Inventory:    fakegpu.Inventory{Count: 4},
			Instance:     "1",
			NodeSelector: map[string]string{"gangbench.dev/kind-worker": "true", "gangbench.dev/kind-gpu-inventory": "1"},
		}},
		{golden: "daemonset-dra.golden.yaml", opts: Options{
			Inventory:    fakegpu.Inventory{Count: 2},
			API:          fakegpu.APIDRA,
			CliqueLabel:  "topology.gangbench.dev/rack",
			NodeSelector: map[string]string{"gangbench.dev/kind-worker": "true"},
		}},
		{golden: "daemonset-both.golden.yaml", opts: Options{
			Inventory: fakegpu.Inventory{Count: 4},
			API:       fakegpu.APIBoth,
			Instance:  "0",
		}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			got, err := Manifests(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Manifests differ from %s (run with -update if intended):\n%s", path, got)
			}
		})
	}
}

func TestDaemonSet(t *testing.T) {
	inv := fakegpu.Inventory{Count: 4, NVLinkDomainSize: 2, ResourceName: "example.com/gpu"}
	ds, err := DaemonSet(Options{Inventory: inv})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != Name || ds.Namespace != "kube-system" || ds.Kind != "DaemonSet" || ds.APIVersion != "apps/v1" {
		t.Errorf("object %s %s/%s", ds.GroupVersionKind(), ds.Namespace, ds.Name)
	}
	spec := ds.Spec.Template.Spec
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priority class %q", spec.PriorityClassName)
	}
	c := spec.Containers[0]
	if c.Image != image.DefaultRef || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s pull %s, want %s IfNotPresent", c.Image, c.ImagePullPolicy, image.DefaultRef)
	}
	if len(c.Env) != 1 || c.Env[0].Name != plugin.EnvNodeName || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env %+v, want NODE_NAME from spec.nodeName", c.Env)
	}
	if len(spec.Volumes) != 1 || spec.Volumes[0].HostPath == nil || spec.Volumes[0].HostPath.Path != "/var/lib/kubelet/device-plugins" ||
		len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/var/lib/kubelet/device-plugins" {
		t.Errorf("volumes %+v mounts %+v, want the kubelet device plugin dir at the same path", spec.Volumes, c.VolumeMounts)
	}
	// Taints keep workloads off GPU nodes, never their device plugin: the resource taint, a node
	// group's own taints of any effect.
	for _, taint := range []corev1.Taint{
		{Key: "example.com/gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gangbench.dev/rack", Value: "r2", Effect: corev1.TaintEffectNoSchedule},
		{Key: "reserved", Value: "x", Effect: corev1.TaintEffectNoExecute},
		{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
	} {
		if !tolerates(spec.Tolerations, taint) {
			t.Errorf("taint %v not tolerated by %+v", taint, spec.Tolerations)
		}
	}
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Key != "node-role.kubernetes.io/control-plane" ||
		terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpDoesNotExist {
		t.Errorf("affinity %+v, want control-plane DoesNotExist", terms)
	}
	if sc := c.SecurityContext; sc == nil || *sc.RunAsUser != 0 || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("security context %+v", sc)
	}

	// The args are the plugin's own flags and give back the inventory.
	fs := flag.NewFlagSet("plugin", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	finish := plugin.BindFlags(fs, func(string) string { return "node-1" })
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("args %q do not parse: %v", c.Args, err)
	}
	o, err := finish()
	if err != nil {
		t.Fatalf("args %q: %v", c.Args, err)
	}
	if o.Inventory.WithDefaults() != inv.WithDefaults() || o.HealthAddr != "0.0.0.0:9400" {
		t.Errorf("args %q parse to %+v", c.Args, o)
	}

	tol, err := DaemonSet(Options{Inventory: inv, TolerateControlPlane: true, NodeSelector: map[string]string{"pool": "gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if tol.Spec.Template.Spec.Affinity != nil {
		t.Errorf("affinity with TolerateControlPlane: %+v", tol.Spec.Template.Spec.Affinity)
	}
	if !tolerates(tol.Spec.Template.Spec.Tolerations, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("control-plane taint not tolerated: %+v", tol.Spec.Template.Spec.Tolerations)
	}
	if tol.Spec.Template.Spec.NodeSelector["pool"] != "gpu" {
		t.Errorf("node selector %v", tol.Spec.Template.Spec.NodeSelector)
	}

	objs, err := Objects(Options{Inventory: inv})
	if err != nil || len(objs) != 1 {
		t.Fatalf("Objects = %v, %v", objs, err)
	}
	if _, ok := objs[0].(*appsv1.DaemonSet); !ok {
		t.Errorf("Objects[0] is %T", objs[0])
	}
}

// tolerates reports whether one of tols tolerates taint, by the rules of the Equal and Exists
// operators (core/v1 Toleration.ToleratesTaint, without its logger).
func tolerates(tols []corev1.Toleration, taint corev1.Taint) bool {
	return slices.ContainsFunc(tols, func(tol corev1.Toleration) bool {
		if tol.Effect != "" && tol.Effect != taint.Effect || tol.Key != "" && tol.Key != taint.Key {
			return false
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			return tol.Key != "" && tol.Value == taint.Value
		}
		return false
	})
}

// TestInstances: DaemonSets of several inventories have their own names and selectors (so neither
// claims the other's pods), while every pod keeps the label that finds "the plugin pod on a node".
func TestInstances(t *testing.T) {
	one, err := DaemonSet(Options{Inventory: fakegpu.Default()})
	if err != nil {
		t.Fatal(err)
	}
	if one.Name != Name || len(one.Spec.Selector.MatchLabels) != 1 || one.Spec.Template.Labels["app.kubernetes.io/instance"] != "" {
		t.Errorf("DaemonSet without instance: name %s selector %v pod labels %v", one.Name, one.Spec.Selector.MatchLabels, one.Spec.Template.Labels)
	}
	a, err := DaemonSet(Options{Inventory: fakegpu.Default(), Instance: "0", NodeSelector: map[string]string{"inv": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := DaemonSet(Options{Inventory: fakegpu.Inventory{Count: 4}, Instance: "1", NodeSelector: map[string]string{"inv": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != Name+"-0" || b.Name != Name+"-1" {
		t.Errorf("names %s, %s", a.Name, b.Name)
	}
	for _, ds := range []*appsv1.DaemonSet{a, b} {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
			t.Errorf("%s: selector %v does not match its own pods %v", ds.Name, sel, ds.Spec.Template.Labels)
		}
		other := a
		if ds == a {
			other = b
		}
		if sel.Matches(labels.Set(other.Spec.Template.Labels)) {
			t.Errorf("%s: selector %v matches the pods of %s", ds.Name, sel, other.Name)
		}
		if ds.Spec.Template.Labels[nameLabel] != Name {
			t.Errorf("%s: pods labelled %v, want %s=%s", ds.Name, ds.Spec.Template.Labels, nameLabel, Name)
		}
	}
	if _, err := Manifests(Options{Inventory: fakegpu.Default(), Instance: "Bad_Instance"}); err == nil || !strings.Contains(err.Error(), "Bad_Instance") {
		t.Errorf("bad instance: %v", err)
	}
}

func TestOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{name: "no GPUs", opts: Options{}, want: []string{"at least 1"}},
		{name: "bad inventory", opts: Options{Inventory: fakegpu.Inventory{Count: 8, NVLinkDomainSize: 3}}, want: []string{"nvlinkDomainSize"}},
		{name: "bad selector key", opts: Options{Inventory: fakegpu.Default(), NodeSelector: map[string]string{"a b": "x"}}, want: []string{`"a b"`}},
		{name: "bad selector value", opts: Options{Inventory: fakegpu.Default(), NodeSelector: map[string]string{"a": "x y"}}, want: []string{`"x y"`}},
		{name: "image with space", opts: Options{Inventory: fakegpu.Default(), Image: "a b"}, want: []string{`"a b"`}},
		{name: "unknown API", opts: Options{Inventory: fakegpu.Default(), API: "cdi"}, want: []string{`"cdi"`, "device-plugin, dra, both"}},
		{name: "bad clique label", opts: Options{Inventory: fakegpu.Default(), API: fakegpu.APIDRA, CliqueLabel: "a b"}, want: []string{`"a b"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Manifests(tc.opts)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestQuoting: values that are YAML syntax stay values.
func TestQuoting(t *testing.T) {
	ds, err := DaemonSet(Options{Inventory: fakegpu.Default(), Image: "x:y#z", NodeSelector: map[string]string{"a": "true", "b": ""}})
	if err != nil {
		t.Fatal(err)
	}
	if c := ds.Spec.Template.Spec.Containers[0]; c.Image != "x:y#z" {
		t.Errorf("image %q", c.Image)
	}
	if ns := ds.Spec.Template.Spec.NodeSelector; ns["a"] != "true" || ns["b"] != "" || len(ns) != 2 {
		t.Errorf("node selector %v", ns)
	}
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	if err := Apply(ctx, cs, Options{Inventory: fakegpu.Inventory{Count: 4}}); err != nil {
		t.Fatal(err)
	}
	get := func() *appsv1.DaemonSet {
		t.Helper()
		ds, err := cs.AppsV1().DaemonSets(Namespace).Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	ds := get()
	if !slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--count=4") {
		t.Errorf("created args %q", ds.Spec.Template.Spec.Containers[0].Args)
	}

	// Someone labels it; a re-apply with another inventory and image updates the spec, keeps the label.
	ds.Labels["team"] = "infra"
	if _, err := cs.AppsV1().DaemonSets(Namespace).Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One conflict on the first update, as with a concurrent writer: Apply must retry.
	var conflicts atomic.Int32
	cs.PrependReactor("update", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts.Add(1) == 1 {
			return true, nil, apierrors.NewConflict(appsv1.Resource("daemonsets"), Name, nil)
		}
		return false, nil, nil
	})
	if err := Apply(ctx, cs, Options{Inventory: fakegpu.Inventory{Count: 8, NVLinkDomainSize: 4}, Image: "img:v2"}); err != nil {
		t.Fatal(err)
	}
	if conflicts.Load() < 2 {
		t.Errorf("update attempts %d, want a retry after the conflict", conflicts.Load())
	}
	ds = get()
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Image != "img:v2" || !slices.Contains(c.Args, "--count=8") || !slices.Contains(c.Args, "--nvlink-domain-size=4") {
		t.Errorf("updated container %s %q", c.Image, c.Args)
	}
	if ds.Labels["team"] != "infra" || ds.Labels["app.kubernetes.io/name"] != Name {
		t.Errorf("labels after update %v", ds.Labels)
	}

	if err := Apply(ctx, cs, Options{}); err == nil {
		t.Error("Apply with an invalid inventory succeeded")
	}
}

func node(name string, gpus int64, lbls map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	if gpus >= 0 {
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return n
}

func TestWaitAllocatable(t *testing.T) {
	inv := fakegpu.Inventory{Count: 8}
	worker := map[string]string{"role": "worker"}
	ctx := context.Background()

	t.Run("already there", func(t *testing.T) {
		cs := fake.NewClientset(node("w1", 8, worker), node("w2", 8, worker), node("cp", -1, nil))
		if err := WaitAllocatable(ctx, cs, "role=worker", inv, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("becomes allocatable", func(t *testing.T) {
		cs := fake.NewClientset(node("w1", 8, worker), node("w2", 0, worker))
		// The update is made by a reactor when the wait lists, so it must come through the watch
		// (or a re-list), not the first list.
		var once atomic.Bool
		cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if once.CompareAndSwap(false, true) {
				go func() {
					_, _ = cs.CoreV1().Nodes().UpdateStatus(ctx, node("w2", 8, worker), metav1.UpdateOptions{})
				}()
			}
			return false, nil, nil
		})
		if err := WaitAllocatable(ctx, cs, "role=worker", inv, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("timeout names nodes", func(t *testing.T) {
		cs := fake.NewClientset(node("w1", 8, worker), node("w2", 4, worker), node("w3", -1, worker))
		err := WaitAllocatable(ctx, cs, "role=worker", inv, 200*time.Millisecond)
		if err == nil {
			t.Fatal("no error")
		}
		for _, w := range []string{"role=worker", "nvidia.com/gpu=8", "w2 reports 4", "w3 reports no nvidia.com/gpu", "2 of 3", "200ms"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
		if strings.Contains(err.Error(), "w1") {
			t.Errorf("error names w1, which has all its GPUs: %q", err)
		}
	})

	t.Run("no nodes", func(t *testing.T) {
		cs := fake.NewClientset()
		err := WaitAllocatable(ctx, cs, "", inv, 100*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "no node matched") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("bad selector", func(t *testing.T) {
		err := WaitAllocatable(ctx, fake.NewClientset(), "a in (", inv, time.Second)
		if err == nil || !strings.Contains(err.Error(), "a in (") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestDefaultImageIsImageDefaultRef(t *testing.T) {
	if DefaultImage != image.DefaultRef {
		t.Errorf("deploy.DefaultImage %q != image.DefaultRef %q", DefaultImage, image.DefaultRef)
	}
}

// TestDaemonSetDRA: with DRA the pods run the DRA plugin (the --gpu-api and --clique-label args,
// which the binary's own flags parse back), with the kubelet's registry, the driver's plugin
// directory and the CDI directory mounted at their node paths, and the service account's token;
// the device plugin's directory only when the device plugin runs too.
func TestDaemonSetDRA(t *testing.T) {
	inv := fakegpu.Inventory{Count: 2}
	for _, api := range []fakegpu.API{fakegpu.APIDRA, fakegpu.APIBoth} {
		t.Run(string(api), func(t *testing.T) {
			ds, err := DaemonSet(Options{Inventory: inv, API: api, CliqueLabel: "rack"})
			if err != nil {
				t.Fatal(err)
			}
			spec := ds.Spec.Template.Spec
			if spec.ServiceAccountName != ServiceAccount || spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken {
				t.Errorf("service account %q, automount %v", spec.ServiceAccountName, spec.AutomountServiceAccountToken)
			}
			if ds.Labels[fakegpu.LabelManaged] != "true" {
				t.Errorf("DaemonSet labels %v lack %s", ds.Labels, fakegpu.LabelManaged)
			}
			c := spec.Containers[0]
			fs := flag.NewFlagSet("plugin", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			finish := plugin.BindFlags(fs, func(string) string { return "node-1" })
			finishDRA := draplugin.BindFlags(fs)
			if err := fs.Parse(c.Args); err != nil {
				t.Fatalf("args %q do not parse: %v", c.Args, err)
			}
			if _, err := finish(); err != nil {
				t.Fatalf("args %q: %v", c.Args, err)
			}
			f, err := finishDRA()
			if err != nil || f.API != api || f.CliqueLabel != "rack" || f.CDIDir != CDIDir || f.RegistrarDir != RegistryDir || f.PluginDataDir != DRAPluginDir {
				t.Errorf("args %q parse to %+v, %v", c.Args, f, err)
			}
			mounts := map[string]string{}
			for _, m := range c.VolumeMounts {
				mounts[m.Name] = m.MountPath
			}
			hostPaths := map[string]string{}
			for _, v := range spec.Volumes {
				if v.HostPath == nil {
					t.Errorf("volume %s is not a hostPath", v.Name)
					continue
				}
				hostPaths[v.Name] = v.HostPath.Path
			}
			want := map[string]string{"plugins-registry": RegistryDir, "dra-plugin": DRAPluginDir, "cdi": CDIDir}
			if api == fakegpu.APIBoth {
				want["device-plugins"] = "/var/lib/kubelet/device-plugins"
			}
			if !maps.Equal(mounts, want) || !maps.Equal(hostPaths, want) {
				t.Errorf("mounts %v, host paths %v, want both %v (same path inside and out)", mounts, hostPaths, want)
			}
		})
	}
	// The device plugin alone is as it was: no token, no DRA mounts.
	ds, err := DaemonSet(Options{Inventory: inv})
	if err != nil {
		t.Fatal(err)
	}
	if s := ds.Spec.Template.Spec; s.ServiceAccountName != "" || *s.AutomountServiceAccountToken || len(s.Volumes) != 1 ||
		slices.ContainsFunc(s.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--gpu-api") }) {
		t.Errorf("device plugin DaemonSet: service account %q, automount %v, volumes %v, args %q", s.ServiceAccountName, *s.AutomountServiceAccountToken, s.Volumes, s.Containers[0].Args)
	}
}

// TestObjectsDRA: with DRA, Apply's objects are the service account, a ClusterRole granting what
// the kubeletplugin helper needs (and no more), its binding to the account, the DeviceClass and
// the DaemonSet, every one labelled managed so cleanup finds it.
func TestObjectsDRA(t *testing.T) {
	objs, err := Objects(Options{Inventory: fakegpu.Inventory{Count: 2}, API: fakegpu.APIDRA})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 5 {
		t.Fatalf("objects %d, want 5", len(objs))
	}
	sa, ok1 := objs[0].(*corev1.ServiceAccount)
	role, ok2 := objs[1].(*rbacv1.ClusterRole)
	binding, ok3 := objs[2].(*rbacv1.ClusterRoleBinding)
	class, ok4 := objs[3].(*resourcev1.DeviceClass)
	_, ok5 := objs[4].(*appsv1.DaemonSet)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		t.Fatalf("objects %T %T %T %T %T", objs[0], objs[1], objs[2], objs[3], objs[4])
	}
	for _, o := range []metav1.Object{sa, role, binding, class} {
		if o.GetLabels()[fakegpu.LabelManaged] != "true" {
			t.Errorf("%s labels %v lack %s", o.GetName(), o.GetLabels(), fakegpu.LabelManaged)
		}
	}
	if sa.Name != ServiceAccount || sa.Namespace != Namespace {
		t.Errorf("service account %s/%s", sa.Namespace, sa.Name)
	}
	if binding.RoleRef.Name != role.Name || binding.RoleRef.Kind != "ClusterRole" || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("binding %+v does not bind %s to %s", binding, role.Name, sa.Name)
	}
	granted := map[string][]string{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				granted[g+"/"+res] = append(granted[g+"/"+res], r.Verbs...)
			}
		}
	}
	want := map[string][]string{
		"resource.k8s.io/resourceslices": {"get", "list", "watch", "create", "update", "patch", "delete"},
		"resource.k8s.io/resourceclaims": {"get"},
		"/nodes":                         {"get"},
	}
	if !maps.EqualFunc(granted, want, slices.Equal) {
		t.Errorf("ClusterRole grants %v, want %v", granted, want)
	}
	if class.Name != fakegpu.DeviceClassName || !apiequality.Semantic.DeepEqual(class.Spec, fakegpu.DeviceClass().Spec) {
		t.Errorf("DeviceClass %+v", class)
	}
}

// TestApplyDRA creates every object, and a second Apply (another DaemonSet instance of the same
// cluster) updates the shared ones without losing a label someone added.
func TestApplyDRA(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	o := Options{Inventory: fakegpu.Inventory{Count: 2}, API: fakegpu.APIDRA, Instance: "0"}
	if err := Apply(ctx, cs, o); err != nil {
		t.Fatal(err)
	}
	role, err := cs.RbacV1().ClusterRoles().Get(ctx, ClusterRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role.Labels["team"] = "infra"
	role.Rules = nil
	if _, err := cs.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	o.Instance = "1"
	if err := Apply(ctx, cs, o); err != nil {
		t.Fatal(err)
	}
	role, err = cs.RbacV1().ClusterRoles().Get(ctx, ClusterRole, metav1.GetOptions{})
	if err != nil || role.Labels["team"] != "infra" || len(role.Rules) != 3 {
		t.Errorf("ClusterRole after re-apply: %+v, %v", role, err)
	}
	for _, get := range []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(Namespace).Get(ctx, ServiceAccount, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, ClusterRole, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.ResourceV1().DeviceClasses().Get(ctx, fakegpu.DeviceClassName, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.AppsV1().DaemonSets(Namespace).Get(ctx, Name+"-0", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cs.AppsV1().DaemonSets(Namespace).Get(ctx, Name+"-1", metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); err != nil {
			t.Error(err)
		}
	}
}

// TestDRAConstants keeps deploy's copies of the DRA plugin's paths equal to the plugin's own.
func TestDRAConstants(t *testing.T) {
	if CDIDir != draplugin.DefaultCDIDir || RegistryDir != kubeletplugin.KubeletRegistryDir ||
		DRAPluginDir != filepath.Join(kubeletplugin.KubeletPluginsDir, fakegpu.DRADriver) {
		t.Errorf("CDIDir %s, RegistryDir %s, DRAPluginDir %s; the plugin's: %s, %s, %s/%s", CDIDir, RegistryDir, DRAPluginDir,
			draplugin.DefaultCDIDir, kubeletplugin.KubeletRegistryDir, kubeletplugin.KubeletPluginsDir, fakegpu.DRADriver)
	}
}
