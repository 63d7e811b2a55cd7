package lab

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestManifestsDecodeInTheLabsOrder(t *testing.T) {
	for _, tt := range []struct {
		file   string
		ns     string
		groups []string
		pods   []string
	}{
		{BasicControl, nsBasic, []string{"team-a", "team-b"}, []string{"team-a-0", "team-b-0", "team-a-1", "team-b-1", "team-a-2", "team-b-2"}},
		{NativeGang, nsGang, []string{"team-a", "team-b"}, []string{"team-a-0", "team-b-0", "team-a-1", "team-b-1", "team-a-2", "team-b-2"}},
		{Elastic, nsElastic, []string{"team-c"}, []string{"team-c-0", "team-c-1", "team-c-2", "team-c-3", "team-c-4"}},
	} {
		b, err := Manifest(tt.file, "example.test/pause:1")
		if err != nil {
			t.Fatal(err)
		}
		objs, err := Decode(tt.file, b)
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, o := range objs {
			switch o := o.(type) {
			case *corev1.Namespace:
				order = append(order, "ns/"+o.Name)
			case *schedv1beta1.PodGroup:
				order = append(order, "pg/"+o.Name)
				gang := o.Spec.SchedulingPolicy.Gang
				if (tt.file == BasicControl) != (o.Spec.SchedulingPolicy.Basic != nil) || (tt.file != BasicControl && (gang == nil || gang.MinCount != 3)) {
					t.Errorf("%s: PodGroup %s policy %+v", tt.file, o.Name, o.Spec.SchedulingPolicy)
				}
			case *corev1.Pod:
				order = append(order, o.Name)
				if o.Namespace != tt.ns || o.Spec.Containers[0].Image != "example.test/pause:1" || podGPUs(o) != 2 || *o.Spec.SchedulingGroup.PodGroupName != strings.TrimSuffix(o.Name, o.Name[len(o.Name)-2:]) {
					t.Errorf("%s: pod %+v", tt.file, o)
				}
			}
		}
		want := []string{"ns/" + tt.ns}
		for _, g := range tt.groups {
			want = append(want, "pg/"+g)
		}
		want = append(want, tt.pods...)
		if strings.Join(order, " ") != strings.Join(want, " ") {
			t.Errorf("%s: objects %v, want %v", tt.file, order, want)
		}
	}
}

func TestDecodeNamesFileDocumentAndField(t *testing.T) {
	bad := "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containerz: []\n"
	_, err := Decode("bad.yaml", []byte(bad))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml: document 2 (Pod)") || !strings.Contains(err.Error(), "containerz") {
		t.Errorf("unknown field: %v", err)
	}
	_, err = Decode("svc.yaml", []byte("apiVersion: v1\nkind: Service\n"))
	if err == nil || !strings.Contains(err.Error(), `kind "Service"`) {
		t.Errorf("other kind: %v", err)
	}
}

func pods(spec ...string) []podState {
	var out []podState
	for _, s := range spec {
		name, node, _ := strings.Cut(s, "@")
		p := podState{Name: name, Group: name[:len(name)-2], Node: node, Phase: "Pending"}
		if node != "" {
			p.Phase = "Running"
		} else {
			p.Unschedulable = true
		}
		out = append(out, p)
	}
	return out
}

func group(name string, status metav1.ConditionStatus, reason, msg string) schedv1beta1.PodGroup {
	g := schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if status != "" {
		g.Status.Conditions = []metav1.Condition{{Type: conditionType, Status: status, Reason: reason, Message: msg}}
	}
	return g
}

func TestVerdict1(t *testing.T) {
	w := "gpu-lab-worker"
	basic := snapshot{Pods: pods("team-a-0@"+w, "team-a-1@"+w, "team-a-2", "team-b-0@"+w, "team-b-1@"+w, "team-b-2"), WorkerGPUs: 8}
	gang := snapshot{Pods: pods("team-a-0@"+w, "team-a-1@"+w, "team-a-2@"+w, "team-b-0", "team-b-1", "team-b-2"), WorkerGPUs: 6}
	if v := verdict1(basic, gang); !v.Reproduced {
		t.Errorf("the lab's outcome: %+v", v)
	}
	// A scheduler that places gangs pod by pod splits them 2+1 and fills the GPUs.
	split := snapshot{Pods: pods("team-a-0@"+w, "team-a-1@"+w, "team-a-2", "team-b-0@"+w, "team-b-1@"+w, "team-b-2"), WorkerGPUs: 8}
	if v := verdict1(basic, split); v.Reproduced || !strings.Contains(strings.Join(v.Findings, " "), "gang: team-a 2 bound, team-b 2 bound") {
		t.Errorf("split gang: %+v", v)
	}
	// A scheduler that treats basic groups as gangs leaves the control run at 3+0.
	if v := verdict1(gang, gang); v.Reproduced {
		t.Errorf("basic as gang: %+v", v)
	}
}

func TestVerdict2(t *testing.T) {
	basic := snapshot{Groups: []schedv1beta1.PodGroup{group("team-a", "True", "Scheduled", ""), group("team-b", "True", "Scheduled", "")}}
	gang := snapshot{
		Pods:   pods("team-a-0@n", "team-a-1@n", "team-a-2@n", "team-b-0", "team-b-1", "team-b-2"),
		Groups: []schedv1beta1.PodGroup{group("team-a", "True", "Scheduled", ""), group("team-b", "False", "Unschedulable", "minCount (3) cannot be satisfied: 0 scheduled, 3 remaining")},
	}
	if v := verdict2(basic, gang); !v.Reproduced {
		t.Errorf("the lab's outcome: %+v", v)
	}
	noWhy := gang
	noWhy.Groups = []schedv1beta1.PodGroup{group("team-a", "True", "Scheduled", ""), group("team-b", "False", "Unschedulable", "")}
	if v := verdict2(basic, noWhy); v.Reproduced {
		t.Errorf("an incomplete gang without a reason: %+v", v)
	}
	never := gang
	never.Groups = []schedv1beta1.PodGroup{group("team-a", "True", "Scheduled", ""), group("team-b", "", "", "")}
	if v := verdict2(basic, never); v.Reproduced {
		t.Errorf("no condition on the incomplete gang: %+v", v)
	}
	honest := snapshot{Groups: []schedv1beta1.PodGroup{group("team-a", "False", "Unschedulable", "1 pending"), group("team-b", "True", "Scheduled", "")}}
	if v := verdict2(honest, gang); v.Reproduced {
		t.Errorf("a basic group reported False: %+v", v)
	}
}

func TestVerdict4(t *testing.T) {
	four := pods("team-c-0@n", "team-c-1@n", "team-c-2@n", "team-c-3@n", "team-c-4")
	ok := snapshot{Pods: four, WorkerGPUs: 8, Groups: []schedv1beta1.PodGroup{group("team-c", "True", "Scheduled", "")}}
	if v := verdict4(ok, nil); !v.Reproduced {
		t.Errorf("the lab's outcome: %+v", v)
	}
	quota := snapshot{Pods: pods("team-c-0@n", "team-c-1@n", "team-c-2@n", "team-c-3", "team-c-4"), WorkerGPUs: 6, Groups: ok.Groups}
	if v := verdict4(quota, nil); v.Reproduced || !strings.Contains(strings.Join(v.Findings, " "), "quota") {
		t.Errorf("minCount as a quota: %+v", v)
	}

	// The stale-cache race: True, then False milliseconds later, and nothing after.
	const msg = "pod group is unschedulable, pod group preemption: No preemption victims found for incoming preemptor"
	at := time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)
	flipped := snapshot{Pods: four, WorkerGPUs: 8, Groups: []schedv1beta1.PodGroup{group("team-c", "False", "Unschedulable", msg)}}
	race := []seenCondition{{Status: "True", Reason: "Scheduled", At: at}, {Status: "False", Reason: "Unschedulable", Message: msg, At: at.Add(40 * time.Millisecond)}}
	if v := verdict4(flipped, race); !v.Reproduced || !strings.Contains(strings.Join(v.Findings, " "), "KNOWN-01") || !strings.Contains(strings.Join(v.Findings, " "), "40ms later") {
		t.Errorf("the race after the lab's outcome: %+v", v)
	}
	for name, seen := range map[string][]seenCondition{
		"never True":        race[1:],
		"False much later":  {race[0], {Status: "False", Reason: "Unschedulable", Message: msg, At: at.Add(5 * time.Second)}},
		"True twice before": {race[0], {Status: "False", Reason: "Unschedulable", Message: "other", At: at.Add(time.Second)}, race[0], race[1]},
		"no history":        nil,
	} {
		if v := verdict4(flipped, seen); v.Reproduced {
			t.Errorf("%s: a False condition passed as the race: %+v", name, v)
		}
	}
	if v := verdict4(snapshot{Pods: pods("team-c-0@n", "team-c-1@n", "team-c-2@n", "team-c-3", "team-c-4"), WorkerGPUs: 6, Groups: flipped.Groups}, race); v.Reproduced {
		t.Errorf("the race excuses the condition, not the counts: %+v", v)
	}
}

func TestMessageKinds(t *testing.T) {
	ev := func(pod, msg string) corev1.Event {
		return corev1.Event{Reason: "FailedScheduling", InvolvedObject: corev1.ObjectReference{Name: pod}, Message: msg}
	}
	evs := []corev1.Event{
		ev("team-b-0", labResourceMessage),
		ev("team-b-2", "pod group is unschedulable, minCount (3) cannot be satisfied: 1 scheduled, 0 remaining"),
		ev("team-a-0", "pod group is unschedulable, of the other team"),
		ev("team-b-1", labResourceMessage),
	}
	res, gang := messageKinds(evs, "team-b", "Insufficient nvidia.com/gpu")
	if res != labResourceMessage || !strings.HasPrefix(gang, "pod group is unschedulable, minCount") {
		t.Errorf("kinds %q %q", res, gang)
	}
	if res, gang := messageKinds(evs[:1], "team-b", "Insufficient nvidia.com/gpu"); res == "" || gang != "" {
		t.Errorf("resource only: %q %q", res, gang)
	}
	lines := eventsTable(append(evs, evs[0]))
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "POD") || !strings.HasPrefix(lines[1], "team-a-0") || !strings.HasPrefix(lines[2], "team-b-0") {
		t.Errorf("sort -u table:\n%s", strings.Join(lines, "\n"))
	}
}

func TestRendering(t *testing.T) {
	if got := gpuLine(8)[0]; got != labControlGPUs[0] {
		t.Errorf("gpu line %q, want the lab's %q", got, labControlGPUs[0])
	}
	s := snapshot{Pods: pods("team-a-0@gpu-lab-worker", "team-a-1@gpu-lab-worker", "team-a-2")}
	s.Pods = append(s.Pods, pods("team-b-0@gpu-lab-worker", "team-b-1@gpu-lab-worker", "team-b-2")...)
	if got := podsTable(s, true); strings.Join(got, "\n") != strings.Join(labControlPods, "\n") {
		t.Errorf("pods table:\n%s\nwant the lab's:\n%s", strings.Join(got, "\n"), strings.Join(labControlPods, "\n"))
	}
	basic := schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Basic: &schedv1beta1.BasicSchedulingPolicy{}}}}
	if got := basicGroupsTable([]schedv1beta1.PodGroup{basic}); !strings.Contains(got[1], "map[basic:map[]]") {
		t.Errorf("basic policy rendered as %q", got[1])
	}
	two := sideBySide([]string{"a", "bb"}, []string{"x"}, "here", 40)
	if len(two) != 3 || two[0] != "  [here] | [the lab]" || two[2] != "  bb" {
		t.Errorf("side by side: %q", two)
	}
	stacked := sideBySide([]string{strings.Repeat("a", 50)}, []string{"x"}, "here", 40)
	if len(stacked) != 4 || stacked[2] != "  [the lab]" {
		t.Errorf("stacked: %q", stacked)
	}
}
