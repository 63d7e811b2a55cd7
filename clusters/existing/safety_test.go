package existing

import (
	"context"
	"errors"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// writeKubeconfig writes a kubeconfig with one context per entry (context name → cluster name,
// server); current is its current-context.
func writeKubeconfig(t *testing.T, path, current string, contexts map[string][2]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for _, c := range contexts {
		b.WriteString("- name: " + c[0] + "\n  cluster: {server: '" + c[1] + "'}\n")
	}
	b.WriteString("users:\n- name: u\n  user: {token: x}\ncontexts:\n")
	for name, c := range contexts {
		b.WriteString("- name: " + name + "\n  context: {cluster: " + c[0] + ", user: u}\n")
	}
	b.WriteString("current-context: " + current + "\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestManagedLabel(t *testing.T) {
	// The value is the contract with everything already labelled in users' clusters.
	if ManagedLabel != "gangbench.dev/managed" {
		t.Errorf("ManagedLabel = %q", ManagedLabel)
	}
}

func TestCheckSafe(t *testing.T) {
	dir := t.TempDir()
	localState, kindState := filepath.Join(dir, "state", "clusters"), filepath.Join(dir, "state", "kind")
	own := []string{localState, kindState}
	one := func(path, ctx, cluster, server string) string {
		return writeKubeconfig(t, path, ctx, map[string][2]string{ctx: {cluster, server}})
	}
	ownLocal := one(filepath.Join(localState, "default", "kubeconfig-admin"), "gangbench-default", "gangbench-default", "https://127.0.0.1:40123")
	ownKind := one(filepath.Join(kindState, "gpu", "kubeconfig"), "kind-gpu", "kind-gpu", "https://127.0.0.1:40124")
	// The user named the local cluster "prod": it is still a throw-away cluster on this machine.
	ownProdName := one(filepath.Join(localState, "prod", "kubeconfig-admin"), "gangbench-prod", "gangbench-prod", "https://127.0.0.1:40125")
	foreign := func(name, ctx, cluster, server string) string {
		return one(filepath.Join(dir, "home", name), ctx, cluster, server)
	}

	for _, tc := range []struct {
		name       string
		kubeconfig string
		context    string
		opts       SafetyOptions
		flag       string // "" means allowed
		want       []string
	}{
		{name: "own local cluster", kubeconfig: ownLocal},
		{name: "own kind cluster", kubeconfig: ownKind},
		{name: "own cluster named prod", kubeconfig: ownProdName},
		{name: "foreign kind cluster", kubeconfig: foreign("kind", "kind-kind", "kind-kind", "https://127.0.0.1:6443"),
			flag: AllowExistingFlag, want: []string{`context "kind-kind"`, "gangbench did not create this cluster", localState, "--allow-existing-cluster"}},
		{name: "foreign kind cluster allowed", kubeconfig: foreign("kind", "kind-kind", "kind-kind", "https://127.0.0.1:6443"), opts: SafetyOptions{AllowExisting: true}},
		{name: "kind in-network endpoint", kubeconfig: foreign("kind-int", "kind-gpu", "kind-gpu", "https://gpu-control-plane:6443"), opts: SafetyOptions{AllowExisting: true}},
		{name: "kwokctl", kubeconfig: foreign("kwok", "kwok-a", "kwok-a", "https://kwok-a-kube-apiserver:6443"), opts: SafetyOptions{AllowExisting: true}},
		{name: "minikube", kubeconfig: foreign("mk", "minikube", "minikube", "https://192.168.49.2:8443"), opts: SafetyOptions{AllowExisting: true}},
		{name: "minikube by name", kubeconfig: foreign("mk2", "minikube", "minikube", "https://minikube:8443"), opts: SafetyOptions{AllowExisting: true}},
		{name: "lab cluster on a private network", kubeconfig: foreign("lab", "lab", "lab", "https://10.1.2.3:6443"), opts: SafetyOptions{AllowExisting: true}},
		{name: "ipv6 loopback", kubeconfig: foreign("v6", "dev", "dev", "https://[::1]:6443"), opts: SafetyOptions{AllowExisting: true}},
		{name: "prod context", kubeconfig: foreign("p1", "prod-gpu", "c1", "https://10.0.0.1:6443"), opts: SafetyOptions{AllowExisting: true},
			flag: ForceFlag, want: []string{`context "prod-gpu"`, `context "prod-gpu" contains "prod"`, "--force"}},
		{name: "production cluster name", kubeconfig: foreign("p2", "gpu", "eu.Production.gpu", "https://10.0.0.1:6443"), opts: SafetyOptions{AllowExisting: true},
			flag: ForceFlag, want: []string{`cluster "eu.Production.gpu" contains "production"`}},
		{name: "gke prd", kubeconfig: foreign("p3", "gke_proj_us-central1_prd", "gke_proj_us-central1_prd", "https://10.0.0.1"), opts: SafetyOptions{AllowExisting: true},
			flag: ForceFlag, want: []string{`contains "prd"`}},
		{name: "live server", kubeconfig: foreign("p4", "gpu", "gpu", "https://api.live.example.internal:6443"), opts: SafetyOptions{AllowExisting: true},
			flag: ForceFlag, want: []string{`server "api.live.example.internal" contains "live"`}},
		{name: "not whole words", kubeconfig: foreign("p5", "product-alive-prodigy", "preprod2", "https://127.0.0.1:6443"), opts: SafetyOptions{AllowExisting: true}},
		{name: "public address", kubeconfig: foreign("pub", "gpu", "gpu", "https://34.120.1.2"), opts: SafetyOptions{AllowExisting: true},
			flag: ForceFlag, want: []string{"server https://34.120.1.2 is a public address"}},
		{name: "cloud endpoint", kubeconfig: foreign("eks", "gpu", "gpu", "https://ABC.gr7.us-west-2.eks.amazonaws.com"), opts: SafetyOptions{AllowExisting: true},
			flag: ForceFlag, want: []string{"is not loopback, a private address, or a kind, kwok or minikube endpoint"}},
		{name: "forced", kubeconfig: foreign("p1", "prod-gpu", "c1", "https://34.120.1.2"), opts: SafetyOptions{AllowExisting: true, Force: true}},
		// --force alone does not stand in for --allow-existing-cluster: they answer different questions.
		{name: "force without allow", kubeconfig: foreign("kind", "kind-kind", "kind-kind", "https://127.0.0.1:6443"), opts: SafetyOptions{Force: true},
			flag: AllowExistingFlag},
		{name: "no state dirs", kubeconfig: ownLocal, opts: SafetyOptions{OwnStateDirs: []string{}}, flag: AllowExistingFlag, want: []string{"no state dir was given"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if o.OwnStateDirs == nil {
				o.OwnStateDirs = own
			}
			err := CheckSafe(tc.kubeconfig, tc.context, o)
			if tc.flag == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) || re.Flag != tc.flag || re.Kubeconfig != tc.kubeconfig {
				t.Fatalf("got %v, want a refusal pointing at --%s", err, tc.flag)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func TestCheckSafeContexts(t *testing.T) {
	dir := t.TempDir()
	p := writeKubeconfig(t, filepath.Join(dir, "config"), "dev", map[string][2]string{
		"dev":  {"dev", "https://127.0.0.1:6443"},
		"prod": {"prod", "https://10.9.9.9:6443"},
	})
	o := SafetyOptions{AllowExisting: true}
	if err := CheckSafe(p, "", o); err != nil {
		t.Errorf("current context dev: %v", err)
	}
	var re *RefusedError
	if err := CheckSafe(p, "prod", o); !errors.As(err, &re) || re.Context != "prod" || re.Flag != ForceFlag {
		t.Errorf("an explicit context is the one judged: %v", err)
	}
	if err := CheckSafe(p, "staging", o); err == nil || !strings.Contains(err.Error(), `no context "staging" (it has: dev, prod)`) {
		t.Errorf("unknown context: %v", err)
	}
	none := writeKubeconfig(t, filepath.Join(dir, "none"), "", map[string][2]string{"a": {"a", "https://127.0.0.1"}})
	if err := CheckSafe(none, "", o); err == nil || !strings.Contains(err.Error(), "no current context; pick one of: a") {
		t.Errorf("no current context: %v", err)
	}
	missing := filepath.Join(dir, "missing")
	if err := CheckSafe(missing, "", o); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	if err := CheckSafe("", "", o); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("no kubeconfig: %v", err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("clusters: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckSafe(garbage, "", o); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Errorf("unparsable kubeconfig: %v", err)
	}
}

func TestCheckSafeSymlinks(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "real-state")
	prod := writeKubeconfig(t, filepath.Join(dir, "home", ".kube", "config"), "kind-kind", map[string][2]string{"kind-kind": {"kind-kind", "https://127.0.0.1:6443"}})
	// A link inside the state dir to a kubeconfig outside it is not a cluster gangbench made.
	link := filepath.Join(state, "c", "kubeconfig-admin")
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(prod, link); err != nil {
		t.Fatal(err)
	}
	var re *RefusedError
	if err := CheckSafe(link, "", SafetyOptions{OwnStateDirs: []string{state}}); !errors.As(err, &re) || re.Flag != AllowExistingFlag {
		t.Errorf("symlink out of the state dir: %v", err)
	}
	// A state dir reached through a symlink (a linked home) still counts as gangbench's.
	own := writeKubeconfig(t, filepath.Join(state, "d", "kubeconfig-admin"), "gangbench-d", map[string][2]string{"gangbench-d": {"gangbench-d", "https://127.0.0.1:6443"}})
	alias := filepath.Join(dir, "alias-state")
	if err := os.Symlink(state, alias); err != nil {
		t.Fatal(err)
	}
	if err := CheckSafe(own, "", SafetyOptions{OwnStateDirs: []string{alias}}); err != nil {
		t.Errorf("state dir given through a symlink: %v", err)
	}
	if err := CheckSafe(filepath.Join(alias, "d", "kubeconfig-admin"), "", SafetyOptions{OwnStateDirs: []string{state}}); err != nil {
		t.Errorf("kubeconfig given through a symlinked state dir: %v", err)
	}
}

func TestProductionWord(t *testing.T) {
	for s, want := range map[string]string{
		"prod": "prod", "PROD": "prod", "my-prod-cluster": "prod", "prod_eu": "prod", "a.production.b": "production",
		"arn:aws:eks:us-east-1:1:cluster/prd": "prd", "live": "live", "team@live": "live",
		"product": "", "alive": "", "prodigy": "", "preprod": "", "staging": "", "": "", "prod1": "",
	} {
		if got := productionWord(s); got != want {
			t.Errorf("productionWord(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestDeleteManaged(t *testing.T) {
	managed := map[string]string{ManagedLabel: "true"}
	notOurs := map[string]string{ManagedLabel: "false"}
	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: labels, UID: types.UID("uid-" + name)}
	}
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: meta("gb-lane-1", managed)},
		&corev1.Namespace{ObjectMeta: meta("team-a", nil)},
		&corev1.Namespace{ObjectMeta: meta("kube-system", nil)},
		&corev1.Namespace{ObjectMeta: meta("lookalike", notOurs)},
		// A pod is never deleted by name, even with the label: it goes with its namespace or not at all.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a", Labels: managed}},
		&schedulingv1.PriorityClass{ObjectMeta: meta("gb-high", managed), Value: 10},
		&schedulingv1.PriorityClass{ObjectMeta: meta("system-cluster-critical", nil), Value: 2000000000},
		&rbacv1.ClusterRole{ObjectMeta: meta("gb-role", managed)},
		&rbacv1.ClusterRole{ObjectMeta: meta("cluster-admin", nil)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: meta("gb-binding", managed)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: meta("cluster-admin", nil)},
		&corev1.Node{ObjectMeta: meta("kwok-gpu-0", managed)},
		&corev1.Node{ObjectMeta: meta("gpu-node-1", nil)},
		&admissionv1.ValidatingAdmissionPolicy{ObjectMeta: meta("gb-refuse", managed)},
		&admissionv1.ValidatingAdmissionPolicy{ObjectMeta: meta("team-policy", nil)},
		&admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("gb-refuse", managed)},
		&admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta("team-policy", nil)},
	}
	want := map[string][]string{
		"namespaces":          {"kube-system", "lookalike", "team-a"},
		"pods":                {"p"},
		"priorityclasses":     {"system-cluster-critical"},
		"clusterroles":        {"cluster-admin"},
		"clusterrolebindings": {"cluster-admin"},
		"nodes":               {"gpu-node-1"},
		"policies":            {"team-policy"},
		"policybindings":      {"team-policy"},
	}
	check := func(t *testing.T, cs *fake.Clientset) {
		t.Helper()
		if err := DeleteManaged(context.Background(), cs); err != nil {
			t.Fatal(err)
		}
		if got := left(t, cs); !reflect.DeepEqual(got, want) {
			t.Errorf("left:\n%v\nwant:\n%v", got, want)
		}
	}

	t.Run("selector", func(t *testing.T) { check(t, fake.NewClientset(objs...)) })

	// A server that ignores the label selector (and lists everything) must not make it delete
	// everything: each object's own labels are checked again. The fake clientset filters lists on
	// the client side, so this needs a real client talking HTTP.
	t.Run("selector ignored", func(t *testing.T) {
		var mu sync.Mutex
		var deleted []string
		mux := http.NewServeMux()
		for path, kind := range map[string]string{
			"/api/v1/namespaces": "v1 NamespaceList",
			"/api/v1/nodes":      "v1 NodeList",
			"/apis/scheduling.k8s.io/v1/priorityclasses":                              "scheduling.k8s.io/v1 PriorityClassList",
			"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings":                  "rbac.authorization.k8s.io/v1 ClusterRoleBindingList",
			"/apis/rbac.authorization.k8s.io/v1/clusterroles":                         "rbac.authorization.k8s.io/v1 ClusterRoleList",
			"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies":       "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyList",
			"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings": "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBindingList",
		} {
			apiVersion, kind, _ := strings.Cut(kind, " ")
			mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
				// Every list answers with one labelled and one unlabelled object, whatever was asked.
				w.Write([]byte(`{"kind":"` + kind + `","apiVersion":"` + apiVersion + `","metadata":{},"items":[` +
					`{"metadata":{"name":"ours","uid":"u1","labels":{"gangbench.dev/managed":"true"}}},` +
					`{"metadata":{"name":"theirs","uid":"u2"}}]}`))
			})
			mux.HandleFunc("DELETE "+path+"/{name}", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				deleted = append(deleted, r.URL.Path)
				mu.Unlock()
				w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
			})
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			mux.ServeHTTP(w, r)
		}))
		defer srv.Close()
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		if err := DeleteManaged(context.Background(), cs); err != nil {
			t.Fatal(err)
		}
		slices.Sort(deleted)
		want := []string{"/api/v1/namespaces/ours", "/api/v1/nodes/ours",
			"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/ours", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/ours",
			"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/ours",
			"/apis/rbac.authorization.k8s.io/v1/clusterroles/ours", "/apis/scheduling.k8s.io/v1/priorityclasses/ours"}
		if !slices.Equal(deleted, want) {
			t.Errorf("deleted %v, want %v", deleted, want)
		}
	})

	t.Run("errors are returned", func(t *testing.T) {
		cs := fake.NewClientset(objs...)
		cs.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("apiserver on fire")
		})
		err := DeleteManaged(context.Background(), cs)
		if err == nil || !strings.Contains(err.Error(), "delete node kwok-gpu-0: apiserver on fire") {
			t.Fatalf("err = %v", err)
		}
		// The failure of one kind does not stop the others.
		if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "gb-lane-1", metav1.GetOptions{}); err == nil {
			t.Error("the managed namespace survived a node deletion failure")
		}
	})
}

// left lists what remains of each kind DeleteManaged handles, plus pods, sorted by name.
func left(t *testing.T, cs *fake.Clientset) map[string][]string {
	t.Helper()
	ctx, all := context.Background(), metav1.ListOptions{}
	out := map[string][]string{}
	add := func(kind string, err error, names ...string) {
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		out[kind] = names
	}
	ns, err := cs.CoreV1().Namespaces().List(ctx, all)
	add("namespaces", err, namesOf(ns.Items, func(o corev1.Namespace) string { return o.Name })...)
	pods, err := cs.CoreV1().Pods("").List(ctx, all)
	add("pods", err, namesOf(pods.Items, func(o corev1.Pod) string { return o.Name })...)
	pcs, err := cs.SchedulingV1().PriorityClasses().List(ctx, all)
	add("priorityclasses", err, namesOf(pcs.Items, func(o schedulingv1.PriorityClass) string { return o.Name })...)
	crs, err := cs.RbacV1().ClusterRoles().List(ctx, all)
	add("clusterroles", err, namesOf(crs.Items, func(o rbacv1.ClusterRole) string { return o.Name })...)
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, all)
	add("clusterrolebindings", err, namesOf(crbs.Items, func(o rbacv1.ClusterRoleBinding) string { return o.Name })...)
	nodes, err := cs.CoreV1().Nodes().List(ctx, all)
	add("nodes", err, namesOf(nodes.Items, func(o corev1.Node) string { return o.Name })...)
	vaps, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, all)
	add("policies", err, namesOf(vaps.Items, func(o admissionv1.ValidatingAdmissionPolicy) string { return o.Name })...)
	vapbs, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, all)
	add("policybindings", err, namesOf(vapbs.Items, func(o admissionv1.ValidatingAdmissionPolicyBinding) string { return o.Name })...)
	return out
}

func namesOf[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}
