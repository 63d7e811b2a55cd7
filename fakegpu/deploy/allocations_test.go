package deploy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gangbench/gangbench/fakegpu"
)

// TestPodIdentity keeps ReadAllocations' lookup in step with the rendered DaemonSet: the label it
// selects by and the container it reads.
func TestPodIdentity(t *testing.T) {
	ds, err := DaemonSet(Options{Inventory: fakegpu.Default()})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	ours := labels.Set{nameLabel: Name}
	if !sel.Matches(ours) || !labels.SelectorFromSet(ours).Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("DaemonSet selector %v / pod labels %v do not match %v", sel, ds.Spec.Template.Labels, ours)
	}
	if ds.Namespace != Namespace {
		t.Errorf("namespace %s, want %s", ds.Namespace, Namespace)
	}
	if c := ds.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Name != ContainerName {
		t.Errorf("containers %v, want one named %s", c, ContainerName)
	}
}

func pluginPod(name, ns, node string, created time.Time, lbls map[string]string, restarts int32) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls, CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: ContainerName, RestartCount: restarts},
		}},
	}
}

var ourLabels = map[string]string{nameLabel: Name}

func TestPluginPods(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cs := fake.NewClientset(
		pluginPod("newer", Namespace, "w1", t0.Add(time.Minute), ourLabels, 0),
		pluginPod("older", Namespace, "w1", t0, ourLabels, 0),
		pluginPod("other-node", Namespace, "w2", t0, ourLabels, 0),
		pluginPod("other-app", Namespace, "w1", t0, map[string]string{nameLabel: "something-else"}, 0),
		pluginPod("other-namespace", "default", "w1", t0, ourLabels, 0),
	)
	ctx := context.Background()
	pods, err := pluginPods(ctx, cs, "w1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	if want := []string{"older", "newer"}; !slices.Equal(names, want) {
		t.Errorf("pods on w1 = %v, want %v (oldest first)", names, want)
	}
	for _, list := range cs.Actions() {
		if l, ok := list.(k8stesting.ListAction); ok {
			if r := l.GetListRestrictions(); r.Fields.String() != "spec.nodeName=w1" || r.Labels.String() != nameLabel+"="+Name {
				t.Errorf("list restrictions %+v, want the node and the DaemonSet's label", r)
			}
		}
	}

	for node, want := range map[string][]string{
		"w3": {"no device plugin pod", "w3", Namespace},
		"":   {"node name is empty"},
	} {
		if _, err := pluginPods(ctx, cs, node); err == nil || !containsAll(err.Error(), want) {
			t.Errorf("pluginPods(%q) = %v, want error with %q", node, err, want)
		}
	}

	listFails := fake.NewClientset()
	listFails.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	if _, err := pluginPods(ctx, listFails, "w1"); err == nil || !containsAll(err.Error(), []string{"w1", "boom"}) {
		t.Errorf("list failure: %v, want error naming the node and the cause", err)
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

const (
	recordA = `fakegpu-allocation {"time":"2025-01-02T03:04:05Z","node":"w1","resource":"nvidia.com/gpu","deviceIDs":["GPU-a-0"],"call":1,"container":0}`
	recordB = `fakegpu-allocation {"time":"2025-01-02T03:09:00Z","node":"w1","resource":"nvidia.com/gpu","deviceIDs":["GPU-a-1","GPU-a-2"],"call":1,"container":0}`
)

// logsReactor answers GetLogs with current or previous, as the kubelet would, and records which
// were asked for. A nil error with empty text is an empty log.
func logsReactor(current, previous string, previousErr error, asked *[]bool) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "log" {
			return false, nil, nil
		}
		opts := action.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions)
		if opts.Container != ContainerName {
			return true, nil, errors.New("wrong container " + opts.Container)
		}
		*asked = append(*asked, opts.Previous)
		if !opts.Previous {
			return true, &runtime.Unknown{Raw: []byte(current)}, nil
		}
		if previousErr != nil {
			return true, nil, previousErr
		}
		return true, &runtime.Unknown{Raw: []byte(previous)}, nil
	}
}

func TestReadAllocations(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	noPrevious := apierrors.NewBadRequest(`previous terminated container "device-plugin" in pod "p" not found`)
	for _, tc := range []struct {
		name              string
		restarts          int32
		current, previous string
		previousErr       error
		wantAsked         []bool // Previous of each GetLogs
		wantCalls         []string
		wantErr           []string
	}{
		{
			name:      "running, never restarted",
			current:   "time=... msg=serving\n" + recordA + "\n",
			wantAsked: []bool{false}, wantCalls: []string{"GPU-a-0"},
		},
		{
			name:     "restarted: previous first",
			restarts: 1, previous: recordA + "\nkilled\n", current: recordB + "\n",
			wantAsked: []bool{true, false}, wantCalls: []string{"GPU-a-0", "GPU-a-1,GPU-a-2"},
		},
		{
			name:     "previous logs gone",
			restarts: 1, previousErr: noPrevious, current: recordB,
			wantAsked: []bool{true, false}, wantCalls: []string{"GPU-a-1,GPU-a-2"},
		},
		{
			name:     "previous logs fail otherwise",
			restarts: 1, previousErr: errors.New("kubelet unreachable"),
			wantErr: []string{"previous logs of pod kube-system/p on node w1", "kubelet unreachable"},
		},
		{
			name:    "malformed record",
			current: "one\ntwo\nfakegpu-allocation {\"node\":\n",
			wantErr: []string{"logs of pod kube-system/p on node w1", "line 3"},
		},
		{name: "no records", current: "fake logs", wantAsked: []bool{false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(pluginPod("p", Namespace, "w1", t0, ourLabels, tc.restarts))
			var asked []bool
			cs.PrependReactor("get", "pods", logsReactor(tc.current, tc.previous, tc.previousErr, &asked))
			got, err := ReadAllocations(context.Background(), cs, "w1")
			if tc.wantErr != nil {
				if err == nil || !containsAll(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, a := range got {
				calls = append(calls, strings.Join(a.DeviceIDs, ","))
			}
			if !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("allocations %v, want %v", calls, tc.wantCalls)
			}
			if !slices.Equal(asked, tc.wantAsked) {
				t.Errorf("GetLogs previous=%v, want %v", asked, tc.wantAsked)
			}
		})
	}
}

// TestReadAllocationsDefaultFake runs against the fake clientset's own GetLogs ("fake logs"): no
// records, no error, and the log request names the pod's plugin container.
func TestReadAllocationsDefaultFake(t *testing.T) {
	cs := fake.NewClientset(pluginPod("p", Namespace, "w1", time.Now(), ourLabels, 0))
	got, err := ReadAllocations(context.Background(), cs, "w1")
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadAllocations = %v, %v; want none", got, err)
	}
	var logs int
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" && a.GetSubresource() == "log" && a.GetNamespace() == Namespace {
			logs++
			if o := a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions); o.Container != ContainerName || o.Previous {
				t.Errorf("log options %+v", o)
			}
		}
	}
	if logs != 1 {
		t.Errorf("%d log requests, want 1", logs)
	}
	if _, err := ReadAllocations(context.Background(), cs, "w9"); err == nil || !strings.Contains(err.Error(), "w9") {
		t.Errorf("node without plugin: %v, want error naming it", err)
	}
}
