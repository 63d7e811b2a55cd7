package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/local"
	"github.com/gangbench/gangbench/clusters/providers"
	"github.com/gangbench/gangbench/fakegpu"
)

// TestIntegrationDeleteManaged: `cluster delete --kubeconfig` removes only what carries gangbench's
// label, here from a real cluster.
func TestIntegrationDeleteManaged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real cluster; skipped with -short")
	}
	t.Setenv(local.StateDirEnv, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := local.New()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := p.Create(ctx, clusters.Spec{Name: "delmanaged", Nodes: 1, GPU: fakegpu.Inventory{Count: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(context.Background())
	cs, err := kubernetes.NewForConfig(cl.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, labels := range map[string]map[string]string{"ours": {providers.ManagedLabel: "true"}, "theirs": nil} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"cluster", "delete", "--kubeconfig", cl.KubeconfigPath}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	ours, err := cs.CoreV1().Namespaces().Get(ctx, "ours", metav1.GetOptions{})
	if err == nil && ours.DeletionTimestamp == nil {
		t.Errorf("labelled namespace was not deleted")
	}
	theirs, err := cs.CoreV1().Namespaces().Get(ctx, "theirs", metav1.GetOptions{})
	if err != nil || theirs.DeletionTimestamp != nil {
		t.Errorf("unlabelled namespace was touched: %v %v", err, theirs.DeletionTimestamp)
	}
	// The simulated GPU node is labelled too: it is gangbench's and goes as well.
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.DeletionTimestamp == nil {
			t.Errorf("node %s (labelled %v) not deleted", n.Name, n.Labels[providers.ManagedLabel])
		}
	}
}
